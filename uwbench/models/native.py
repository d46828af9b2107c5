"""The native whole-sequence path: a memory model's whole forward and backward as one autograd node.

``MANN`` (``mann.py``) runs a Python loop of small torch operations per step, about 840 operator calls
for a DNC step's forward and backward; at the paper's sizes (batch 64, N = 4, W = 64) the arithmetic is
a small part of that. This path keeps the same model and parameters and computes the same function
(checked to float64 round-off in ``tests/models/test_native.py``), with one custom autograd node for the
steps between the input projections and the output layer:

    per step t        z_t  = gx_t + hin_t W_hh + r_{t-1} W_read       (hin_t = h_{t-1}, or a_t for CUW)
                      h_t  = cell(z_t, c_{t-1})                        (C++, ``native/cells.cpp``)
    active steps      xi_t = h_t W_xi; state, r_t = memory(state, xi_t) (C++, ``native/dnc.cpp``, ``ntm.cpp``)

The matrix products are the kernels' own (``native/gemm.cpp``, one call each, written into preallocated
buffers or added to them; torch's BLAS was slower for these shapes on the AVX-512 machines measured,
benchmarks/README.md); everything between them, the cell and the whole memory step, is one C++ call on
the whole batch. Held steps (UW, CUW, RW) make no memory call and no interface product, and r's
projection is reused while r is held, as on the torch path. The backward runs the steps in reverse with
the same products per step (the data gradients) and makes the weight gradients of all steps at the
end, one product each (W_hh, W_xi, W_read). The memory kernels recompute a step's forward inside their backward, so the
node keeps only the memory state before each active step and the step's interface. CUW's attention
over the cached states is a kernel too (``native/cuw.cpp``), run at write steps only.

Generic: this module imports no model class. A model on this path exposes ``native_parts()``, its
parts by role (``controller``, ``memory`` and, with a cached writer, ``attention``), and each part
declares its kernel next to its torch code (a ``native_kernel`` method: ``uwbench/native/parts.py``).
The path applies to CPU tensors in float32 or float64 when every part declares a kernel
(``unsupported_reason`` names the first part that does not: a GRU controller, a plugin writer's own
attention, a new memory), and the declarations are checked against the loaded kernels' exported
sizes before the first forward (``checked_kernels``). ``native_cell.py`` runs a controller alone (the
LSTM baseline) the same way. The ``native`` training setting chooses the path
(``training/compile_policy.py``).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch

from uwbench import native as kernels
from uwbench.native.parts import AttentionKernel, CellKernel, Kernel, MemoryKernel, check, declaration
from uwbench.errors import UserError

_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}
ROLES = {"controller": CellKernel, "memory": MemoryKernel, "attention": AttentionKernel}  # what each role declares


def unsupported_reason(model, device: torch.device, dtype: torch.dtype) -> Optional[str]:
    """None when the native path can run ``model`` on ``device`` in ``dtype``, else what it lacks."""
    if torch.device(device).type != "cpu":
        return f"the native kernels run on the CPU, the run is on {device}"
    if dtype not in _SUFFIX:
        return f"the native kernels take float32 or float64, the model is {dtype}"
    for role, part in model.native_parts().items():
        if declaration(part) is None:
            return (f"the {role} {type(part).__name__} declares no native kernel (a `native_kernel` method of its "
                    "own class, uwbench/native/parts.py)")
    return None


def checked_kernels(model) -> Dict[str, Kernel]:
    """The kernels the model's parts declare, by role, checked against the loaded library (built now if
    needed) once per set of sizes: a declaration that disagrees with its kernel is a ``NativeUnavailable``
    naming both numbers."""
    lib = kernels.library()
    parts = model.native_parts()
    decls = {role: declaration(part) for role, part in parts.items()}
    key = tuple((role, type(parts[role]), d.kernel, tuple(d.sizes)) for role, d in decls.items())
    if getattr(model, "_native_checked", None) != key:
        for role, decl in decls.items():
            if not isinstance(decl, ROLES[role]):
                raise kernels.NativeUnavailable(
                    f"the {role} {type(parts[role]).__name__} declares a {type(decl).__name__}, a {role} takes a "
                    f"{ROLES[role].__name__}")
            check(lib, role, parts[role], decl)
        model._native_checked = key
    return decls


def enable(model, on: bool) -> None:
    """``use_native``'s work for any model with ``native_parts``: on, check that every part declares a
    kernel (``ValueError`` naming the first that does not), build the kernels and check the declarations
    (``NativeUnavailable``), so that a problem is an error here and not mid-run; then set ``model.native``."""
    if on:
        param = next(model.parameters())
        reason = unsupported_reason(model, param.device, param.dtype)
        if reason is not None:
            raise UserError(f"train.native=true cannot run this model: {reason}; set train.native=auto "
                             "(the native path where it applies) or false")
        checked_kernels(model)
    model.native = on


def run_sequence(model, gx_enc: torch.Tensor, gx_dec: torch.Tensor, schedule: List[bool]):
    """The steps of ``model`` (a ``MANN``) from the input projections gx_enc (Te, B, G) and gx_dec (Td, B, G),
    step-major, to the decoder's h (Td, B, H) and r (Td, B, read_size), as one autograd node. Step-major
    input projections get step-major gradients, which their matmul's backward takes without a copy."""
    reason = unsupported_reason(model, gx_enc.device, gx_enc.dtype)  # e.g. moved to CUDA after use_native()
    if reason is not None:
        raise ValueError(f"the native path cannot run this forward: {reason}; call model.use_native(False)")
    decls = checked_kernels(model)
    lib = kernels.library()
    ctrl, mem = model.controller, model.memory
    cell, memory, attention = decls["controller"], decls["memory"], decls.get("attention")
    b, device, dtype = gx_enc.shape[1], gx_enc.device, gx_enc.dtype
    state0 = memory.layout.flatten(mem.initial_state(b, device, dtype))  # (B, S), under autograd (the NTM's is learned)
    r0 = mem.initial_read(b, device, dtype)  # (B, read_size)
    w_read = ctrl.weight_ih[model.input_size:]  # (read_size, G)
    attn_params = attention.params if attention is not None else ()
    inputs = (gx_enc, gx_dec, ctrl.weight_hh, w_read, model.w_xi, cell.params(), state0, r0, *attn_params)
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs)
    te, td = gx_enc.shape[0], gx_dec.shape[0]
    schedule = [bool(s) for s in schedule]
    decoder_write = bool(model.cfg.decoder_write)
    write = schedule + [decoder_write] * td
    active = schedule + [True] * td
    sizes = (b, te, td, sum(active), ctrl.hidden_size, ctrl.weight_hh.shape[1], model.w_xi.shape[1],
             mem.read_size, state0.shape[1], dtype)
    width = getattr(lib, f"{attention.kernel}_act_size")(*attention.sizes) if attention is not None else 0
    plan = _Plan(lib=lib, sfx=_SUFFIX[dtype], cell=cell, memory=memory, dims=memory.sizes,
                 clip=float(model.cfg.interface_clip), write=write, active=active,
                 cuw=[attention is not None and t < te and schedule[t] for t in range(te + td)] + [False],
                 attention=attention, width=width, workspace=workspace(model, sizes, lib, cell, grad),
                 gx_leaf=(gx_enc.is_leaf, gx_dec.is_leaf))
    return _Sequence.apply(plan, *inputs)


@dataclass
class _Plan:
    lib: object
    sfx: str
    cell: CellKernel
    memory: MemoryKernel
    dims: Tuple[int, ...]
    clip: float
    write: List[bool]  # per step (encoder then decoder): the memory is written
    active: List[bool]  # per step: the memory is written and/or read (False: a held step)
    cuw: List[bool]  # per step (plus one past the end): a CUW write step, whose h_{t-1} is replaced
    attention: Optional[AttentionKernel]  # a cached writer's attention (its kernel runs at write steps)
    width: int  # the attention's activations kept per cached state
    workspace: "_Workspace"
    gx_leaf: Tuple[bool, bool]  # whether gx_enc, gx_dec are leaves (their gradients are then copied)

    def fn(self, name: str):
        return getattr(self.lib, f"{name}_{self.sfx}")


class _Workspace:
    """The buffers of one sequence shape, reused from call to call: fresh buffers of this size (tens of
    MB at the paper's sizes) cost more in page faults than the kernels cost in arithmetic. A forward
    that will have a backward reserves the workspace until its graph is freed (after the backward, or
    when the output is dropped without one); a forward that finds it reserved (two graphs alive at
    once) gets buffers of its own."""

    def __init__(self, sizes, lib, cell: CellKernel):
        b, te, td, n_active, hsz, g, x, rsz, ssz, dtype = sizes
        steps = te + td
        opts = dict(dtype=dtype)
        saved_size = max(getattr(lib, f"{cell.kernel}_saved_size")(*cell.sizes), 1)
        self.reserved = False
        self.hs = torch.zeros(steps + 1, b, hsz, **opts)  # hs[t + 1] = h_t, hs[0] the initial h (zero)
        self.cs = torch.zeros(steps + 1, b, hsz, **opts) if cell.has_cell else None  # the same for c
        self.saved = torch.empty(steps, b, saved_size, **opts)  # the cell's per-step values for its backward
        self.xis = torch.empty(n_active, b, x, **opts)  # the active steps' raw interfaces
        self.states = torch.empty(n_active + 1, b, ssz, **opts)  # the memory state before/after each active step
        self.rs = torch.empty(n_active + 1, b, rsz, **opts)  # r_0 and each active step's read
        self.hh = torch.empty(b, g, **opts)  # hin_t W_hh
        self.gr = torch.empty(b, g, **opts)  # r's projection, kept while r is held
        # backward
        self.dz = torch.empty(steps, b, g, **opts)  # dL/dz_t, also the input projections' gradient
        self.dxis = torch.empty_like(self.xis)
        self.dh_pending = torch.empty(steps + 1, b, hsz, **opts)  # gradients reaching h_t from outside the chain
        self.d_rs = torch.empty_like(self.rs)  # gradients reaching each read vector
        self.d_state = torch.empty(2, b, ssz, **opts)  # ping-pong: after and before a step
        self.dh = torch.empty(b, hsz, **opts)
        self.dc = torch.empty(b, hsz, **opts)
        self.dzsum = torch.empty(b, g, **opts)  # dz summed over the steps that share one held r
        self.scratch = torch.empty(6 * hsz, **opts)
        # per-step views (unbind: one call) and addresses
        self.hs_v, self.xis_v, self.rs_v = self.hs.unbind(0), self.xis.unbind(0), self.rs.unbind(0)
        self.dz_v, self.dxis_v, self.d_rs_v = self.dz.unbind(0), self.dxis.unbind(0), self.d_rs.unbind(0)
        self.dh_pending_v = self.dh_pending.unbind(0)
        self.hs_p, self.cs_p, self.saved_p, self.xis_p, self.states_p, self.rs_p, self.dz_p, self.dxis_p, \
            self.d_rs_p = (addresses(t) for t in (self.hs, self.cs, self.saved, self.xis, self.states, self.rs,
                                                   self.dz, self.dxis, self.d_rs))


def addresses(t: Optional[torch.Tensor]) -> List[Optional[int]]:
    """The address of each t[i] (None for every i when t is None)."""
    if t is None:
        return _Nones()
    base, step = t.data_ptr(), t.stride(0) * t.element_size()
    return [base + i * step for i in range(t.shape[0])]


class _Nones:
    def __getitem__(self, i):
        return None


def workspace(model, sizes, lib, cell: CellKernel, grad: bool) -> _Workspace:
    """The model's workspace for these sizes (one kept per model: a sweep's shapes rarely change), or fresh
    buffers when it is reserved by a graph whose backward has not run."""
    ws = getattr(model, "_native_workspace", None)
    if ws is None or ws[0] != sizes:
        ws = (sizes, _Workspace(sizes, lib, cell))
        model._native_workspace = ws
    if ws[1].reserved:
        return _Workspace(sizes, lib, cell)
    ws[1].reserved = grad
    return ws[1]


def release_workspace(ws: "_Workspace") -> None:
    ws.reserved = False


def pointer(t: Optional[torch.Tensor]) -> Optional[int]:
    return None if t is None else t.data_ptr()


class _Sequence(torch.autograd.Function):
    """See the module docstring. Inputs: gx_enc (Te, B, G), gx_dec (Td, B, G), W_hh (H, G), W_read
    (read_size, G), W_xi (H, X), the cell's own parameters (or None), the initial memory state (B, S) and
    read vector (B, read_size), and CUW's attention parameters. Outputs: the decoder's h (Td, B, H) and
    r (Td, B, read_size)."""

    @staticmethod
    def forward(ctx, plan: _Plan, gx_enc, gx_dec, w_hh, w_read, w_xi, cell_params, state0, r0, *attn_params):
        ws = plan.workspace
        gx_enc, gx_dec = gx_enc.detach().contiguous(), gx_dec.detach().contiguous()
        w_hh, w_read, w_xi = w_hh.detach(), w_read.detach(), w_xi.detach()
        cell_params = None if cell_params is None else cell_params.detach().contiguous()
        te, b, g = gx_enc.shape
        td = gx_dec.shape[0]
        steps = te + td
        hsz = w_hh.shape[0]
        write, active, cuw = plan.write, plan.active, plan.cuw
        ws.states[0] = state0.detach()
        ws.rs[0] = r0.detach()
        hs_p, cs_p, saved_p, xis_p, states_p, rs_p = ws.hs_p, ws.cs_p, ws.saved_p, ws.xis_p, ws.states_p, ws.rs_p
        hh, gr = ws.hh, ws.gr
        hh_p, gr_p, params_p = hh.data_ptr(), gr.data_ptr(), pointer(cell_params)
        gemm = plan.fn("gemm")  # C = C0 + A B into the buffers (native/gemm.cpp)
        mats = [w if w.stride(1) == 1 else w.contiguous() for w in (w_hh, w_read, w_xi)]  # rows contiguous
        (whh_p, ld_hh), (wread_p, ld_read), (wxi_p, ld_xi) = ((m.data_ptr(), m.stride(0)) for m in mats)
        rsz, x = w_read.shape[0], w_xi.shape[1]
        gemm(b, g, rsz, rs_p[0], rsz, 0, wread_p, ld_read, None, 0, gr_p, g)  # r_0 W_read (B, G)
        enc_p, dec_p = gx_enc.data_ptr(), gx_dec.data_ptr()
        item = gx_enc.element_size()
        kidx = []  # index into states / rs of the state and r each step starts from
        anchors: Dict[int, tuple] = {}  # CUW write step -> (a_t, first cached row of hs, n, alpha, activations)
        attn_params = [p.detach().contiguous() for p in attn_params]  # in the attention kernel's order
        attn_p = [p.data_ptr() for p in attn_params]
        width, att = plan.width, plan.attention
        att_fwd, att_sizes = (plan.fn(f"{att.kernel}_fwd"), att.sizes) if att is not None else (None, ())
        opts = dict(device=gx_enc.device, dtype=gx_enc.dtype)
        cache_rows: List[int] = []
        cell_fwd = plan.fn(f"{plan.cell.kernel}_fwd")
        mem_fwd = plan.fn(f"{plan.memory.kernel}_fwd")
        dims, clip = plan.dims, plan.clip
        k = 0
        for t in range(steps):
            gx_p = enc_p + t * b * g * item if t < te else dec_p + (t - te) * b * g * item
            if plan.attention is not None and t < te:
                cache_rows.append(t)  # h_{t-1}
            if cuw[t]:  # a_t = attention over the cached states h_{first-1}..h_{t-1} replaces h_{t-1}
                first, n = cache_rows[0], len(cache_rows)
                a = torch.empty(b, hsz, **opts)  # (B, H)
                alpha, act = torch.empty(b, n, **opts), torch.empty(b, n, width, **opts)
                att_fwd(b, n, *att_sizes, hs_p[t], hs_p[first], b * hsz, rs_p[k], *attn_p, a.data_ptr(),
                        alpha.data_ptr(), act.data_ptr())
                anchors[t] = (a, first, n, alpha, act)
                cache_rows = []
                gemm(b, g, hsz, a.data_ptr(), hsz, 0, whh_p, ld_hh, None, 0, hh_p, g)  # a_t W_hh (B, G)
            cell_fwd(b, hsz, gx_p, g, None if (t == 0 and not cuw[t]) else hh_p, g, gr_p, g, cs_p[t], params_p,
                     hs_p[t + 1], cs_p[t + 1], saved_p[t])
            kidx.append(k)
            if active[t]:
                gemm(b, x, hsz, hs_p[t + 1], hsz, 0, wxi_p, ld_xi, None, 0, xis_p[k], x)  # xi_t = h_t W_xi (B, X)
                mem_fwd(b, *dims, int(write[t]), clip, xis_p[k], states_p[k], states_p[k + 1], rs_p[k + 1])
                k += 1
                gemm(b, g, rsz, rs_p[k], rsz, 0, wread_p, ld_read, None, 0, gr_p, g)  # r_t W_read (B, G)
            if t + 1 < steps and not cuw[t + 1]:
                gemm(b, g, hsz, hs_p[t + 1], hsz, 0, whh_p, ld_hh, None, 0, hh_p, g)  # h_t W_hh (B, G)
        dec_rows = [kidx[t] + 1 for t in range(te, steps)]  # each decoder step's r in rs
        ctx.plan = plan
        if ws.reserved:  # released when this graph is freed (after its backward, or without one)
            weakref.finalize(ctx, release_workspace, ws)
        ctx.meta = (te, td, kidx, anchors, dec_rows)
        ctx.weights = (w_hh, w_read, w_xi, cell_params, attn_params)
        # the weights are kept by reference (not copied): a change in place before the backward would
        # give wrong gradients, so the backward checks their versions, as save_for_backward would
        ctx.versions = [t._version for t in (w_hh, w_read, w_xi, *attn_params)]
        return ws.hs[te + 1:].clone(), ws.rs[dec_rows]

    @staticmethod
    def backward(ctx, d_hdec, d_rdec):
        plan = ctx.plan
        ws = plan.workspace
        te, td, kidx, anchors, dec_rows = ctx.meta
        w_hh, w_read, w_xi, cell_params, attn_params = ctx.weights
        _check_unchanged(ctx)
        dh_pending, d_rs = ws.dh_pending, ws.d_rs
        dh_pending.zero_()
        if d_hdec is not None:
            dh_pending[te + 1:] = d_hdec
        d_rs.zero_()
        if d_rdec is not None:
            d_rs[dec_rows] = d_rdec
        ws.d_state.zero_()
        ws.dc.zero_()
        d_cell = torch.zeros_like(cell_params) if cell_params is not None else None
        d_attn = [torch.zeros_like(p) for p in attn_params]
        cur = _backward_steps(ctx, d_cell, d_attn)
        need = ctx.needs_input_grad
        dz = ws.dz
        d_gx_enc = dz[:te] if need[1] else None
        d_gx_dec = dz[te:] if need[2] else None
        d_w_hh, d_w_read, d_w_xi = _weight_grads(ws, need, plan.active, kidx, anchors, te + td, plan.fn("gemm"))
        d_state = ws.d_state[cur].clone() if need[7] else None
        d_r0 = d_rs[0].clone() if need[8] else None
        # the input projections' gradients are views of the workspace: copies where autograd could keep them
        if d_gx_enc is not None and plan.gx_leaf[0]:
            d_gx_enc = d_gx_enc.clone()
        if d_gx_dec is not None and plan.gx_leaf[1]:
            d_gx_dec = d_gx_dec.clone()
        return (None, d_gx_enc, d_gx_dec, d_w_hh, d_w_read, d_w_xi, d_cell if need[6] else None,
                d_state, d_r0, *d_attn)


def _backward_steps(ctx, d_cell: Optional[torch.Tensor], d_attn: List[torch.Tensor]) -> int:
    """The backward's loop over the steps in reverse: the data gradients (dz, the interfaces', the read
    vectors', the memory state's) into the workspace, the cell's and the attention's parameter gradients
    added to ``d_cell`` and ``d_attn``. Returns which half of ``ws.d_state`` holds the initial state's."""
    plan = ctx.plan
    ws = plan.workspace
    te, td, kidx, anchors, _ = ctx.meta
    w_hh, w_read, w_xi, cell_params, attn_params = ctx.weights
    write, active, cuw = plan.write, plan.active, plan.cuw
    steps = te + td
    b, hsz = ws.hs.shape[1], ws.hs.shape[2]
    g, x, rsz = w_hh.shape[1], w_xi.shape[1], w_read.shape[0]
    dz_v, dh_pending_v = ws.dz_v, ws.dh_pending_v
    dz_p, dxis_p, d_rs_p, hs_p, cs_p, saved_p, xis_p, states_p = (ws.dz_p, ws.dxis_p, ws.d_rs_p, ws.hs_p,
                                                                  ws.cs_p, ws.saved_p, ws.xis_p, ws.states_p)
    d_state_p = [ws.d_state[0].data_ptr(), ws.d_state[1].data_ptr()]
    cur = 0  # which half of ws.d_state holds the gradient of the current state
    dh, dzsum = ws.dh, ws.dzsum
    dh_p, dc_p, scratch_p, dzsum_p = dh.data_ptr(), ws.dc.data_ptr(), ws.scratch.data_ptr(), dzsum.data_ptr()
    spanned = False
    d_cell_p, params_p = pointer(d_cell), pointer(cell_params)
    att = plan.attention
    attn_b = att.backward_params(attn_params) if att is not None else []  # as the kernel's backward takes them
    attn_p = [p.data_ptr() for p in attn_b]
    d_attn_p = [p.data_ptr() for p in d_attn]
    att_bwd, att_sizes = (plan.fn(f"{att.kernel}_bwd"), att.sizes) if att is not None else (None, ())
    dh_pending_p = addresses(ws.dh_pending)
    # the weights transposed, rows contiguous: W_hh^T (G, H), W_xi^T (X, H), W_read^T (G, read_size)
    w_hh_t, w_xi_t, w_read_t = (w.t().contiguous() for w in (w_hh, w_xi, w_read))
    whh_t_p, wxi_t_p, wread_t_p = w_hh_t.data_ptr(), w_xi_t.data_ptr(), w_read_t.data_ptr()
    gemm = plan.fn("gemm")  # C = C0 + A B (native/gemm.cpp)
    cell_bwd = plan.fn(f"{plan.cell.kernel}_bwd")
    mem_bwd = plan.fn(f"{plan.memory.kernel}_bwd")
    dims, clip = plan.dims, plan.clip
    for t in range(steps - 1, -1, -1):
        k = kidx[t]
        if active[t]:
            mem_bwd(b, *dims, int(write[t]), clip, xis_p[k], states_p[k], d_state_p[cur], d_rs_p[k + 1],
                    d_state_p[1 - cur], dxis_p[k])
            cur = 1 - cur
        # dh_t (B, H): from outside, from z_{t+1} (unless CUW replaced h_t there) and from xi_t
        if t + 1 < steps and not cuw[t + 1]:
            gemm(b, hsz, g, dz_p[t + 1], g, 0, whh_t_p, hsz, dh_pending_p[t + 1], hsz, dh_p, hsz)
        else:
            dh.copy_(dh_pending_v[t + 1])
        if active[t]:
            gemm(b, hsz, x, dxis_p[k], x, 0, wxi_t_p, hsz, dh_p, hsz, dh_p, hsz)
        cell_bwd(b, hsz, cs_p[t], hs_p[t + 1], saved_p[t], params_p, dh_p, dc_p, dz_p[t], g, d_cell_p, scratch_p)
        if cuw[t]:  # the gradient of a_t: to h_{t-1}, the cached states, r_{t-1} and the attention
            _, first, n, alpha, act = anchors[t]
            d_a = dz_v[t] @ w_hh_t  # (B, H)
            att_bwd(b, n, *att_sizes, hs_p[t], hs_p[first], b * hsz, ws.rs_p[k], *attn_p,
                    alpha.data_ptr(), act.data_ptr(), d_a.data_ptr(), dh_pending_p[t], dh_pending_p[first],
                    d_rs_p[k], *d_attn_p)
        # r_k fed z_t: its gradient (B, read_size) gathers dz over the steps that held it, one product per span
        if spanned:
            dzsum.add_(dz_v[t])
        if t == 0 or active[t - 1]:
            gemm(b, rsz, g, dzsum_p if spanned else dz_p[t], g, 0, wread_t_p, rsz, d_rs_p[k], rsz, d_rs_p[k], rsz)
            spanned = False
        elif not spanned:
            dzsum.copy_(dz_v[t])
            spanned = True
    return cur


def _check_unchanged(ctx) -> None:
    """The backward's guard: no weight the forward kept by reference was changed in place since."""
    w_hh, w_read, w_xi, _, attn_params = ctx.weights
    if [t._version for t in (w_hh, w_read, w_xi, *attn_params)] != ctx.versions:
        raise RuntimeError("a weight of the native sequence node was changed in place between its forward and "
                           "its backward (e.g. an optimizer step before backward()): run backward() first")


def _weight_grads(ws, need, active, kidx, anchors, steps, gemm):
    """The recurrent weights' gradients, each one product over all steps (after the backward's loop).

    Returns (dW_hh, dW_read, dW_xi), None where autograd does not need one.
    """
    dz, dxis = ws.dz, ws.dxis  # (S, B, G), (A, B, interface)
    d_w_hh = d_w_read = d_w_xi = None
    every = all(active)  # then step t reads r_t-1 = rs[t] and makes xi from hs[t + 1]: slices, no gathers
    if need[4]:
        r_in = ws.rs[:steps] if every else ws.rs[kidx]  # (S, B, read_size): the r each step's z used
        d_w_read = _at_b(gemm, r_in, dz)
    if need[5]:
        h_act = ws.hs[1:] if every else ws.hs[[t + 1 for t in range(steps) if active[t]]]  # (A, B, H)
        d_w_xi = _at_b(gemm, h_act, dxis)
    if need[3]:  # step t's z used hs[t] = h_{t-1}, or a_t at a CUW write: a_t stands in hs[t] for one product
        rows = list(anchors)
        kept = ws.hs[rows] if rows else None  # (W, B, H)
        try:
            if rows:
                ws.hs[rows] = torch.stack([anchors[t][0] for t in rows])
            d_w_hh = _at_b(gemm, ws.hs[:steps], dz)
        finally:  # hs is the forward's record (a second backward reads it again)
            if rows:
                ws.hs[rows] = kept
    return d_w_hh, d_w_read, d_w_xi


def _at_b(gemm, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a^T b over all steps and rows: a (S, B, M) and b (S, B, N), both contiguous, to (M, N)."""
    m, n = a.shape[-1], b.shape[-1]
    k = a.numel() // m
    out = torch.empty(m, n, dtype=a.dtype, device=a.device)
    gemm(m, n, k, a.data_ptr(), m, 1, b.data_ptr(), n, None, 0, out.data_ptr(), n)
    return out
