"""The native whole-sequence path of a controller alone (the LSTM baseline): its whole forward and
backward over the encoder and decoder steps as one autograd node.

The same function as ``LSTMBaseline``'s torch path (``lstm.py``: ``run_controller`` over the encoder,
then the decoder from its final state), checked in float64 in ``tests/models/test_native_cell.py``:

    per step t        z_t = gx_t + h_{t-1} W_hh                        (h_{-1} = 0, c_{-1} = 0)
                      h_t, c_t = cell(z_t, c_{t-1})                      (C++, ``native/cells.cpp``)

The input projections gx of all steps are made before (one matmul per phase, as on the torch path),
h_{t-1} W_hh is one call per step to the kernels' matrix product (``native/gemm.cpp``) into a preallocated
buffer and the cell is one C++ call on the whole batch; the backward runs the steps in reverse (dh_t = dz_{t+1} W_hh^T + the gradient from the
output, then the cell's backward) and makes W_hh's gradient with one product over all steps at the
end. The buffers are the memory path's workspace (``native.py``) without its memory parts, reused
from call to call in the same way, and the backward's own (``_PaddedGrad``): dh's products run on rows
padded to a multiple of 16 columns, which fill whole vectors (MKL, which ran these products before, also
took them faster than rows of H = 125; benchmarks/README.md).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Tuple

import torch

from uwbench import native as kernels
from uwbench.models.native import (_SUFFIX, _Workspace, _at_b, checked_kernels, pointer, release_workspace,
                                   unsupported_reason, workspace)
from uwbench.native.parts import CellKernel


@dataclass
class _CellPlan:
    fwd: object  # the cell kernel's forward and backward (with dh's row stride) entry points for the dtype
    bwd: object
    gemm: object  # the matrix product (native/gemm.cpp) for the dtype
    cell: CellKernel
    workspace: _Workspace
    encoder_steps: int
    gx_leaf: Tuple[bool, bool]  # whether gx_enc, gx_dec are leaves (their gradients are then copied)


PAD = 16  # dh's row length in the backward is H rounded up to this


class _PaddedGrad:
    """The backward's buffers with rows of Hp = H rounded up to ``PAD`` (the pad columns stay zero): W_hh^T
    (G, Hp), the gradients reaching each h_t from outside the chain (steps + 1, B, Hp; the encoder's
    rows stay zero: nothing outside the chain reads an encoder step's h), and dh (B, Hp)."""

    def __init__(self, steps: int, b: int, hsz: int, g: int, dtype):
        self.hp = -(-hsz // PAD) * PAD
        self.w_hh_t = torch.zeros(g, self.hp, dtype=dtype)
        self.pending = torch.zeros(steps + 1, b, self.hp, dtype=dtype)
        self.dh = torch.zeros(b, self.hp, dtype=dtype)
        self.pending_v = self.pending.unbind(0)
        self.pending_p = [v.data_ptr() for v in self.pending_v]


def padded_grad(ws, steps: int, b: int, hsz: int, g: int, dtype) -> _PaddedGrad:
    """The workspace's padded backward buffers (made on its first backward)."""
    pad = getattr(ws, "cell_padded_grad", None)
    if pad is None:
        pad = ws.cell_padded_grad = _PaddedGrad(steps, b, hsz, g, dtype)
    return pad


def run_cells(model, gx_enc: torch.Tensor, gx_dec: torch.Tensor) -> torch.Tensor:
    """The controller of ``model`` (its ``native_parts``: a controller alone) over the input projections
    gx_enc (Te, B, G) and gx_dec (Td, B, G), step-major, from the zero state: the decoder's h (Td, B, H),
    as one autograd node."""
    reason = unsupported_reason(model, gx_enc.device, gx_enc.dtype)  # e.g. moved to CUDA after use_native()
    if reason is not None:
        raise ValueError(f"the native path cannot run this forward: {reason}; call model.use_native(False)")
    cell = checked_kernels(model)["controller"]
    lib = kernels.library()
    ctrl = model.controller
    inputs = (gx_enc, gx_dec, ctrl.weight_hh, cell.params())
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs)
    (te, b, g), td, dtype = gx_enc.shape, gx_dec.shape[0], gx_enc.dtype
    sizes = (b, te, td, 0, ctrl.hidden_size, g, 0, 0, 0, dtype)  # no memory: no interfaces, states or reads
    sfx = _SUFFIX[dtype]
    plan = _CellPlan(fwd=getattr(lib, f"{cell.kernel}_fwd_{sfx}"), bwd=getattr(lib, f"{cell.kernel}_bwd_ld_{sfx}"),
                     gemm=getattr(lib, f"gemm_{sfx}"), cell=cell, workspace=workspace(model, sizes, lib, cell, grad), encoder_steps=te,
                     gx_leaf=(gx_enc.is_leaf, gx_dec.is_leaf))
    return _Cells.apply(plan, *inputs)


class _Cells(torch.autograd.Function):
    """See the module docstring. Inputs: gx_enc (Te, B, G), gx_dec (Td, B, G), W_hh (H, G), the cell's own
    parameters (or None). Output: the decoder's h (Td, B, H)."""

    @staticmethod
    def forward(ctx, plan: _CellPlan, gx_enc, gx_dec, w_hh, cell_params):
        ws = plan.workspace
        gx_enc, gx_dec = gx_enc.detach().contiguous(), gx_dec.detach().contiguous()
        w_hh = w_hh.detach()
        cell_params = None if cell_params is None else cell_params.detach().contiguous()
        te, b, g = gx_enc.shape
        steps = te + gx_dec.shape[0]
        hsz = w_hh.shape[0]
        hs_p, cs_p, saved_p = ws.hs_p, ws.cs_p, ws.saved_p
        hh = ws.hh
        hh_p, params_p = hh.data_ptr(), pointer(cell_params)
        w_rows = w_hh if w_hh.stride(1) == 1 else w_hh.contiguous()  # (H, G), rows contiguous
        w_p, ld_w, gemm = w_rows.data_ptr(), w_rows.stride(0), plan.gemm
        enc_p, dec_p, row = gx_enc.data_ptr(), gx_dec.data_ptr(), b * g * gx_enc.element_size()
        fwd = plan.fwd
        for t in range(steps):
            gx_p = enc_p + t * row if t < te else dec_p + (t - te) * row
            # h_{-1} = 0: the first step has no recurrent term
            fwd(b, hsz, gx_p, g, None if t == 0 else hh_p, g, None, g, cs_p[t], params_p, hs_p[t + 1], cs_p[t + 1],
                saved_p[t])
            if t + 1 < steps:
                gemm(b, g, hsz, hs_p[t + 1], hsz, 0, w_p, ld_w, None, 0, hh_p, g)  # h_t W_hh (B, G)
        ctx.plan = plan
        if ws.reserved:  # released when this graph is freed (after its backward, or without one)
            weakref.finalize(ctx, release_workspace, ws)
        ctx.weights = (w_hh, cell_params)
        ctx.version = w_hh._version  # kept by reference: the backward checks it was not changed in place
        return ws.hs[te + 1:].clone()

    @staticmethod
    def backward(ctx, d_hdec):
        plan = ctx.plan
        ws = plan.workspace
        w_hh, cell_params = ctx.weights
        if w_hh._version != ctx.version:
            raise RuntimeError("a weight of the native sequence node was changed in place between its forward and "
                               "its backward (e.g. an optimizer step before backward()): run backward() first")
        te = plan.encoder_steps
        steps, b, hsz = ws.hs.shape[0] - 1, ws.hs.shape[1], ws.hs.shape[2]
        g = w_hh.shape[1]
        pad = padded_grad(ws, steps, b, hsz, g, w_hh.dtype)
        hp, pending = pad.hp, pad.pending
        if d_hdec is not None:
            pending[te + 1:, :, :hsz] = d_hdec
        else:
            pending[te + 1:].zero_()
        pad.w_hh_t[:, :hsz] = w_hh.t()  # (G, Hp)
        dz, pending_p, w_hh_t_p, dh, gemm = ws.dz, pad.pending_p, pad.w_hh_t.data_ptr(), pad.dh, plan.gemm
        dc = ws.dc
        dc.zero_()
        d_cell = torch.zeros_like(cell_params) if cell_params is not None else None
        dh_p, dc_p, scratch_p, d_cell_p, params_p = (dh.data_ptr(), dc.data_ptr(), ws.scratch.data_ptr(),
                                                     pointer(d_cell), pointer(cell_params))
        hs_p, cs_p, saved_p, dz_p = ws.hs_p, ws.cs_p, ws.saved_p, ws.dz_p
        bwd = plan.bwd
        for t in range(steps - 1, -1, -1):
            if t + 1 < steps:  # dh_t: from the output, and from z_{t+1}
                gemm(b, hp, g, dz_p[t + 1], g, 0, w_hh_t_p, hp, pending_p[t + 1], hp, dh_p, hp)  # (B, Hp)
                dh_t = dh_p
            else:
                dh_t = pending_p[t + 1]
            bwd(b, hsz, cs_p[t], hs_p[t + 1], saved_p[t], params_p, dh_t, hp, dc_p, dz_p[t], g, d_cell_p, scratch_p)
        need = ctx.needs_input_grad
        d_w_hh = None
        if need[3]:  # step t's z used h_{t-1} = hs[t]; the first step's is zero
            d_w_hh = _at_b(plan.gemm, ws.hs[1:steps], dz[1:])  # (H, G)
        d_gx_enc = dz[:te] if need[1] else None
        d_gx_dec = dz[te:] if need[2] else None
        # the input projections' gradients are views of the workspace: copies where autograd could keep them
        if d_gx_enc is not None and plan.gx_leaf[0]:
            d_gx_enc = d_gx_enc.clone()
        if d_gx_dec is not None and plan.gx_leaf[1]:
            d_gx_dec = d_gx_dec.clone()
        return None, d_gx_enc, d_gx_dec, d_w_hh, d_cell if need[4] else None
