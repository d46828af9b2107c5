"""The generic memory-augmented seq2seq model: controller + external memory + writer.

One frame serves every memory (DNC: ``dnc_memory.py``, NTM: ``ntm.py``) and every writer
(``uwbench/writing``), following the contract in ``memory_base.py`` and reference §2.1-2.2, §3.2:

    controller   h_t, state = f([x_t ; r_{t-1}], state)            (paper Eq. 3-4)
    interface    xi_t = clip(h_t W_xi, +-interface_clip)           (reference §2.3)
    write step   state = write(state, xi_t); r_t, state = read(state, xi_t)
    held step    memory state and r_{t-1} carried unchanged        (UW / CUW / RW, reference §3.2 mode 2)
    output       y_t = clip(h_t W_y + r_t W_r, +-20)               (decoder only, reference D9)

The encoder's write steps come from the writer's batch-shared schedule, so a held step is a plain
Python branch that does no memory work at all (DESIGN.md §3): UW's speed-up depends on it. The
controller and the interface projection still run on held steps, as in the authors' code (so the write
gate can be traced). The decoder writes and reads every step (``decoder_write=False``: reads only).
A ``cached`` writer (CUW, paper Algorithm 1) replaces h_{t-1} by an attention over the controller
states cached since the last write before each encoder write step.

Speed (DESIGN.md §5): the encoder's and the decoder's input projections take one matmul each
(``controller.project`` on all steps); only the read vector's part is projected per step, and not again
while the read vector is held; W_y and W_r are applied once to all decoder steps.

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

from uwbench.models.base import OUTPUT_CLIP, Seq2SeqModel
from uwbench.models.controllers import build_controller
from uwbench.models.memory_base import MANNConfig, Writer
from uwbench.registry import WRITERS

INIT_STD = 0.1  # W_xi, W_y, W_r ~ N(0, 0.1^2), no biases (reference §2.2, D10)


class UnsupportedLengthsError(NotImplementedError, ValueError):
    """Variable encoder lengths inside a batch are not supported by the memory models yet."""


class MANN(Seq2SeqModel):
    """Controller + ``memory`` + ``writer`` (see the module docstring). ``input_size`` is the task's
    input width; the controller reads [x_t ; r_{t-1}] of width input_size + memory.read_size."""

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
        b, te = inputs.shape[0], inputs.shape[1]
        td = decoder_inputs.shape[1]
        device, dtype = inputs.device, inputs.dtype
        schedule = self.writer.schedule(te)
        if len(schedule) != te:
            raise ValueError(f"the writer's schedule must have one entry per encoder step ({te}), got {len(schedule)}")
        rec: Optional[_Recorder] = _Recorder() if self.tracing else None

        ctrl, mem = self.controller, self.memory
        cstate = ctrl.initial_state(b, device, dtype)
        mstate = mem.initial_state(b, device, dtype)
        r = mem.initial_read(b, device, dtype)  # (B, read_size)
        gr: Optional[torch.Tensor] = None  # r's projection into the controller, reused while r is held

        # All encoder steps in one matmul; unbind (not gx[:, t]) so the backward stacks the step gradients
        # once instead of filling a zero (B, Te, G) tensor per step.
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
            _, cstate, mstate, r, gr = self._step(gx_enc[t], cstate, mstate, r, gr, write, write, rec)

        gx_dec = ctrl.project(decoder_inputs, 0, self.input_size).unbind(1)  # Td x (B, G)
        hs, rs = [], []
        for t in range(td):
            h, cstate, mstate, r, gr = self._step(gx_dec[t], cstate, mstate, r, gr,
                                                  self.cfg.decoder_write, True, rec)
            hs.append(h)
            rs.append(r)
        if rec is not None:
            self.trace = rec.finish(te)
        out = torch.stack(hs, dim=1) @ self.w_y + torch.stack(rs, dim=1) @ self.w_r  # (B, Td, O)
        return torch.clamp(out, -OUTPUT_CLIP, OUTPUT_CLIP)

    def _step(self, gx, cstate, mstate, r, gr, write: bool, read: bool, rec):
        """One controller step, then (if scheduled) the memory write and read. gx (B, G) is the step's
        external-input projection. Returns h, controller state, memory state, r, r's projection."""
        if gr is None:
            gr = self.controller.project(r, self.input_size, self.input_size + self.read_size)  # (B, G)
        h, cstate = self.controller.step(gx + gr, cstate)  # (B, H)
        xi = torch.clamp(h @ self.w_xi, -self.cfg.interface_clip, self.cfg.interface_clip)  # (B, |xi|)
        iface = None
        if write or read:
            iface = self.memory.parse(xi)
            if write:
                mstate = self.memory.write(mstate, iface)
            r, mstate = self.memory.read(mstate, iface)  # (B, read_size)
            gr = None
        if rec is not None:
            rec.step(self.memory, mstate, self.memory.parse(xi) if iface is None else iface, r, write)
        return h, cstate, mstate, r, gr


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
    """The writer named by ``cfg.writer``; ``task`` gives the longest encoder length (random writing)."""
    max_steps = task.max_encoder_steps() if task is not None else None
    return WRITERS.get(cfg.writer)(cfg, max_steps)


def build_mann(cfg: MANNConfig, memory: nn.Module, input_size: int, output_size: int, task=None) -> MANN:
    """Model factories call this with their memory, e.g. ``build_mann(cfg, DNCMemory(...), I, O, task)``."""
    return MANN(cfg, memory, build_writer(cfg, task), input_size, output_size)
