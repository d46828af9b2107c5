"""Neural Turing Machine memory (Graves et al. 2014, §3) for the generic memory-model frame.

The paper's NTM baseline (its Table 1/2 rows "NTM" and "NTM+UW", footnote: MarkPKCollier's cell) is
rebuilt here as a ``Memory`` (``uwbench.models.memory_base``) so the frame's controller, output layer
and writers (regular, uniform, cached uniform, random) apply unchanged (docs/reference.md §7).

One read head and one write head, N = ``memory_size`` slots of M = ``word_size``. Each head addresses
the memory from its previous weighting w_{t-1} (Graves et al. Eq. 5-9):

    content        w^c_i = softmax_i(beta * cos(k, M_i))                         (Eq. 5-6)
    interpolation  w^g   = g w^c + (1 - g) w_{t-1}                               (Eq. 7)
    shift          w~_i  = sum_{o in -1,0,+1} s_o w^g_{(i - o) mod N}            (Eq. 8)
    sharpening     w_i   = w~_i^gamma / sum_j w~_j^gamma                         (Eq. 9)

then the write head erases and adds, M_i <- M_i * (1 - w_i e) + w_i a (Eq. 3-4), and the read head
reads r = sum_i w_i M_i (Eq. 2) from the updated memory.

Interface layout (width 4M + 12 = 268 for M = 64, docs/reference.md §7):

    [ read head: key M | beta 1 | g 1 | s 3 | gamma 1 ][ write head: same M + 6 ][ erase M ][ add M ]

Activations follow MarkPK's cell: key tanh, beta softplus, g sigmoid, s softmax over the offsets
(-1, 0, +1), gamma 1 + softplus, erase sigmoid, add tanh (bounded like the key, so a word written by
the add vector can be matched by a key). The frame clips the raw interface to +-20 before ``parse``.

Parameters owned here: a learned initial read vector (M, through tanh) and learned initial weightings
(N per head, through softmax, random init so that the slots are not symmetric). The memory itself
starts at a small constant (1e-6, MarkPK's "constant" init) and is not a parameter, which gives the
second exact fit of the paper's count (docs/reference.md §9.4): 70,600 + 26,800 + 1,000 + 640 + 64 + 2N = 99,112
at N = 4 (MarkPK's own cell, with biases and a trainable memory, would give 99,046 at
N = 4 and 99,112 only at N = 5). ``reconcile_ntm`` registers that reconciliation for `uwbench params`.
"""
from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from uwbench.errors import UserError
from uwbench.models.dnc_memory import BROADCAST_MAX_SLOTS  # one threshold for both memories' tiny products
from uwbench.models.mann import build_mann
from uwbench.models.memory_base import MANNConfig
from uwbench.models.params import PAPER_TOTALS, paper_reconciliation
from uwbench.native.parts import MemoryKernel, StateLayout
from uwbench.registry import MODELS

MEMORY_INIT = 1e-6  # constant memory init (MarkPK; docs/reference.md §7)
SHIFT_OFFSETS = (-1, 0, 1)  # shift range 1 (docs/reference.md §7)
COSINE_EPS = 1e-8  # cos(k, M_i) = k . M_i / (|k| |M_i| + eps): finite for an all-zero key or row

State = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # memory (B, N, M), w^r (B, N), w^w (B, N)


class Head(NamedTuple):
    """One head's activated addressing parameters."""

    key: torch.Tensor  # (B, M) in (-1, 1)
    strength: torch.Tensor  # (B, 1) beta >= 0
    gate: torch.Tensor  # (B, 1) g in (0, 1)
    shift: torch.Tensor  # (B, 3) s over offsets (-1, 0, +1), sums to 1
    sharpen: torch.Tensor  # (B, 1) gamma >= 1


class NTMInterface(NamedTuple):
    read: Head
    write: Head
    erase: torch.Tensor  # (B, M) in (0, 1)
    add: torch.Tensor  # (B, M) in (-1, 1)


# ---- addressing and memory operations: pure batched functions (tested against a per-sample loop) ----


def content_weighting(memory: torch.Tensor, key: torch.Tensor, strength: torch.Tensor) -> torch.Tensor:
    """softmax_i(beta * cos(k, M_i)): memory (B, N, M), key (B, M), strength (B, 1) -> (B, N)."""
    if memory.shape[1] <= BROADCAST_MAX_SLOTS:  # a broadcast product beats a bmm of tiny matrices
        dot = (memory * key.unsqueeze(1)).sum(-1)  # (B, N)
    else:
        dot = torch.bmm(memory, key.unsqueeze(-1)).squeeze(-1)  # (B, N)
    norms = memory.norm(dim=-1) * key.norm(dim=-1, keepdim=True)  # (B, N)
    return torch.softmax(strength * dot / (norms + COSINE_EPS), dim=-1)


def interpolate(content: torch.Tensor, previous: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """g w^c + (1 - g) w_{t-1}: (B, N), (B, N), (B, 1) -> (B, N)."""
    return torch.lerp(previous, content, gate)  # one kernel for previous + g (content - previous)


def circular_shift(weights: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Circular convolution w~_i = sum_o s_o w_{(i - o) mod N} over offsets (-1, 0, +1), for the whole
    batch at once (no loop over samples): weights (B, N), shift (B, 3) -> (B, N). A one-hot shift on
    +1 moves every weight one slot up, the last slot wrapping to slot 0.

    The weights are padded circularly, [w_{N-1}, w_0, ..., w_{N-1}, w_0], so window i of width 3 is
    (w_{i-1}, w_i, w_{i+1}): the taps of offsets +1, 0, -1, hence the reversed shift."""
    padded = torch.cat([weights[:, -1:], weights, weights[:, :1]], dim=-1)  # (B, N + 2)
    windows = padded.unfold(-1, 3, 1)  # (B, N, 3) view: (w_{i-1}, w_i, w_{i+1})
    return (windows * shift.flip(-1).unsqueeze(1)).sum(-1)  # (B, N): 3 taps, no bmm of 1 x 3 matrices


def sharpen(weights: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """w_i^gamma / sum_j w_j^gamma: (B, N), (B, 1) -> (B, N).

    The weights are first divided by their maximum, which cancels in the ratio: the largest term
    becomes 1, so the sum cannot underflow when gamma is large (up to 1 + softplus(20) = 21; 0.25^21 is
    about 2e-13 in float32) and no epsilon is needed. The maximum is detached because the exact ratio
    does not depend on it."""
    top = weights.amax(dim=-1, keepdim=True).detach()  # (B, 1), >= 1/N since the weights sum to 1
    powered = (weights / top).pow(gamma)  # (B, N), largest entry 1
    return powered / powered.sum(dim=-1, keepdim=True)


def address(memory: torch.Tensor, head: Head, previous: torch.Tensor) -> torch.Tensor:
    """The full NTM addressing pipeline (Graves et al. Fig. 2): (B, N, M), Head, (B, N) -> (B, N)."""
    w = content_weighting(memory, head.key, head.strength)
    w = interpolate(w, previous, head.gate)
    w = circular_shift(w, head.shift)
    return sharpen(w, head.sharpen)


def erase_add(memory: torch.Tensor, weights: torch.Tensor, erase: torch.Tensor, add: torch.Tensor) -> torch.Tensor:
    """M_i * (1 - w_i e) + w_i a: (B, N, M), (B, N), (B, M), (B, M) -> (B, N, M)."""
    w = weights.unsqueeze(-1)  # (B, N, 1)
    # kept in this form (not M + w (a - M e)) so that w_i = e = 1 writes a into slot i exactly
    return torch.addcmul(memory * (1.0 - w * erase.unsqueeze(1)), w, add.unsqueeze(1))  # (B, N, M)


def read_memory(memory: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_i w_i M_i: (B, N, M), (B, N) -> (B, M)."""
    if memory.shape[1] <= BROADCAST_MAX_SLOTS:
        return (weights.unsqueeze(-1) * memory).sum(1)  # (B, N, M) -> (B, M)
    return torch.bmm(weights.unsqueeze(1), memory).squeeze(1)


def _parse_head(raw: torch.Tensor, word: int) -> Head:
    """Activate one head's M + 6 raw values (B, M + 6)."""
    key, beta, gate, shift, gamma = raw.split([word, 1, 1, len(SHIFT_OFFSETS), 1], dim=-1)
    return Head(
        key=torch.tanh(key),
        strength=F.softplus(beta),
        gate=torch.sigmoid(gate),
        shift=torch.softmax(shift, dim=-1),
        sharpen=1.0 + F.softplus(gamma),
    )


class NTMMemory(nn.Module):
    """The NTM external memory with one read and one write head (implements the ``Memory`` protocol of
    ``uwbench.models.memory_base``). State: (memory (B, N, M), read weights (B, N), write weights (B, N))."""

    def __init__(self, cfg: MANNConfig):
        super().__init__()
        if cfg.read_heads != 1:
            raise UserError(
                f"`read_heads == 1` must hold for the NTM (one read and one write head), got {cfg.read_heads}"
            )
        self.slots = cfg.memory_size  # N
        self.word = cfg.word_size  # M
        self.head_size = self.word + 2 + len(SHIFT_OFFSETS) + 1  # key, beta, g, s, gamma
        self.interface_size = 2 * self.head_size + 2 * self.word  # 268 for M = 64
        self.read_size = self.word
        # Learned initial read vector and weightings, drawn like MarkPK's learned init (a bias-free dense
        # layer on a constant 1, glorot-uniform). A random start breaks the symmetry between slots:
        # with uniform initial weights and a constant memory every slot would get the same writes.
        self.init_read = nn.Parameter(torch.empty(self.word))
        self.init_read_weights = nn.Parameter(torch.empty(self.slots))
        self.init_write_weights = nn.Parameter(torch.empty(self.slots))
        for p in (self.init_read, self.init_read_weights, self.init_write_weights):
            bound = math.sqrt(6.0 / (1 + p.numel()))
            nn.init.uniform_(p, -bound, bound)

    def initial_state(self, batch: int, device, dtype=torch.float32) -> State:
        memory = torch.full((batch, self.slots, self.word), MEMORY_INIT, device=device, dtype=dtype)  # (B, N, M)
        w_r = torch.softmax(self.init_read_weights, dim=-1).to(device, dtype).expand(batch, -1)  # (B, N)
        w_w = torch.softmax(self.init_write_weights, dim=-1).to(device, dtype).expand(batch, -1)  # (B, N)
        return memory, w_r, w_w

    def initial_read(self, batch: int, device, dtype=torch.float32) -> torch.Tensor:
        return torch.tanh(self.init_read).to(device, dtype).expand(batch, -1)  # (B, M)

    def interface_fields(self) -> List[Tuple[str, int]]:
        """The interface's fields in the order ``parse`` slices them, with their widths (they sum to
        ``interface_size``): which rows of the interface projection drive which operation."""
        head = [("key", self.word), ("strength", 1), ("gate", 1), ("shift", len(SHIFT_OFFSETS)), ("sharpen", 1)]
        return ([(f"read_{k}", n) for k, n in head] + [(f"write_{k}", n) for k, n in head]
                + [("erase", self.word), ("add", self.word)])

    def parse(self, xi: torch.Tensor) -> NTMInterface:
        """Split and activate the (already clipped) interface xi (B, 4M + 12)."""
        hs, m = self.head_size, self.word
        read, write, erase, add = xi.split([hs, hs, m, m], dim=-1)
        return NTMInterface(
            read=_parse_head(read, m), write=_parse_head(write, m), erase=torch.sigmoid(erase), add=torch.tanh(add)
        )

    def write(self, state: State, iface: NTMInterface) -> State:
        """Address the write head from the previous write weights, then erase and add."""
        memory, w_r, w_w = state
        w_w = address(memory, iface.write, w_w)  # (B, N)
        memory = erase_add(memory, w_w, iface.erase, iface.add)  # (B, N, M)
        return memory, w_r, w_w

    def read(self, state: State, iface: NTMInterface) -> Tuple[torch.Tensor, State]:
        """Address the read head from the previous read weights on the (just written) memory and read."""
        # DEVIATION: MarkPK's cell addresses and reads from the memory before this step's write; the frame
        # writes first and reads the updated memory, as the DNC does (docs/reference.md §4), so both models share
        # one step order and a word can be read back on the step it is written.
        memory, w_r, w_w = state
        w_r = address(memory, iface.read, w_r)  # (B, N)
        return read_memory(memory, w_r), (memory, w_r, w_w)

    def write_gate(self, iface: NTMInterface):
        return None  # the NTM always writes: it has no write gate

    def trace_step(self, state: State, iface: NTMInterface) -> Dict[str, torch.Tensor]:
        _, w_r, w_w = state
        return {"write_weights": w_w, "read_weights": w_r}  # (B, N) each

    def native_kernel(self) -> MemoryKernel:
        """The same step (write head, then read head) in C++ (``native/ntm.cpp``), on each row's state
        (memory, read weights, write weights) flattened in that order: S = N M + 2 N floats."""
        n, m = self.slots, self.word
        layout = StateLayout((("memory", (n, m)), ("read_weights", (n,)), ("write_weights", (n,))))
        return MemoryKernel("ntm", (n, m), self.interface_size, self.read_size, layout)


@MODELS.register("ntm", config=MANNConfig, help="Neural Turing Machine (1 read + 1 write head, shift range 1)")
def build_ntm(cfg: MANNConfig, input_size: int, output_size: int, task=None):
    return build_mann(cfg, NTMMemory(cfg), input_size, output_size, task)


@paper_reconciliation("ntm")
def reconcile_ntm(model, cfg, input_size, output_size):
    """docs/reference.md §9.4, second exact fit: the NTM as a memory module in the authors' frame has no unused
    TF tensors (no embeddings), so our count is the paper's: LN-LSTM 70,600 + interface 26,800 + W_y 1,000
    + W_r 640 + initial read vector 64 + initial weights 8 = 99,112. (MarkPK's own cell would give 99,046
    with N = 4 and 99,112 with N = 5.) UW and RW add no parameters; CUW adds its attention."""
    paper = None
    if (input_size == output_size == 10 and cfg.controller == "ln_lstm" and cfg.hidden_size == 100
            and cfg.memory_size == 4 and cfg.word_size == 64 and cfg.read_heads == 1
            and cfg.writer in ("regular", "uniform", "random")):
        paper = ("NTM (H=100, N=4)", PAPER_TOTALS["ntm"])
    return [], paper
