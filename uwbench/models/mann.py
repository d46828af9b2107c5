"""The generic memory-augmented seq2seq model: controller + external memory + writer.

One frame serves every memory (DNC: ``dnc_memory.py``, NTM: ``ntm.py``) and every writer
(``uwbench/writing``), following the contract in ``memory_base.py`` and docs/reference.md §3.1, §5.2:

    controller   h_t, state = f([x_t ; r_{t-1}], state)            (paper Eq. 3-4)
    interface    xi_t = clip(h_t W_xi, +-interface_clip)           (docs/reference.md §3.3)
    write step   state = write(state, xi_t); r_t, state = read(state, xi_t)
    held step    memory state and r_{t-1} carried unchanged        (UW / CUW / RW, docs/reference.md §5.2)
    output       y_t = clip(h_t W_y + r_t W_r, +-20)               (decoder only, docs/reference.md §3.4)

The encoder's write steps come from the writer's batch-shared schedule, so a held step is a plain
Python branch that does no memory work at all (docs/reference.md §5.2): UW's speed-up depends on it. The
controller still runs on held steps, as in the authors' code; the interface projection, unused there,
is computed on held steps only while tracing (so the write gate can be traced at every step). The
decoder writes and reads every step (``decoder_write=False``: reads only).
A ``cached`` writer (CUW, paper Algorithm 1) replaces h_{t-1} by an attention over the controller
states cached since the last write before each encoder write step.

Speed (benchmarks/README.md): the encoder's and the decoder's input projections take one
matmul each (``controller.project`` on all steps); only the read vector's part is projected per step
(fused with the step's input into one ``addmm``), and not again while the read vector is held; the
controller's per-sequence constants are made once (``controller.sequence()``); W_y and W_r are applied
once to all decoder steps. ``compile_steps()`` puts the step function under ``torch.compile`` (the
``compile`` training setting, ``auto`` by default: long runs compile, benchmarks/README.md).

Traces: with ``model.tracing = True`` each forward leaves in ``model.trace`` (detached, S = Te + Td
steps, encoder first):

    write_mask       (S,) bool     True where the memory was written
    write_gate       (B, S)        the memory's write gate at every step (held steps too), if it has one
    write_weights    (B, S, N)     zero on steps without a write
    read_weights     (B, S, ...)   the memory's read weights (carried on held steps); DNC (B, S, R, N)
    read_vectors     (B, S, read_size)
    cache_attention  {step: (B, n)} CUW attention over the n cached states at each encoder write step
    encoder_steps    int           Te

plus any other key the memory's ``trace_step`` returns. With tracing off nothing is recorded.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
import torch.nn as nn

from uwbench.errors import UserError
from uwbench.models.base import OUTPUT_CLIP, Seq2SeqModel
from uwbench.models.controllers import build_controller, compile_step
from uwbench.models.memory_base import MANNConfig
from uwbench.models.native import enable, run_sequence
from uwbench.registry import WRITERS
from uwbench.writing.base import Writer

INIT_STD = 0.1  # W_xi, W_y, W_r ~ N(0, 0.1^2), no biases (docs/reference.md §3.5)


class UnsupportedLengthsError(NotImplementedError, UserError):
    """Variable encoder lengths inside a batch are not supported by the memory models yet."""


class MANN(Seq2SeqModel):
    """Controller + ``memory`` + ``writer`` (see the module docstring). ``input_size`` is the task's
    input width; the controller reads [x_t ; r_{t-1}] of width input_size + memory.read_size."""

    # Seconds a compiled step saves per sequence step against the eager one, forward + backward: about
    # 1 ms on a 2-core CPU at the paper's sizes (copy T = 50: 256 ms eager, 151 ms compiled per 102
    # steps), hardly dependent on the sizes. train.compile=auto weighs it against the compile time.
    compiled_step_saving = 1.0e-3
    capturable = True

    def __init__(self, cfg: MANNConfig, memory: nn.Module, writer: Writer, input_size: int, output_size: int):
        super().__init__()
        self.cfg = cfg
        self.writer = writer
        self.input_size = input_size
        self.read_size = memory.read_size
        h = cfg.hidden_size
        self.controller = build_controller(cfg.controller, input_size + memory.read_size, h)
        self.memory = memory
        self.w_xi = nn.Parameter(torch.randn(h, memory.interface_size) * INIT_STD)  # (H, |xi|) fused interface
        self.w_y = nn.Parameter(torch.randn(h, output_size) * INIT_STD)  # (H, O)
        self.w_r = nn.Parameter(torch.randn(memory.read_size, output_size) * INIT_STD)  # (read_size, O)
        self.cache_attention = writer.build_attention(h, memory.read_size) if writer.cached else None
        self._compiled_step = None  # set by compile_steps()
        self.native = False  # set by use_native(): the whole sequence as one native autograd node
        mask = getattr(writer, "mask", None)
        if mask is not None:
            # A writer with a fixed per-instance mask (random writing): keep it in the state dict so a
            # restored checkpoint runs the same policy, and copy it back to the writer on load.
            self.register_buffer("writer_mask", torch.tensor(mask, dtype=torch.bool))
            self.register_load_state_dict_post_hook(_restore_writer_mask)

    def forward(self, inputs: torch.Tensor, decoder_inputs: torch.Tensor, lengths=None) -> torch.Tensor:
        """inputs (B, Te, I), decoder_inputs (B, Td, I) -> outputs (B, Td, O)."""
        if lengths is not None:
            raise UnsupportedLengthsError(
                "the memory models need one encoder length per batch: `lengths is None` must hold, got a "
                f"tensor of shape {tuple(lengths.shape)} (variable-length batches are not supported yet)"
            )
        te = inputs.shape[1]
        schedule = self.writer.schedule(te)
        if len(schedule) != te:
            raise ValueError(f"the writer's schedule must have one entry per encoder step ({te}), got {len(schedule)}")
        rec: Optional[_Recorder] = _Recorder() if self.tracing else None
        if self.native and rec is None:
            return self._forward_native(inputs, decoder_inputs, schedule)
        with self.controller.sequence():  # the controller's per-sequence constants, made once
            step = self._pick_step(rec)
            carried = self._encode(inputs, schedule, step, rec)
            out = self._decode(decoder_inputs, carried, step, rec)
        if rec is not None:
            self.trace = rec.finish(te)
        return out

    def native_parts(self) -> Dict[str, nn.Module]:
        """The parts the native path needs a kernel for, by role: the controller, the memory and a cached
        writer's attention (``uwbench/models/native.py``)."""
        parts = {"controller": self.controller, "memory": self.memory}
        if self.cache_attention is not None:
            parts["attention"] = self.cache_attention
        return parts

    def use_native(self, on: bool = True) -> "MANN":
        """Run forwards through the native whole-sequence path (``uwbench/models/native.py``): the same
        function, computed by C++ kernels and one autograd node per sequence. Raises ``ValueError`` naming
        the part without a kernel (a GRU controller, a plugin writer's attention, ...) or what else is
        unsupported (a CUDA device), or ``NativeUnavailable`` (no compiler; a declaration that disagrees
        with its kernel). Traced forwards keep the torch path. Returns the model."""
        enable(self, on)
        return self

    def _forward_native(self, inputs, decoder_inputs, schedule) -> torch.Tensor:
        ctrl = self.controller
        with ctrl.sequence():
            gx_enc = ctrl.project(inputs.transpose(0, 1), 0, self.input_size)  # (Te, B, G), step-major
            gx_dec = ctrl.project(decoder_inputs.transpose(0, 1), 0, self.input_size)  # (Td, B, G)
            hs, rs = run_sequence(self, gx_enc, gx_dec, schedule)  # (Td, B, H), (Td, B, read_size)
        out = hs.transpose(0, 1) @ self.w_y + rs.transpose(0, 1) @ self.w_r  # (B, Td, O)
        return torch.clamp(out, -OUTPUT_CLIP, OUTPUT_CLIP)

    def encode(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, Te, I) -> the controller's final encoder state h_Te (B, H), after the writer's
        schedule of memory writes: the state whose input contributions the paper's §2.1.1 measures
        (``uwbench theory contributions --target state``)."""
        schedule = self.writer.schedule(inputs.shape[1])
        with self.controller.sequence():
            cstate, _, _, _ = self._encode(inputs, schedule, self._step, None)
        return cstate[0]

    def _pick_step(self, rec):
        """The compiled step where one exists and autograd records without tracing, else the eager one."""
        if self._compiled_step is not None and rec is None and torch.is_grad_enabled():
            return self._compiled_step
        return self._step

    def _encode(self, inputs, schedule, step, rec):
        """The encoder loop (see ``forward``): returns the carried (controller state, memory state, r,
        r's projection) after the last encoder step."""
        b, te = inputs.shape[0], inputs.shape[1]
        device, dtype = inputs.device, inputs.dtype
        ctrl, mem = self.controller, self.memory
        cstate = ctrl.initial_state(b, device, dtype)
        mstate = mem.initial_state(b, device, dtype)
        r = mem.initial_read(b, device, dtype)  # (B, read_size)
        gr: Optional[torch.Tensor] = None  # r's projection into the controller, reused while r is held
        w_read = ctrl.weight_ih[self.input_size:]  # (read_size, G): r's rows of the input weights, sliced once

        # The input projection of all steps in one matmul; unbind (not gx[:, t]) so the backward stacks the
        # step gradients once instead of filling a zero (B, T, G) tensor per step.
        gx_enc = ctrl.project(inputs, 0, self.input_size).unbind(1)  # Te x (B, G)
        cache: List[torch.Tensor] = []
        for t in range(te):
            write = bool(schedule[t])
            if self.cache_attention is not None:
                cache.append(cstate[0])  # h_{t-1}, (B, H)
                if write:
                    a, alpha = self.cache_attention(cstate[0], torch.stack(cache, dim=1), r)  # (B, H), (B, n)
                    cstate = (a,) + tuple(cstate[1:])  # a_t replaces h_{t-1}; an LSTM's cell is kept
                    cache = []
                    if rec is not None:
                        rec.cache_attention[t] = alpha.detach()
            # A held step gets no memory state (it does not touch it), so a compiled held step has one graph
            # whether the memory still holds its constant initial values or not.
            step_mstate = mstate if (write or rec is not None) else None
            cstate, mstate, r, gr = _carry(step(gx_enc[t], w_read, cstate, step_mstate, r, gr, write, write, rec),
                                           mstate, r, gr)
        return cstate, mstate, r, gr

    def _decode(self, decoder_inputs, carried, step, rec) -> torch.Tensor:
        """The decoder loop from the encoder's carried state: outputs (B, Td, O)."""
        cstate, mstate, r, gr = carried
        td = decoder_inputs.shape[1]
        w_read = self.controller.weight_ih[self.input_size:]  # (read_size, G)
        gx_dec = self.controller.project(decoder_inputs, 0, self.input_size).unbind(1)  # Td x (B, G)
        hs, rs = [], []
        for t in range(td):
            cstate, mstate, r, gr = _carry(step(gx_dec[t], w_read, cstate, mstate, r, gr,
                                                self.cfg.decoder_write, True, rec), mstate, r, gr)
            hs.append(cstate[0])  # h_t
            rs.append(r)
        out = torch.stack(hs, dim=1) @ self.w_y + torch.stack(rs, dim=1) @ self.w_r  # (B, Td, O)
        return torch.clamp(out, -OUTPUT_CLIP, OUTPUT_CLIP)

    def compile_steps(self, **options) -> "MANN":
        """Run the per-step function (controller, interface, memory write and read) under ``torch.compile``
        (the ``compile`` training option, on by default for long runs: ``training/compile_policy.py``).
        Each kind of step (write and read, held, held with a kept read projection) compiles once into
        one fused forward and one fused backward (on CUDA: a captured CUDA graph each); the
        Python loop over steps and the batch-shared schedule stay as they are, so held steps still skip
        the memory. Traced forwards and forwards without autograd (evaluation) use the eager step:
        tracing records Python-side, and evaluation is not worth a second set of compilations.
        ``options`` go to ``torch.compile`` (see ``controllers.compile_step``). Returns the model."""
        self._compiled_step = compile_step(self._step, **options)
        return self

    def _step(self, gx, w_read, cstate, mstate, r, gr, write: bool, read: bool, rec):
        """One controller step, then (if scheduled) the memory write and read. gx (B, G) is the step's
        external-input projection, w_read (read_size, G) the input weights' rows for r. Returns (controller
        state, memory state, r, r's projection), each None where this step left it unchanged: a compiled
        step then returns only what it computed, as outputs that alias inputs cost extra bookkeeping per
        call. ``_carry`` merges them back."""
        new_gr = None
        if gr is not None:  # r_{t-1} held since its projection was made
            g = gx + gr
        elif read:  # r_{t-1} is used by this step only: fuse its projection into one addmm
            g = torch.addmm(gx, r, w_read)  # (B, G)
        else:  # r_{t-1} will be carried past this step: keep its projection for the next steps
            new_gr = r @ w_read  # (B, G)
            g = gx + new_gr
        h, cstate = self.controller.step(g, cstate)  # (B, H)
        if not (write or read or rec is not None):
            return cstate, None, None, new_gr  # a held step: no interface needed (it is unused)
        xi = torch.clamp(h @ self.w_xi, -self.cfg.interface_clip, self.cfg.interface_clip)  # (B, |xi|)
        iface = self.memory.parse(xi) if (write or read) else None
        new_mstate = new_r = None
        if write:
            new_mstate = mstate = self.memory.write(mstate, iface)
        if read:
            new_r, new_mstate = self.memory.read(mstate, iface)  # (B, read_size)
            mstate = new_mstate
        if rec is not None:
            rec.step(self.memory, mstate, self.memory.parse(xi) if iface is None else iface,
                     r if new_r is None else new_r, write)
        return cstate, new_mstate, new_r, new_gr


def _carry(out, mstate, r, gr):
    """Merge a step's (controller state, memory state, r, r's projection), None meaning unchanged, into
    the carried values. A new r invalidates the kept projection."""
    cstate, new_mstate, new_r, new_gr = out
    if new_mstate is not None:
        mstate = new_mstate
    if new_r is not None:
        r, gr = new_r, None
    elif new_gr is not None:
        gr = new_gr
    return cstate, mstate, r, gr


class _Recorder:
    """Collects the per-step traces (only built when ``model.tracing`` is True)."""

    def __init__(self):
        self.steps: Dict[str, List[torch.Tensor]] = {}
        self.write_mask: List[bool] = []
        self.cache_attention: Dict[int, torch.Tensor] = {}

    def step(self, memory, mstate, iface, r, write: bool) -> None:
        self.write_mask.append(write)
        values = dict(memory.trace_step(mstate, iface))
        if not write and "write_weights" in values:  # nothing was written on this step
            values["write_weights"] = torch.zeros_like(values["write_weights"])
        gate = memory.write_gate(iface)
        if gate is not None:
            values["write_gate"] = gate
        values["read_vectors"] = r
        for key, value in values.items():
            self.steps.setdefault(key, []).append(value.detach())

    def finish(self, encoder_steps: int) -> Dict[str, Any]:
        trace: Dict[str, Any] = {key: torch.stack(values, dim=1) for key, values in self.steps.items()}
        trace["write_mask"] = torch.tensor(self.write_mask, dtype=torch.bool)  # (S,)
        trace["cache_attention"] = self.cache_attention
        trace["encoder_steps"] = encoder_steps
        return trace


def _restore_writer_mask(module: "MANN", incompatible_keys) -> None:
    module.writer.mask = module.writer_mask.tolist()


def build_writer(cfg: MANNConfig, task=None) -> Writer:
    """The writer named by ``cfg.writer``, with its settings ``cfg.writer_config``; ``task`` gives the
    longest encoder length (random writing)."""
    max_steps = task.max_encoder_steps() if task is not None else None
    return WRITERS.get(cfg.writer)(cfg, max_steps)


def build_mann(cfg: MANNConfig, memory: nn.Module, input_size: int, output_size: int, task=None) -> MANN:
    """Model factories call this with their memory, e.g. ``build_mann(cfg, DNCMemory(...), I, O, task)``."""
    return MANN(cfg, memory, build_writer(cfg, task), input_size, output_size)
