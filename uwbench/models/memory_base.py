"""Contracts shared by the memory-augmented models (DNC, NTM) and the writers.

A memory-augmented model (``uwbench.models.mann``) is a controller, one external ``Memory`` and a
``Writer`` that decides on which encoder steps the memory is written (paper §2.2-2.3). Each step:

    controller input  [x_t ; r_{t-1}]           -> h_t                     (Eq. 3-4)
    interface         xi_t = clip(h_t W_xi, +-20)                          (reference §2.3)
    write step        state = memory.write(state, iface); r_t, state = memory.read(state, iface)
    hold step         state and r_{t-1} carried unchanged (UW / CUW / RW, reference §3.2 mode 2)
    decoder output    y_t = clip(h_t W_y + r_t W_r, +-20)

A ``Memory`` implements:

    interface_size: int                       # width of xi it consumes
    read_size: int                            # width of vec(r)
    initial_state(batch, device, dtype) -> tuple of tensors
    initial_read(batch, device, dtype) -> (B, read_size)
    parse(xi) -> an object with the activated interface fields (xi already clipped)
    write(state, iface) -> state
    read(state, iface) -> (r (B, read_size), state)
    write_gate(iface) -> (B,) or None          # for traces: the write gate, if the memory has one
    trace_step(state, iface) -> dict of (B, ...) tensors   # optional, only called when tracing
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Literal, Optional


@dataclass
class MANNConfig:
    """Configuration shared by the DNC and NTM models (DESIGN.md §3, reference §6.2). Every field is a
    plain value, so sweeps can vary memory_size, cache_size and the writer like any other setting."""

    hidden_size: int = 100  # H, controller units (paper: DNC/UW/RW 100, CUW 95)
    controller: str = "ln_lstm"  # ln_lstm | lstm | gru | rnn
    memory_size: int = 4  # D = N, memory slots
    word_size: int = 64  # W
    read_heads: int = 1  # R
    writer: str = "regular"  # regular | uniform | cached_uniform | random
    cache_size: int = 5  # L, the CUW interval and cache length (paper: 5 synthetic, 10 MNIST/documents)
    attention_size: int = 16  # A, the CUW attention width (reference §5.2)
    write_prob: Optional[float] = None  # random writer's Bernoulli p; None means (D+1)/T (reference D16)
    writer_seed: Optional[int] = None  # random writer's mask seed; None draws from the run's seeded RNG
    schedule: Literal["code", "paper"] = "code"  # UW positions: authors' code or the paper's Eq. 7
    decoder_write: bool = True  # the decoder writes and reads every step (False: read-only decoder)
    interface_clip: float = 20.0

    def __post_init__(self):
        checks = [
            ("hidden_size >= 1", self.hidden_size >= 1, self.hidden_size),
            ("memory_size >= 1", self.memory_size >= 1, self.memory_size),
            ("word_size >= 1", self.word_size >= 1, self.word_size),
            ("read_heads >= 1", self.read_heads >= 1, self.read_heads),
            ("cache_size >= 1", self.cache_size >= 1, self.cache_size),
            ("attention_size >= 1", self.attention_size >= 1, self.attention_size),
            ("interface_clip > 0", self.interface_clip > 0, self.interface_clip),
        ]
        for rule, ok, value in checks:
            if not ok:
                raise ValueError(f"`{rule}` must hold, got {value}")
        if self.write_prob is not None and not 0.0 < self.write_prob <= 1.0:
            raise ValueError(f"`0 < write_prob <= 1` must hold, got {self.write_prob}")


class Writer:
    """Decides the encoder write steps. ``schedule(n_steps)`` returns one bool per encoder step
    (True = write), shared by the whole batch so a held step can skip the memory work with plain
    Python control flow (DESIGN.md §3). ``cached`` writers (CUW) attend over a cache of controller
    states at each write step; they also provide ``build_attention(hidden_size, read_size)`` returning a
    module mapping ``(h (B, H), cache (B, n, H), r (B, read_size)) -> (a (B, H), alpha (B, n))``, which the
    model owns (so its parameters train and are saved)."""

    cached: bool = False

    def __init__(self, cfg: MANNConfig, max_steps: int):
        self.cfg = cfg
        self.max_steps = max_steps

    def schedule(self, n_steps: int) -> List[bool]:
        raise NotImplementedError
