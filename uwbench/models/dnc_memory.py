"""The DNC external memory (Graves et al. 2016, Methods) as the authors' code computes it.

Everything here follows docs/reference.md §3.3 (interface) and §4 (memory), i.e. the Mostafa-Samir
TF port that the paper's code uses, not DeepMind's: the usage is sorted without an epsilon, the write
vector and keys are linear, the link diagonal is zeroed after the update.

The operations are pure batched tensor functions (tested against a per-sample loop in
``tests/models/test_dnc_memory.py``); ``DNCMemory`` strings them together and implements the ``Memory``
protocol of ``uwbench.models.memory_base``. Shapes: B batch, N slots (= D), W word size, R read heads.
Read-side tensors keep the head axis before the slot axis: read weights (B, R, N), read keys (B, R, W).

One write, with the previous state (M-, u-, p-, L-, w^w-, w^r-) (docs/reference.md §4.2):

    psi = prod_r (1 - f_r w^r-_r)                                  retention
    u   = (u- + w^w- - u- * w^w-) * psi                            usage
    a[phi_j] = (1 - u[phi_j]) prod_{i<j} u[phi_i]                  allocation, phi = argsort(u) ascending
    w^w = g^w (g^a a + (1 - g^a) C(M-, k^w, beta^w))               write weighting
    L[i,j] = (1 - w^w_i - w^w_j) L-[i,j] + w^w_i p-_j, L[i,i] = 0  temporal link
    p   = (1 - sum_i w^w_i) p- + w^w                               precedence
    M   = M- * (1 - w^w e^T) + w^w v^T                             erase and add

One read, on the updated M and L (docs/reference.md §4.3):

    w^r = pi_0 (L^T w^r-) + pi_1 C(M, k^r, beta^r) + pi_2 (L w^r-)  backward, content, forward
    r   = M^T w^r

with C(M, k, beta)_i = softmax_i(beta cos(M_i, k)), the cosine taking TF's l2_normalize floor of 1e-12
on the squared norm.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from uwbench.models.mann import build_mann
from uwbench.models.memory_base import MANNConfig
from uwbench.native.parts import MemoryKernel, StateLayout
from uwbench.registry import MODELS
from uwbench.errors import UserError

INIT_VALUE = 1e-6  # M, w^w, w^r and r start at 1e-6 (docs/reference.md §3.5)
NORM_FLOOR = 1e-12  # TF l2_normalize: x * rsqrt(max(sum(x^2), 1e-12))
N_READ_MODES = 3  # backward, content, forward (docs/reference.md §3.3, §4.3)


class DNCState(NamedTuple):
    """The memory state carried across steps (docs/reference.md §4); the read vector is carried by the frame."""

    memory: torch.Tensor  # (B, N, W)
    usage: torch.Tensor  # (B, N)
    precedence: torch.Tensor  # (B, N)
    link: torch.Tensor  # (B, N, N)
    write_weights: torch.Tensor  # (B, N)
    read_weights: torch.Tensor  # (B, R, N)


class DNCInterface(NamedTuple):
    """The activated interface vector (docs/reference.md §3.3)."""

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
#
# Speed (docs/design.md §8.4, benchmarks/README.md): at the paper's sizes (B = 64, N = 4, W = 64) every tensor
# here is a few thousand numbers, so a step costs kernel launches and autograd nodes, not arithmetic.
# The batched products of tiny matrices are therefore written as a broadcast multiply and a sum up to
# BROADCAST_MAX_SLOTS slots (a (64, 1, 4) @ (64, 4, 64) ``bmm`` and its backward cost several times as
# much); above it, ``bmm``. The allocation avoids the sort up to PAIRWISE_MAX_SLOTS slots. From
# FUSED_*_MIN_SLOTS on, the link update and the erase-and-add are one autograd node each that keeps for
# the backward only what is alive anyway (the previous link and memory): at large N the (B, N, N) link
# and (B, N, W) memory kept per step are the model's memory footprint. Each fast path is checked
# against the plain formulation in ``tests/models/test_perf_paths.py``.

BROADCAST_MAX_SLOTS = 64
PAIRWISE_MAX_SLOTS = 8
# From these sizes on the single-node erase-and-add and link update are faster than plain autograd (and
# keep far less for the backward); below them a custom node's Python overhead costs more than it saves.
FUSED_ERASE_MIN_SLOTS = 8
FUSED_LINK_MIN_SLOTS = 32


def interface_size(word_size: int, read_heads: int) -> int:
    """|xi| = W R + 3 W + 5 R + 3 (docs/reference.md §3.3): 264 for W = 64, R = 1."""
    return word_size * read_heads + 3 * word_size + 5 * read_heads + 3


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """TF's ``l2_normalize`` over the last axis: x / sqrt(max(|x|^2, 1e-12))."""
    return x * torch.rsqrt(torch.clamp((x * x).sum(-1, keepdim=True), min=NORM_FLOOR))


def inverse_norm(x: torch.Tensor) -> torch.Tensor:
    """1 / sqrt(max(|x|^2, 1e-12)) over the last axis (the factor of ``l2_normalize``): (..., N, W) ->
    (..., N). Above BROADCAST_MAX_SLOTS rows, as 1 / max(|x|, 1e-6) from one norm kernel, which makes
    no (..., N, W) temporary (the squares are faster for small tensors)."""
    if x.dim() < 2 or x.shape[-2] <= BROADCAST_MAX_SLOTS:
        return torch.rsqrt(torch.clamp((x * x).sum(-1), min=NORM_FLOOR))
    return torch.reciprocal(torch.clamp(torch.linalg.vector_norm(x, dim=-1), min=NORM_FLOOR ** 0.5))


def slot_dot(memory: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """k . M_i for K keys: memory (B, N, W), keys (B, K, W) -> (B, K, N)."""
    if memory.shape[1] <= BROADCAST_MAX_SLOTS:
        return (keys.unsqueeze(2) * memory.unsqueeze(1)).sum(-1)  # (B, K, N, W) -> (B, K, N)
    return torch.bmm(keys, memory.transpose(1, 2))


def content_weighting(memory: torch.Tensor, keys: torch.Tensor, strengths: torch.Tensor,
                      memory_inverse_norm: torch.Tensor | None = None) -> torch.Tensor:
    """C(M, k, beta)_i = softmax_i(beta cos(M_i, k)) for K keys at once.

    memory (B, N, W), keys (B, K, W), strengths (B, K) -> (B, K, N). The cosine is the dot product
    scaled by both inverse norms, which equals the dot of the two ``l2_normalize``d vectors without
    normalising the whole memory. ``memory_inverse_norm`` (B, N) may be passed when already known."""
    inv_m = inverse_norm(memory) if memory_inverse_norm is None else memory_inverse_norm  # (B, N)
    scale = (strengths * inverse_norm(keys)).unsqueeze(-1)  # (B, K, 1): beta / |k|
    scores = slot_dot(memory, keys) * inv_m.unsqueeze(1) * scale  # (B, K, N)
    return torch.softmax(scores, dim=-1)


def retention(free_gates: torch.Tensor, read_weights: torch.Tensor) -> torch.Tensor:
    """psi = prod_r (1 - f_r w^r_r): free gates (B, R), previous read weights (B, R, N) -> (B, N)."""
    kept = 1.0 - free_gates.unsqueeze(-1) * read_weights  # (B, R, N)
    psi = kept[:, 0]
    for head in range(1, kept.shape[1]):  # R is small: plain products (torch.prod's backward syncs)
        psi = psi * kept[:, head]
    return psi


def update_usage(usage: torch.Tensor, write_weights: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
    """u = (u- + w^w- - u- * w^w-) * psi: all (B, N)."""
    return torch.addcmul(usage, write_weights, 1.0 - usage) * psi  # u- + w (1 - u-) = u- + w - u- w


def allocation_by_sort(usage: torch.Tensor) -> torch.Tensor:
    """The allocation through a stable sort (any N; the reference formulation, see ``allocation``)."""
    sorted_usage, order = torch.sort(usage, dim=-1, stable=True)  # (B, N), (B, N)
    ones = torch.ones_like(sorted_usage[:, :1])  # (B, 1)
    before = torch.cumprod(torch.cat([ones, sorted_usage[:, :-1]], dim=-1), dim=-1)  # (B, N) exclusive product
    sorted_alloc = (1.0 - sorted_usage) * before  # (B, N) in sorted order
    return torch.zeros_like(usage).scatter(-1, order, sorted_alloc)  # (B, N) back in slot order


def allocation_pairwise(usage: torch.Tensor) -> torch.Tensor:
    """The allocation without a sort, by pairwise comparison (exact for any N; O(N^2), used for small N).

    Slot j comes before slot i in the stable ascending sort iff u_j < u_i, or u_j == u_i and j < i, so
    a_i = (1 - u_i) prod_{j before i} u_j: the same products as the sorted exclusive cumprod, tie order
    included, and the gradient flows through the same factors. usage (B, N) -> (B, N)."""
    n = usage.shape[-1]
    u_i, u_j = usage.unsqueeze(-1), usage.unsqueeze(-2)  # (B, N, 1), (B, 1, N)
    lower = torch.ones(n, n, dtype=torch.bool, device=usage.device).tril(-1)  # (N, N): j < i
    before = (u_j < u_i) | ((u_j == u_i) & lower)  # (B, N, N): j is sorted before i
    factors = torch.where(before, u_j, torch.ones((), dtype=usage.dtype, device=usage.device))  # (B, N, N)
    columns = factors.unbind(-1)  # N x (B, N); a product of a few columns beats prod()'s backward
    product = columns[0]
    for column in columns[1:]:
        product = product * column
    return (1.0 - usage) * product  # (B, N)


def allocation(usage: torch.Tensor) -> torch.Tensor:
    """a[phi_j] = (1 - u[phi_j]) prod_{i<j} u[phi_i] with phi the slots sorted by ascending usage.

    No epsilon is added to the usage (docs/reference.md §4.2); ties keep the lower slot first, as TF's
    top_k on -u does. The gradient flows through the sorted values, not the order. usage (B, N) -> (B, N).
    Up to PAIRWISE_MAX_SLOTS slots the same products come from pairwise comparisons (no sort)."""
    if usage.shape[-1] <= PAIRWISE_MAX_SLOTS:
        return allocation_pairwise(usage)
    return allocation_by_sort(usage)


def write_weighting(alloc: torch.Tensor, content: torch.Tensor, allocation_gate: torch.Tensor,
                    write_gate: torch.Tensor) -> torch.Tensor:
    """w^w = g^w (g^a a + (1 - g^a) c): alloc, content (B, N), gates (B, 1) -> (B, N)."""
    return write_gate * torch.lerp(content, alloc, allocation_gate)  # c + g^a (a - c)


def update_link_reference(link: torch.Tensor, write_weights: torch.Tensor, precedence: torch.Tensor,
                          off_diagonal: torch.Tensor | None = None) -> torch.Tensor:
    """``update_link`` written as plain autograd tensor operations (the reference for the fused node)."""
    n = write_weights.shape[-1]
    if off_diagonal is None:
        off_diagonal = 1.0 - torch.eye(n, dtype=link.dtype, device=link.device)  # (N, N)
    w_i = write_weights.unsqueeze(-1)  # (B, N, 1)
    w_j = write_weights.unsqueeze(-2)  # (B, 1, N)
    link = (1.0 - w_i - w_j) * link + w_i * precedence.unsqueeze(-2)  # (B, N, N)
    return link * off_diagonal


class _LinkUpdate(torch.autograd.Function):
    """L = (1 - w_i - w_j) L- + w_i p-_j with a zero diagonal, as one autograd node.

    Autograd of the plain expression keeps about four (B, N, N) tensors per step for the backward;
    this node keeps only L- (alive anyway: the previous step's output) and the (B, N) vectors. With
    G the incoming gradient off the diagonal (the diagonal is constant 0):
        dL- = (1 - w_i - w_j) G,   dp_j = sum_i G_ij w_i,
        dw_k = sum_j G_kj (p_j - L-_kj) - sum_i G_ik L-_ik."""

    # Both passes allocate no (B, N, N) temporary beyond their results (products with a (B, N, 1) or
    # (B, 1, N) factor are broadcast in place, sums over one axis are matrix-vector products above
    # BROADCAST_MAX_SLOTS): at N = 256 a short-lived (B, N, N) tensor per step fragments the heap into
    # holes the size of a link, which costs more resident memory than the links themselves.

    @staticmethod
    def forward(ctx, link, write_weights, precedence):
        w_i, w_j = write_weights.unsqueeze(-1), write_weights.unsqueeze(-2)  # (B, N, 1), (B, 1, N)
        out = link * (1.0 - w_i)  # (B, N, N)
        out.addcmul_(link, w_j, value=-1.0)  # (1 - w_i - w_j) L-
        out.addcmul_(w_i, precedence.unsqueeze(-2))  # + w_i p-_j
        out.diagonal(dim1=-2, dim2=-1).zero_()
        ctx.save_for_backward(link, write_weights, precedence)
        return out

    @staticmethod
    def backward(ctx, grad):
        link, write_weights, precedence = ctx.saved_tensors
        g = grad.clone()  # (B, N, N)
        g.diagonal(dim1=-2, dim2=-1).zero_()  # the diagonal is constant 0
        w_i, w_j = write_weights.unsqueeze(-1), write_weights.unsqueeze(-2)
        d_link = d_w = d_p = None
        if ctx.needs_input_grad[0]:
            d_link = g * (1.0 - w_i)
            d_link.addcmul_(g, w_j, value=-1.0)
        if ctx.needs_input_grad[1]:
            gp = _row_dot(g, precedence)  # (B, N): sum_j G_kj p_j
            g.mul_(link)  # G * L- (g is not needed any more)
            d_w = gp - g.sum(-1) - g.sum(-2)
        if ctx.needs_input_grad[2]:
            d_p = _row_dot(grad.transpose(1, 2), write_weights)  # sum_i G_ij w_i (the diagonal: below)
            d_p = d_p - torch.diagonal(grad, dim1=-2, dim2=-1) * write_weights
        return d_link, d_w, d_p


def _row_dot(matrix: torch.Tensor, vector: torch.Tensor) -> torch.Tensor:
    """sum_j A_kj v_j: (B, N, N), (B, N) -> (B, N), without a (B, N, N) product above BROADCAST_MAX_SLOTS."""
    if matrix.shape[-1] <= BROADCAST_MAX_SLOTS:
        return (matrix * vector.unsqueeze(-2)).sum(-1)
    return torch.bmm(matrix, vector.unsqueeze(-1)).squeeze(-1)


def update_link_fused(link: torch.Tensor, write_weights: torch.Tensor, precedence: torch.Tensor) -> torch.Tensor:
    """``update_link`` as the single autograd node ``_LinkUpdate``."""
    return _LinkUpdate.apply(link, write_weights, precedence)


def update_link(link: torch.Tensor, write_weights: torch.Tensor, precedence: torch.Tensor,
                off_diagonal: torch.Tensor | None = None) -> torch.Tensor:
    """L[i,j] = (1 - w_i - w_j) L-[i,j] + w_i p-_j, then L[i,i] = 0.

    link (B, N, N), write weights and previous precedence (B, N) -> (B, N, N). ``off_diagonal`` is the
    (N, N) mask 1 - I (optional; the fused node, used from FUSED_LINK_MIN_SLOTS slots, needs none)."""
    if link.shape[-1] >= FUSED_LINK_MIN_SLOTS:
        return update_link_fused(link, write_weights, precedence)
    return update_link_reference(link, write_weights, precedence, off_diagonal)


def update_precedence(precedence: torch.Tensor, write_weights: torch.Tensor) -> torch.Tensor:
    """p = (1 - sum_i w_i) p- + w: (B, N) -> (B, N)."""
    return torch.addcmul(write_weights, 1.0 - write_weights.sum(-1, keepdim=True), precedence)


def erase_and_add_reference(memory: torch.Tensor, write_weights: torch.Tensor, erase: torch.Tensor,
                            write_vector: torch.Tensor) -> torch.Tensor:
    """``erase_and_add`` written as plain autograd tensor operations (the reference for the fused node)."""
    w = write_weights.unsqueeze(-1)  # (B, N, 1)
    return memory * (1.0 - w * erase.unsqueeze(1)) + w * write_vector.unsqueeze(1)


class _EraseAndAdd(torch.autograd.Function):
    """M = M- (1 - w e^T) + w v^T as one autograd node that keeps only M- (alive anyway: the previous
    state) and the small vectors for its backward, not a (B, N, W) product per step. With G the incoming
    gradient: dM- = G (1 - w e^T), dw_i = sum_k G_ik (v_k - M-_ik e_k), de_k = -sum_i G_ik w_i M-_ik,
    dv_k = sum_i G_ik w_i."""

    @staticmethod
    def forward(ctx, memory, write_weights, erase, write_vector):
        w = write_weights.unsqueeze(-1)  # (B, N, 1)
        # (M- - M- w e^T) + w v^T built in the output's buffer (no (B, N, W) temporary): w_i = e = 1 replaces
        # slot i by v exactly, w_i = 0 leaves it bit for bit
        out = memory * w  # (B, N, W)
        out.mul_(erase.unsqueeze(1))
        torch.sub(memory, out, out=out)
        out.addcmul_(w, write_vector.unsqueeze(1))
        ctx.save_for_backward(memory, write_weights, erase, write_vector)
        return out

    @staticmethod
    def backward(ctx, grad):
        memory, write_weights, erase, write_vector = ctx.saved_tensors
        w, e, v = write_weights.unsqueeze(-1), erase.unsqueeze(1), write_vector.unsqueeze(1)
        d_memory = d_w = d_e = d_v = None
        if ctx.needs_input_grad[0]:
            d_memory = grad - grad * (w * e)  # (B, N, W)
        gm = grad * memory if (ctx.needs_input_grad[1] or ctx.needs_input_grad[2]) else None  # (B, N, W)
        if ctx.needs_input_grad[1]:
            d_w = (grad * v).sum(-1) - (gm * e).sum(-1)  # (B, N)
        if ctx.needs_input_grad[2]:
            d_e = -(gm * w).sum(1)  # (B, W)
        if ctx.needs_input_grad[3]:
            d_v = (grad * w).sum(1)  # (B, W)
        return d_memory, d_w, d_e, d_v


def erase_and_add_fused(memory: torch.Tensor, write_weights: torch.Tensor, erase: torch.Tensor,
                        write_vector: torch.Tensor) -> torch.Tensor:
    """``erase_and_add`` as the single autograd node ``_EraseAndAdd``."""
    return _EraseAndAdd.apply(memory, write_weights, erase, write_vector)


def erase_and_add(memory: torch.Tensor, write_weights: torch.Tensor, erase: torch.Tensor,
                  write_vector: torch.Tensor) -> torch.Tensor:
    """M = M- * (1 - w e^T) + w v^T: memory (B, N, W), w (B, N), e and v (B, W) -> (B, N, W).

    w_i = e = 1 replaces slot i by v exactly and w_i = 0 leaves it bit for bit, on both paths (one
    autograd node from FUSED_ERASE_MIN_SLOTS slots, plain operations below)."""
    if memory.shape[1] >= FUSED_ERASE_MIN_SLOTS:
        return erase_and_add_fused(memory, write_weights, erase, write_vector)
    return erase_and_add_reference(memory, write_weights, erase, write_vector)


def link_products(link: torch.Tensor, read_weights: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """forward = L w^r- (f_i = sum_j L[i,j] w_j) and backward = L^T w^r- (b_j = sum_i L[i,j] w_i):
    link (B, N, N), read weights (B, R, N) -> two (B, R, N)."""
    if link.shape[-1] <= BROADCAST_MAX_SLOTS:
        weighted = link.unsqueeze(1)  # (B, 1, N, N)
        forward = (weighted * read_weights.unsqueeze(-2)).sum(-1)  # (B, R, N)
        backward = (weighted * read_weights.unsqueeze(-1)).sum(-2)  # (B, R, N)
        return forward, backward
    return torch.bmm(read_weights, link.transpose(1, 2)), torch.bmm(read_weights, link)


def read_weighting(link: torch.Tensor, read_weights: torch.Tensor, content: torch.Tensor,
                   read_modes: torch.Tensor) -> torch.Tensor:
    """w^r = pi_0 backward + pi_1 content + pi_2 forward, forward = L w^r-, backward = L^T w^r-.

    link (B, N, N), previous read weights and content (B, R, N), modes (B, R, 3) -> (B, R, N)."""
    forward, backward = link_products(link, read_weights)  # (B, R, N) each
    pi_b, pi_c, pi_f = read_modes.unsqueeze(-1).unbind(-2)  # 3 x (B, R, 1)
    return torch.addcmul(torch.addcmul(pi_c * content, pi_b, backward), pi_f, forward)


def read_memory(memory: torch.Tensor, read_weights: torch.Tensor) -> torch.Tensor:
    """r = M^T w^r per head: memory (B, N, W), read weights (B, R, N) -> (B, R, W)."""
    if memory.shape[1] <= BROADCAST_MAX_SLOTS:
        return (read_weights.unsqueeze(-1) * memory.unsqueeze(1)).sum(-2)  # (B, R, N, W) -> (B, R, W)
    return torch.bmm(read_weights, memory)


def flatten_reads(reads: torch.Tensor) -> torch.Tensor:
    """vec(r) in the TF layout: the [W, R] read matrix flattened row-major (index w R + r).
    reads (B, R, W) -> (B, W R)."""
    if reads.shape[1] == 1:
        return reads.squeeze(1)  # one head: vec(r) is r
    return reads.transpose(1, 2).reshape(reads.shape[0], -1)


def parse_interface(xi: torch.Tensor, word_size: int, read_heads: int) -> DNCInterface:
    """Slice and activate the (already clipped) interface xi (B, |xi|) in the order of docs/reference.md §3.3.

    Matrix-shaped slices are TF row-major reshapes: the read keys are [W, R] (index w R + r) and the
    read modes [3, R] (index m R + r); both are returned head-first. The free, allocation and write
    gates are adjacent, so one sigmoid activates all three."""
    w, r = word_size, read_heads
    (read_keys, read_strengths, write_key, write_strength, erase, write_vector, gates,
     read_modes) = xi.split([w * r, r, w, 1, w, w, r + 2, N_READ_MODES * r], dim=-1)
    b = xi.shape[0]
    free_gates, allocation_gate, write_gate = torch.sigmoid(gates).split([r, 1, 1], dim=-1)
    return DNCInterface(
        read_keys=read_keys.unsqueeze(1) if r == 1 else read_keys.reshape(b, w, r).transpose(1, 2),  # (B, R, W)
        read_strengths=1.0 + F.softplus(read_strengths),  # (B, R)
        write_key=write_key,  # (B, W)
        write_strength=1.0 + F.softplus(write_strength),  # (B, 1)
        erase=torch.sigmoid(erase),  # (B, W)
        write_vector=write_vector,  # (B, W)
        free_gates=free_gates,  # (B, R)
        allocation_gate=allocation_gate,  # (B, 1)
        write_gate=write_gate,  # (B, 1)
        read_modes=torch.softmax(read_modes.reshape(b, N_READ_MODES, r), dim=1).transpose(1, 2),  # (B, R, 3)
    )


def dnc_write(state: DNCState, iface: DNCInterface, off_diagonal: torch.Tensor | None = None) -> DNCState:
    """One DNC write (docs/reference.md §4.2 steps 1-7) from the previous state; read weights are unchanged."""
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
    # A new DNCState, not ``state._replace``: Dynamo in torch 2.11 cannot return the tuple that ``_replace``
    # builds (through ``_make``) from a compiled step (AssertionError in side_effects.codegen_save_tempvars;
    # every DNC case of the compiled-step GPU test failed so on an H100, 2026-11-27); the constructor compiles.
    return read_memory(state.memory, wr), DNCState(state.memory, state.usage, state.precedence, state.link,
                                                   state.write_weights, wr)


# ---- the Memory implementation ----


class DNCMemory(nn.Module):
    """DNC memory with one write head and R read heads (``Memory`` protocol, memory_base.py).

    It owns no parameters: all its inputs come through the interface vector."""

    def __init__(self, memory_size: int = 4, word_size: int = 64, read_heads: int = 1):
        super().__init__()
        for name, value in (("memory_size", memory_size), ("word_size", word_size), ("read_heads", read_heads)):
            if value < 1:
                raise UserError(f"`{name} >= 1` must hold, got {value}")
        self.memory_size = memory_size  # N
        self.word_size = word_size  # W
        self.read_heads = read_heads  # R
        self.interface_size = interface_size(word_size, read_heads)
        self.read_size = word_size * read_heads

    def extra_repr(self) -> str:
        return f"memory_size={self.memory_size}, word_size={self.word_size}, read_heads={self.read_heads}"

    def initial_state(self, batch: int, device, dtype=torch.float32) -> DNCState:
        """docs/reference.md §3.5: M = w^w = w^r = 1e-6, u = p = L = 0, one copy per sample."""
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

    def interface_fields(self) -> List[Tuple[str, int]]:
        """The interface's fields in the order ``parse_interface`` slices them, with their widths (they sum
        to ``interface_size``): which rows of the interface projection drive which operation."""
        w, r = self.word_size, self.read_heads
        return [("read_keys", w * r), ("read_strengths", r), ("write_key", w), ("write_strength", 1),
                ("erase", w), ("write_vector", w), ("free_gates", r), ("allocation_gate", 1), ("write_gate", 1),
                ("read_modes", N_READ_MODES * r)]

    def write(self, state: DNCState, iface: DNCInterface) -> DNCState:
        return dnc_write(state, iface)

    def read(self, state: DNCState, iface: DNCInterface) -> Tuple[torch.Tensor, DNCState]:
        reads, state = dnc_read(state, iface)  # (B, R, W)
        return flatten_reads(reads), state  # (B, W R)

    def write_gate(self, iface: DNCInterface) -> torch.Tensor:
        return iface.write_gate.squeeze(-1)  # (B,)

    def trace_step(self, state: DNCState, iface: DNCInterface) -> Dict[str, torch.Tensor]:
        return {"write_weights": state.write_weights, "read_weights": state.read_weights}  # (B, N), (B, R, N)

    def native_kernel(self) -> MemoryKernel:
        """The same step (write, then read) in C++ (``native/dnc.cpp``), on each row's state flattened in
        ``DNCState``'s order: S = N W + 3 N + N N + R N floats."""
        n, w, r = self.memory_size, self.word_size, self.read_heads
        layout = StateLayout((("memory", (n, w)), ("usage", (n,)), ("precedence", (n,)), ("link", (n, n)),
                              ("write_weights", (n,)), ("read_weights", (r, n))), DNCState)
        return MemoryKernel("dnc", (n, w, r), self.interface_size, self.read_size, layout)


@MODELS.register("dnc", config=MANNConfig, help="Differentiable Neural Computer (usage, allocation, temporal link)")
def build_dnc(cfg: MANNConfig, input_size: int, output_size: int, task=None):
    return build_mann(cfg, DNCMemory(cfg.memory_size, cfg.word_size, cfg.read_heads), input_size, output_size, task)
