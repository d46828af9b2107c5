"""The DNC external memory (Graves et al. 2016, Methods) as the authors' code computes it.

Everything here follows reference §2.3-2.4 (``shared/reference/uw-dnc-reference.md``), i.e. the
Mostafa-Samir TF port that the paper's code uses, not DeepMind's: the usage is sorted without an
epsilon, the write vector and keys are linear, the link diagonal is zeroed after the update.

The operations are pure batched tensor functions (tested against a per-sample loop in
``tests/test_dnc_memory.py``); ``DNCMemory`` strings them together and implements the ``Memory``
protocol of ``uwbench.models.memory_base``. Shapes: B batch, N slots (= D), W word size, R read heads.
Read-side tensors keep the head axis before the slot axis: read weights (B, R, N), read keys (B, R, W).

One write, with the previous state (M-, u-, p-, L-, w^w-, w^r-) (reference §2.4 "Write"):

    psi = prod_r (1 - f_r w^r-_r)                                  retention
    u   = (u- + w^w- - u- * w^w-) * psi                            usage
    a[phi_j] = (1 - u[phi_j]) prod_{i<j} u[phi_i]                  allocation, phi = argsort(u) ascending
    w^w = g^w (g^a a + (1 - g^a) C(M-, k^w, beta^w))               write weighting
    L[i,j] = (1 - w^w_i - w^w_j) L-[i,j] + w^w_i p-_j, L[i,i] = 0  temporal link
    p   = (1 - sum_i w^w_i) p- + w^w                               precedence
    M   = M- * (1 - w^w e^T) + w^w v^T                             erase and add

One read, on the updated M and L (reference §2.4 "Read"):

    w^r = pi_0 (L^T w^r-) + pi_1 C(M, k^r, beta^r) + pi_2 (L w^r-)  backward, content, forward
    r   = M^T w^r

with C(M, k, beta)_i = softmax_i(beta cos(M_i, k)), the cosine taking TF's l2_normalize floor of 1e-12
on the squared norm.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from uwbench.models.memory_base import MANNConfig
from uwbench.registry import MODELS

INIT_VALUE = 1e-6  # M, w^w, w^r and r start at 1e-6 (reference §2.4)
NORM_FLOOR = 1e-12  # TF l2_normalize: x * rsqrt(max(sum(x^2), 1e-12))
N_READ_MODES = 3  # backward, content, forward (reference §2.3, D17)


class DNCState(NamedTuple):
    """The memory state carried across steps (reference §2.4); the read vector is carried by the frame."""

    memory: torch.Tensor  # (B, N, W)
    usage: torch.Tensor  # (B, N)
    precedence: torch.Tensor  # (B, N)
    link: torch.Tensor  # (B, N, N)
    write_weights: torch.Tensor  # (B, N)
    read_weights: torch.Tensor  # (B, R, N)


class DNCInterface(NamedTuple):
    """The activated interface vector (reference §2.3)."""

    read_keys: torch.Tensor  # (B, R, W)
    read_strengths: torch.Tensor  # (B, R)      1 + softplus
    write_key: torch.Tensor  # (B, W)
    write_strength: torch.Tensor  # (B, 1)      1 + softplus
    erase: torch.Tensor  # (B, W)               sigmoid
    write_vector: torch.Tensor  # (B, W)        linear
    free_gates: torch.Tensor  # (B, R)          sigmoid
    allocation_gate: torch.Tensor  # (B, 1)     sigmoid
    write_gate: torch.Tensor  # (B, 1)          sigmoid
    read_modes: torch.Tensor  # (B, R, 3)       softmax over (backward, content, forward)


# ---- pure batched memory operations ----


def interface_size(word_size: int, read_heads: int) -> int:
    """|xi| = W R + 3 W + 5 R + 3 (reference §2.3): 264 for W = 64, R = 1."""
    return word_size * read_heads + 3 * word_size + 5 * read_heads + 3


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """TF's ``l2_normalize`` over the last axis: x / sqrt(max(|x|^2, 1e-12))."""
    return x * torch.rsqrt(torch.clamp((x * x).sum(-1, keepdim=True), min=NORM_FLOOR))


def content_weighting(memory: torch.Tensor, keys: torch.Tensor, strengths: torch.Tensor) -> torch.Tensor:
    """C(M, k, beta)_i = softmax_i(beta cos(M_i, k)) for K keys at once.

    memory (B, N, W), keys (B, K, W), strengths (B, K) -> (B, K, N)."""
    cos = torch.bmm(l2_normalize(keys), l2_normalize(memory).transpose(1, 2))  # (B, K, N)
    return torch.softmax(strengths.unsqueeze(-1) * cos, dim=-1)


def retention(free_gates: torch.Tensor, read_weights: torch.Tensor) -> torch.Tensor:
    """psi = prod_r (1 - f_r w^r_r): free gates (B, R), previous read weights (B, R, N) -> (B, N)."""
    return torch.prod(1.0 - free_gates.unsqueeze(-1) * read_weights, dim=1)


def update_usage(usage: torch.Tensor, write_weights: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
    """u = (u- + w^w- - u- * w^w-) * psi: all (B, N)."""
    return (usage + write_weights - usage * write_weights) * psi


def allocation(usage: torch.Tensor) -> torch.Tensor:
    """a[phi_j] = (1 - u[phi_j]) prod_{i<j} u[phi_i] with phi the slots sorted by ascending usage.

    No epsilon is added to the usage (reference §2.4, D17); ties keep the lower slot first, as TF's
    top_k on -u does. The gradient flows through the sorted values, not the order. usage (B, N) -> (B, N).
    """
    sorted_usage, order = torch.sort(usage, dim=-1, stable=True)  # (B, N), (B, N)
    ones = torch.ones_like(sorted_usage[:, :1])  # (B, 1)
    before = torch.cumprod(torch.cat([ones, sorted_usage[:, :-1]], dim=-1), dim=-1)  # (B, N) exclusive product
    sorted_alloc = (1.0 - sorted_usage) * before  # (B, N) in sorted order
    return torch.zeros_like(usage).scatter(-1, order, sorted_alloc)  # (B, N) back in slot order


def write_weighting(alloc: torch.Tensor, content: torch.Tensor, allocation_gate: torch.Tensor,
                    write_gate: torch.Tensor) -> torch.Tensor:
    """w^w = g^w (g^a a + (1 - g^a) c): alloc, content (B, N), gates (B, 1) -> (B, N)."""
    return write_gate * (allocation_gate * alloc + (1.0 - allocation_gate) * content)


def update_link(link: torch.Tensor, write_weights: torch.Tensor, precedence: torch.Tensor,
                off_diagonal: torch.Tensor | None = None) -> torch.Tensor:
    """L[i,j] = (1 - w_i - w_j) L-[i,j] + w_i p-_j, then L[i,i] = 0.

    link (B, N, N), write weights and previous precedence (B, N) -> (B, N, N). ``off_diagonal`` is the
    (N, N) mask 1 - I (passed in to avoid rebuilding it every step)."""
    n = write_weights.shape[-1]
    if off_diagonal is None:
        off_diagonal = 1.0 - torch.eye(n, dtype=link.dtype, device=link.device)  # (N, N)
    w_i = write_weights.unsqueeze(-1)  # (B, N, 1)
    w_j = write_weights.unsqueeze(-2)  # (B, 1, N)
    link = (1.0 - w_i - w_j) * link + w_i * precedence.unsqueeze(-2)  # (B, N, N)
    return link * off_diagonal


def update_precedence(precedence: torch.Tensor, write_weights: torch.Tensor) -> torch.Tensor:
    """p = (1 - sum_i w_i) p- + w: (B, N) -> (B, N)."""
    return (1.0 - write_weights.sum(-1, keepdim=True)) * precedence + write_weights


def erase_and_add(memory: torch.Tensor, write_weights: torch.Tensor, erase: torch.Tensor,
                  write_vector: torch.Tensor) -> torch.Tensor:
    """M = M- * (1 - w e^T) + w v^T: memory (B, N, W), w (B, N), e and v (B, W) -> (B, N, W)."""
    w = write_weights.unsqueeze(-1)  # (B, N, 1)
    return memory * (1.0 - w * erase.unsqueeze(1)) + w * write_vector.unsqueeze(1)


def read_weighting(link: torch.Tensor, read_weights: torch.Tensor, content: torch.Tensor,
                   read_modes: torch.Tensor) -> torch.Tensor:
    """w^r = pi_0 backward + pi_1 content + pi_2 forward, forward = L w^r-, backward = L^T w^r-.

    link (B, N, N), previous read weights and content (B, R, N), modes (B, R, 3) -> (B, R, N)."""
    forward = torch.bmm(read_weights, link.transpose(1, 2))  # (B, R, N): f_i = sum_j L[i,j] w_j
    backward = torch.bmm(read_weights, link)  # (B, R, N): b_j = sum_i L[i,j] w_i
    return (read_modes[..., 0:1] * backward + read_modes[..., 1:2] * content
            + read_modes[..., 2:3] * forward)


def read_memory(memory: torch.Tensor, read_weights: torch.Tensor) -> torch.Tensor:
    """r = M^T w^r per head: memory (B, N, W), read weights (B, R, N) -> (B, R, W)."""
    return torch.bmm(read_weights, memory)


def flatten_reads(reads: torch.Tensor) -> torch.Tensor:
    """vec(r) in the TF layout: the [W, R] read matrix flattened row-major (index w R + r).
    reads (B, R, W) -> (B, W R)."""
    return reads.transpose(1, 2).reshape(reads.shape[0], -1)


def parse_interface(xi: torch.Tensor, word_size: int, read_heads: int) -> DNCInterface:
    """Slice and activate the (already clipped) interface xi (B, |xi|) in the order of reference §2.3.

    Matrix-shaped slices are TF row-major reshapes: the read keys are [W, R] (index w R + r) and the
    read modes [3, R] (index m R + r); both are returned head-first."""
    w, r = word_size, read_heads
    (read_keys, read_strengths, write_key, write_strength, erase, write_vector, free_gates,
     allocation_gate, write_gate, read_modes) = xi.split([w * r, r, w, 1, w, w, r, 1, 1, N_READ_MODES * r], dim=-1)
    b = xi.shape[0]
    return DNCInterface(
        read_keys=read_keys.reshape(b, w, r).transpose(1, 2),  # (B, R, W)
        read_strengths=1.0 + F.softplus(read_strengths),  # (B, R)
        write_key=write_key,  # (B, W)
        write_strength=1.0 + F.softplus(write_strength),  # (B, 1)
        erase=torch.sigmoid(erase),  # (B, W)
        write_vector=write_vector,  # (B, W)
        free_gates=torch.sigmoid(free_gates),  # (B, R)
        allocation_gate=torch.sigmoid(allocation_gate),  # (B, 1)
        write_gate=torch.sigmoid(write_gate),  # (B, 1)
        read_modes=torch.softmax(read_modes.reshape(b, N_READ_MODES, r), dim=1).transpose(1, 2),  # (B, R, 3)
    )


def dnc_write(state: DNCState, iface: DNCInterface, off_diagonal: torch.Tensor | None = None) -> DNCState:
    """One DNC write (reference §2.4 steps 1-7) from the previous state; read weights are unchanged."""
    psi = retention(iface.free_gates, state.read_weights)  # (B, N)
    usage = update_usage(state.usage, state.write_weights, psi)  # (B, N)
    content = content_weighting(state.memory, iface.write_key.unsqueeze(1),
                                iface.write_strength).squeeze(1)  # (B, N)
    ww = write_weighting(allocation(usage), content, iface.allocation_gate, iface.write_gate)  # (B, N)
    link = update_link(state.link, ww, state.precedence, off_diagonal)  # (B, N, N)
    precedence = update_precedence(state.precedence, ww)  # (B, N)
    memory = erase_and_add(state.memory, ww, iface.erase, iface.write_vector)  # (B, N, W)
    return DNCState(memory, usage, precedence, link, ww, state.read_weights)


def dnc_read(state: DNCState, iface: DNCInterface) -> Tuple[torch.Tensor, DNCState]:
    """One DNC read on the current memory and link: returns reads (B, R, W) and the state with the new
    read weights."""
    content = content_weighting(state.memory, iface.read_keys, iface.read_strengths)  # (B, R, N)
    wr = read_weighting(state.link, state.read_weights, content, iface.read_modes)  # (B, R, N)
    return read_memory(state.memory, wr), state._replace(read_weights=wr)


# ---- the Memory implementation ----


class DNCMemory(nn.Module):
    """DNC memory with one write head and R read heads (``Memory`` protocol, memory_base.py).

    It owns no parameters: all its inputs come through the interface vector."""

    def __init__(self, memory_size: int = 4, word_size: int = 64, read_heads: int = 1):
        super().__init__()
        for name, value in (("memory_size", memory_size), ("word_size", word_size), ("read_heads", read_heads)):
            if value < 1:
                raise ValueError(f"`{name} >= 1` must hold, got {value}")
        self.memory_size = memory_size  # N
        self.word_size = word_size  # W
        self.read_heads = read_heads  # R
        self.interface_size = interface_size(word_size, read_heads)
        self.read_size = word_size * read_heads
        off = 1.0 - torch.eye(memory_size)  # (N, N)
        self.register_buffer("off_diagonal", off, persistent=False)

    def extra_repr(self) -> str:
        return f"memory_size={self.memory_size}, word_size={self.word_size}, read_heads={self.read_heads}"

    def initial_state(self, batch: int, device, dtype=torch.float32) -> DNCState:
        """Reference §2.4: M = w^w = w^r = 1e-6, u = p = L = 0, one copy per sample."""
        n, w, r = self.memory_size, self.word_size, self.read_heads
        return DNCState(
            memory=torch.full((batch, n, w), INIT_VALUE, device=device, dtype=dtype),  # (B, N, W)
            usage=torch.zeros(batch, n, device=device, dtype=dtype),  # (B, N)
            precedence=torch.zeros(batch, n, device=device, dtype=dtype),  # (B, N)
            link=torch.zeros(batch, n, n, device=device, dtype=dtype),  # (B, N, N)
            write_weights=torch.full((batch, n), INIT_VALUE, device=device, dtype=dtype),  # (B, N)
            read_weights=torch.full((batch, r, n), INIT_VALUE, device=device, dtype=dtype),  # (B, R, N)
        )

    def initial_read(self, batch: int, device, dtype=torch.float32) -> torch.Tensor:
        return torch.full((batch, self.read_size), INIT_VALUE, device=device, dtype=dtype)  # (B, W R)

    def parse(self, xi: torch.Tensor) -> DNCInterface:
        return parse_interface(xi, self.word_size, self.read_heads)

    def write(self, state: DNCState, iface: DNCInterface) -> DNCState:
        return dnc_write(state, iface, self._off_diagonal(state.link))

    def read(self, state: DNCState, iface: DNCInterface) -> Tuple[torch.Tensor, DNCState]:
        reads, state = dnc_read(state, iface)  # (B, R, W)
        return flatten_reads(reads), state  # (B, W R)

    def write_gate(self, iface: DNCInterface) -> torch.Tensor:
        return iface.write_gate.squeeze(-1)  # (B,)

    def trace_step(self, state: DNCState, iface: DNCInterface) -> Dict[str, torch.Tensor]:
        return {"write_weights": state.write_weights, "read_weights": state.read_weights}  # (B, N), (B, R, N)

    def _off_diagonal(self, like: torch.Tensor) -> torch.Tensor:
        off = self.off_diagonal
        if off.dtype != like.dtype or off.device != like.device:
            off = off.to(like.device, like.dtype)
        return off


@MODELS.register("dnc", config=MANNConfig, help="Differentiable Neural Computer (usage, allocation, temporal link)")
def build_dnc(cfg: MANNConfig, input_size: int, output_size: int, task=None):
    from uwbench.models.mann import build_mann

    return build_mann(cfg, DNCMemory(cfg.memory_size, cfg.word_size, cfg.read_heads), input_size, output_size, task)
