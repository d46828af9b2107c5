"""Cached Uniform Writing (paper §2.3, Algorithm 1 and the attention equation; docs/reference.md §6).

Writes every min(s, L) encoder steps (s the UW interval, L = ``cache_size``). Every encoder step pushes
the incoming controller state h_{t-1} into a per-sample cache; at a write step t the cache holds the
states since the last write, d_1..d_n = h_{t-n}..h_{t-1}, and

    alpha_j = softmax_j( v^T tanh(W_c h_{t-1} + U_c d_j + V_c r_{t-1}) ),   a_t = sum_j alpha_j d_j

replaces h_{t-1} as the controller's incoming hidden state (an LSTM's cell c is kept); the controller
then runs, the memory is written and read, and the cache is cleared. The first write's cache also holds
the initial state (steps 0..t), so it has s+1 entries; later ones hold exactly the interval.

The released TF code's cache is broken (a window counter stuck at 0 and a reshape that mixes the batch,
docs/reference.md §6.2); this is the paper's mechanism, not that code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import torch
import torch.nn as nn

from uwbench.native.parts import AttentionKernel
from uwbench.registry import WRITERS
from uwbench.theory import positions_to_mask, uniform_positions
from uwbench.writing.base import Writer
from uwbench.writing.uniform import UniformConfig

INIT_STD = 0.1  # W_c, U_c, V_c, v ~ N(0, 0.1^2), no biases (docs/reference.md §6.3)


@dataclass
class CachedUniformConfig(UniformConfig):
    """UW's ``schedule`` rule plus the cache: L and the attention width A."""

    cache_size: int = 5  # L, the CUW interval and cache length (paper: 5 synthetic, 10 MNIST/documents)
    attention_size: int = 16  # A, the attention width (the paper's CUW parameter count gives 16)

    def __post_init__(self):
        for rule, ok, value in (("cache_size >= 1", self.cache_size >= 1, self.cache_size),
                                ("attention_size >= 1", self.attention_size >= 1, self.attention_size)):
            if not ok:
                raise ValueError(f"`{rule}` must hold, got {value}")


class CacheAttention(nn.Module):
    """Additive attention over the cached controller states. Parameters A(2H + read_size + 1)."""

    def __init__(self, hidden_size: int, read_size: int, attention_size: int):
        super().__init__()
        self.w_c = nn.Parameter(torch.randn(hidden_size, attention_size) * INIT_STD)  # (H, A) on h_{t-1}
        self.u_c = nn.Parameter(torch.randn(hidden_size, attention_size) * INIT_STD)  # (H, A) on d_j
        self.v_c = nn.Parameter(torch.randn(read_size, attention_size) * INIT_STD)  # (read_size, A) on r_{t-1}
        self.v = nn.Parameter(torch.randn(attention_size) * INIT_STD)  # (A,)

    def forward(self, h: torch.Tensor, cache: torch.Tensor, r: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """h (B, H) = h_{t-1}, cache (B, n, H), r (B, read_size) = r_{t-1} -> a_t (B, H), alpha (B, n)."""
        query = h @ self.w_c + r @ self.v_c  # (B, A)
        scores = torch.tanh(query.unsqueeze(1) + cache @ self.u_c) @ self.v  # (B, n)
        alpha = torch.softmax(scores, dim=-1)  # (B, n)
        return torch.bmm(alpha.unsqueeze(1), cache).squeeze(1), alpha  # (B, H), (B, n)

    def native_kernel(self) -> AttentionKernel:
        """The same attention in C++ (``native/cuw.cpp``), sizes (H, read_size, A); its backward takes
        W_c, U_c and V_c transposed (its products with them run over H and read_size)."""
        (h, a), r = self.w_c.shape, self.v_c.shape[0]
        return AttentionKernel("cuw", (h, r, a), (self.w_c, self.u_c, self.v_c, self.v), _transposed)


def _transposed(params: List[torch.Tensor]) -> List[torch.Tensor]:
    """W_c, U_c, V_c transposed (contiguous), v as it is: the attention kernel's backward's parameters."""
    return [p.t().contiguous() for p in params[:3]] + list(params[3:])


@WRITERS.register("cached_uniform", config=CachedUniformConfig, help="cached uniform writing: interval min(s, L), attention over a cache")
class CachedUniformWriter(Writer):
    cached = True

    def schedule(self, n_steps: int) -> List[bool]:
        positions = uniform_positions(n_steps, self.cfg.memory_size, cache_size=self.options.cache_size,
                                      rule=self.options.schedule)
        return positions_to_mask(positions, n_steps)

    def build_attention(self, hidden_size: int, read_size: int) -> CacheAttention:
        """The frame calls this for a ``cached`` writer and owns the returned module (its parameters)."""
        return CacheAttention(hidden_size, read_size, self.options.attention_size)
