"""The recurrent baseline ("LSTM" in the paper's tables): a controller alone in the seq2seq frame.

Encoder then decoder with one controller; output y_t = clip(h_t W_y, +-20) with no bias
(docs/reference.md §3.4). The paper's LSTM row is the layer-norm LSTM with H=125 (docs/reference.md §9.2).

``use_native()`` runs the whole sequence as one autograd node on the cell kernels
(``native_cell.py``), like the memory models; batches with per-sequence lengths keep the torch steps
(they freeze each sample's state after its last step).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import torch
import torch.nn as nn

from uwbench.models.base import OUTPUT_CLIP, Seq2SeqModel
from uwbench.models.controllers import build_controller, compile_step
from uwbench.models.native import enable
from uwbench.models.native_cell import run_cells
from uwbench.registry import CONTROLLERS, MODELS


@dataclass
class LSTMBaselineConfig:
    hidden_size: int = 125
    controller: str = "ln_lstm"

    def __post_init__(self):
        if self.hidden_size < 1:
            raise ValueError(f"`hidden_size >= 1` must hold, got {self.hidden_size}")
        CONTROLLERS.entry(self.controller)  # an unknown name: the error lists the known ones


def run_controller(controller, gx: torch.Tensor, state, lengths=None, start: int = 0, step=None):
    """Run ``controller`` over precomputed input projections gx (B, T, G); return outputs (B, T, H)
    and the final state. With ``lengths`` (B,), a sample's state stops changing after its last step.
    ``step`` replaces ``controller.step`` (e.g. its compiled version)."""
    step = controller.step if step is None else step
    outs = []
    # unbind once: indexing gx[:, t] per step makes the backward fill a (B, T, G) zero tensor every step
    for t, gx_t in enumerate(gx.unbind(1)):
        h, new_state = step(gx_t, state)
        if lengths is not None:
            live = (lengths > start + t).unsqueeze(-1)  # (B, 1)
            new_state = tuple(torch.where(live, n, o) for n, o in zip(new_state, state))
            h = new_state[0]
        state = new_state
        outs.append(h)
    return torch.stack(outs, dim=1), state


class LSTMBaseline(Seq2SeqModel):
    # Its compiled step gains too little and too unsteadily to count on (8% faster with the machine
    # to itself, 5% slower under load; benchmarks/README.md), so train.compile=auto leaves it eager;
    # compile=true still compiles it.
    compiled_step_saving = 0.0
    capturable = True

    def __init__(self, cfg: LSTMBaselineConfig, input_size: int, output_size: int):
        super().__init__()
        self.cfg = cfg
        self.controller = build_controller(cfg.controller, input_size, cfg.hidden_size)
        self.w_y = nn.Parameter(torch.randn(cfg.hidden_size, output_size) * 0.1)  # N(0, 0.1^2), no bias
        self._compiled_step = None  # set by compile_steps()
        self.native = False  # set by use_native(): the whole sequence as one native autograd node

    def native_parts(self) -> Dict[str, nn.Module]:
        """The parts the native path needs a kernel for: the controller alone."""
        return {"controller": self.controller}

    def use_native(self, on: bool = True) -> "LSTMBaseline":
        """Run forwards (without per-sequence lengths) through the native whole-sequence path
        (``native_cell.py``); raises ``ValueError`` naming a controller without a kernel (a GRU) or
        ``NativeUnavailable``, as ``MANN.use_native``. Returns the model."""
        enable(self, on)
        return self

    def compile_steps(self, **options) -> "LSTMBaseline":
        """Run the controller's step under ``torch.compile`` while autograd records (training); see
        ``MANN.compile_steps``. Returns the model."""
        self._compiled_step = compile_step(self.controller.step, **options)
        return self

    def encode(self, inputs: torch.Tensor, lengths=None) -> torch.Tensor:
        """inputs (B, Te, I) -> the final encoder state h_Te (B, H) that starts the decoder (the
        contribution analyser's ``--target state``, paper §2.1.1)."""
        ctrl = self.controller
        state = ctrl.initial_state(inputs.shape[0], inputs.device, inputs.dtype)
        with ctrl.sequence():
            _, state = run_controller(ctrl, ctrl.project(inputs), state, lengths)
        return state[0]

    def forward(self, inputs, decoder_inputs, lengths=None):
        """inputs (B, Te, I), decoder_inputs (B, Td, I) -> outputs (B, Td, O)."""
        if self.native and lengths is None:
            return self._forward_native(inputs, decoder_inputs)
        b = inputs.shape[0]
        step = self._compiled_step if self._compiled_step is not None and torch.is_grad_enabled() else None
        ctrl = self.controller
        state = ctrl.initial_state(b, inputs.device, inputs.dtype)
        with ctrl.sequence():  # the controller's per-sequence constants, made once
            _, state = run_controller(ctrl, ctrl.project(inputs), state, lengths, step=step)
            hs, _ = run_controller(ctrl, ctrl.project(decoder_inputs), state, step=step)  # (B, Td, H)
        return torch.clamp(hs @ self.w_y, -OUTPUT_CLIP, OUTPUT_CLIP)  # (B, Td, O)

    def _forward_native(self, inputs, decoder_inputs) -> torch.Tensor:
        ctrl = self.controller
        with ctrl.sequence():
            gx_enc = ctrl.project(inputs.transpose(0, 1))  # (Te, B, G), step-major
            gx_dec = ctrl.project(decoder_inputs.transpose(0, 1))  # (Td, B, G)
            hs = run_cells(self, gx_enc, gx_dec)  # (Td, B, H)
        return torch.clamp(hs.transpose(0, 1) @ self.w_y, -OUTPUT_CLIP, OUTPUT_CLIP)  # (B, Td, O)


@MODELS.register("lstm", config=LSTMBaselineConfig, help="recurrent baseline: a controller without memory")
def build_lstm(cfg: LSTMBaselineConfig, input_size: int, output_size: int, task=None) -> LSTMBaseline:
    return LSTMBaseline(cfg, input_size, output_size)
