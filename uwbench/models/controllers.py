"""Recurrent controllers: layer-norm LSTM (default), LSTM, GRU and tanh RNN.

All share one interface so the memory models can precompute the external-input projection for every
step in one matmul and add the read-vector part per step (docs/design.md §8.4):

    gx = controller.project(x, rows)    # x (..., I_part) @ weight_ih[rows] (+ bias once)  -> (..., G)
    with controller.sequence():         # optional: per-step constants made once per sequence
        h, state = controller.step(gx, state)

``state`` is a tuple whose first element is the output h (B, H). CUW replaces ``state[0]`` with the
attended state a_t (paper Algorithm 1); the LSTM cell c is kept (docs/reference.md §6.3).

Cell equations follow TensorFlow 1.x, which the authors' code used (docs/reference.md §3.2, §9.1):
- ``ln_lstm``: LayerNormBasicLSTMCell: z = [x; h] K (no bias), per-gate layer norm on i, j, f, o,
  c = c * sigmoid(f + 1) + sigmoid(i) * tanh(j), c <- LN(c) (stored normalised), h = tanh(c) * sigmoid(o).
  4H(I+H) + 10H parameters.
- ``lstm``: LSTMCell with bias and forget bias 1: 4H(I+H+1).
- ``gru``: GRUCell (reset applied to h before the candidate matmul): 3H(I+H+1).
- ``rnn``: BasicRNNCell h = tanh([x; h] W + b): H(I+H+1).
"""
from __future__ import annotations

import contextlib
import math
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from uwbench.native.parts import CellKernel
from uwbench.registry import CONTROLLERS
from uwbench.errors import UserError

State = Tuple[torch.Tensor, ...]

# TF's layer-norm variance epsilon (docs/reference.md §3.2). Note: layer norm of a constant vector has a
# gradient gain of 1/sqrt(eps) per step, so long runs of all-zero input from the zero state (the
# leading black pixels of an MNIST image) overflow to NaN with this cell, in TF as here; the paper
# uses a GRU controller for the pixel tasks, and uwbench's pixel studies do too.
LN_EPS = 1e-12
FORGET_BIAS = 1.0


def glorot_uniform_(weight: torch.Tensor, fan_in: int, fan_out: int) -> torch.Tensor:
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    with torch.no_grad():
        return weight.uniform_(-bound, bound)


class Controller(nn.Module):
    """Base: owns ``weight_ih`` (I, G), ``weight_hh`` (H, G) and an optional ``bias`` (G)."""

    gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool):
        super().__init__()
        if input_size < 1 or hidden_size < 1:
            raise UserError(f"`input_size >= 1 and hidden_size >= 1` must hold, got {input_size}, {hidden_size}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        g = self.gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(input_size, g))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, g))
        self.bias = nn.Parameter(torch.zeros(g)) if bias else None
        # TF initialises the concatenated kernel [(I+H), G] with one glorot-uniform draw.
        glorot_uniform_(self.weight_ih, input_size + hidden_size, g)
        glorot_uniform_(self.weight_hh, input_size + hidden_size, g)

    def project(self, x: torch.Tensor, start: int = 0, stop: Optional[int] = None) -> torch.Tensor:
        """x (..., stop-start) @ weight_ih[start:stop] -> (..., G); the bias is added with row 0."""
        out = x @ self.weight_ih[start:stop]
        if self.bias is not None and start == 0:
            out = out + self.bias
        return out

    def initial_state(self, batch: int, device, dtype=torch.float32) -> State:
        return (torch.zeros(batch, self.hidden_size, device=device, dtype=dtype),)

    def tf_variables(self) -> List[List[Tuple[nn.Parameter, slice]]]:
        """The cell's parameters as the authors' TensorFlow code holds them, one list per TF variable of
        (parameter, column slice) parts: TF keeps one kernel [(I+H), G] where torch has ``weight_ih`` and
        ``weight_hh``, so a per-variable clip (``train.clip_mode: per_variable``, docs/reference.md §8.2)
        clips the two matrices under one norm. Parameters named nowhere here are their own variable."""
        every = slice(None)
        return [[(self.weight_ih, every), (self.weight_hh, every)]]

    def step_constants(self) -> Dict[str, torch.Tensor]:
        """Tensors every step uses, made from the parameters (default: none). Inside ``sequence()`` they
        are made once for all steps instead of once per step."""
        return {}

    @contextlib.contextmanager
    def sequence(self):
        """``with controller.sequence(): ...`` around a sequence's steps: ``step`` then reuses one set of
        ``step_constants`` (fewer kernels per step, and fewer inputs and gradients per compiled step)."""
        self._constants = self.step_constants()
        try:
            yield self
        finally:
            self._constants = None

    def constants(self) -> Dict[str, torch.Tensor]:
        """The current sequence's ``step_constants``, or fresh ones outside ``sequence()``."""
        consts = getattr(self, "_constants", None)
        return self.step_constants() if consts is None else consts

    def step(self, gx: torch.Tensor, state: State) -> Tuple[torch.Tensor, State]:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, state: State) -> Tuple[torch.Tensor, State]:
        """One step on raw input x (B, I)."""
        return self.step(self.project(x), state)


class LayerNorm(nn.Module):
    """Per-unit gain/shift layer norm over the last axis with TF's epsilon (docs/reference.md §3.2)."""

    def __init__(self, size: int):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(size))
        self.shift = nn.Parameter(torch.zeros(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.gain, self.shift, LN_EPS)


@CONTROLLERS.register("ln_lstm", help="layer-norm LSTM (TF LayerNormBasicLSTMCell), the paper's default")
class LNLSTM(Controller):
    gates = 4

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size, bias=False)
        self.ln_gates = nn.ModuleList(LayerNorm(hidden_size) for _ in range(4))  # i, j, f, o
        self.ln_cell = LayerNorm(hidden_size)
        offset = torch.zeros(4, 1)
        offset[2] = FORGET_BIAS  # sigmoid(f + 1): added after the layer norm (docs/reference.md §3.2)
        self.register_buffer("_forget_offset", offset, persistent=False)  # (4, 1)

    def initial_state(self, batch, device, dtype=torch.float32) -> State:
        z = torch.zeros(batch, self.hidden_size, device=device, dtype=dtype)
        return (z, z)

    def step_constants(self) -> Dict[str, torch.Tensor]:
        """The four gates' layer-norm gains and shifts stacked, the forget bias folded into f's shift."""
        gain = torch.stack([ln.gain for ln in self.ln_gates])  # (4, H)
        shift = torch.stack([ln.shift for ln in self.ln_gates]) + self._forget_offset  # (4, H)
        return {"gate_gain": gain, "gate_shift": shift}

    def step(self, gx, state):
        h, c = state  # (B, H), (B, H)
        b, hs = h.shape
        consts = self.constants()
        gate_gain, gate_shift = consts["gate_gain"], consts["gate_shift"]  # (4, H) each
        z = torch.addmm(gx, h, self.weight_hh).view(b, 4, hs)  # (B, 4, H): gates i, j, f, o
        # The four per-gate layer norms as one normalisation over the last axis, then each gate's own
        # gain and shift: 2 kernels instead of 4 affine norms.
        z = torch.addcmul(gate_shift, F.layer_norm(z, (hs,), eps=LN_EPS), gate_gain)  # (B, 4, H)
        i, _, f, o = torch.sigmoid(z).unbind(1)  # 3 x (B, H) (the j slot's sigmoid is unused)
        c = torch.addcmul(c * f, i, torch.tanh(z[:, 1]))  # (B, H): c f + i tanh(j)
        c = self.ln_cell(c)  # the normalised cell is the stored state
        h = torch.tanh(c) * o
        return h, (h, c)

    def native_kernel(self) -> CellKernel:
        """The same cell in C++ (``native/cells.cpp``, ``ln_lstm``), its own parameters flat (10 H): the gates'
        gains and shifts (the forget bias folded into f's shift), then the cell norm's gain and shift."""
        return CellKernel("ln_lstm", (self.hidden_size,), self.weight_hh.shape[1], True, self._native_params)

    def _native_params(self) -> torch.Tensor:
        consts = self.constants()  # gate gains and shifts (4, H)
        return torch.cat([consts["gate_gain"].reshape(-1), consts["gate_shift"].reshape(-1),
                          self.ln_cell.gain, self.ln_cell.shift])  # (10 H,)


@CONTROLLERS.register("lstm", help="LSTM with bias and forget bias 1 (TF LSTMCell)")
class LSTM(Controller):
    gates = 4

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size, bias=True)

    def initial_state(self, batch, device, dtype=torch.float32) -> State:
        z = torch.zeros(batch, self.hidden_size, device=device, dtype=dtype)
        return (z, z)

    def step(self, gx, state):
        h, c = state
        i, j, f, o = torch.addmm(gx, h, self.weight_hh).chunk(4, dim=-1)  # 4 x (B, H)
        c = c * torch.sigmoid(f + FORGET_BIAS) + torch.sigmoid(i) * torch.tanh(j)
        h = torch.tanh(c) * torch.sigmoid(o)
        return h, (h, c)

    def native_kernel(self) -> CellKernel:
        """The same cell in C++ (``native/cells.cpp``, ``lstm``); the bias is in the input projection."""
        return CellKernel("lstm", (self.hidden_size,), self.weight_hh.shape[1], True, _no_params)


@CONTROLLERS.register("gru", help="GRU (TF GRUCell: reset gate applied to h before the candidate matmul)")
class GRU(Controller):
    gates = 3

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size, bias=True)
        with torch.no_grad():  # TF initialises the gate bias to 1 (gates start open), the candidate's to 0
            self.bias[: 2 * hidden_size].fill_(1.0)

    def tf_variables(self):
        """TF's GRUCell has two kernels, gates/ (r, u: the first 2H columns) and candidate/ (the last H),
        each with its own bias."""
        g, c = slice(0, 2 * self.hidden_size), slice(2 * self.hidden_size, None)
        return [[(self.weight_ih, g), (self.weight_hh, g)], [(self.weight_ih, c), (self.weight_hh, c)],
                [(self.bias, g)], [(self.bias, c)]]

    def step(self, gx, state):
        (h,) = state
        hs = self.hidden_size
        gates = torch.sigmoid(gx[:, : 2 * hs] + h @ self.weight_hh[:, : 2 * hs])  # (B, 2H)
        r, u = gates.chunk(2, dim=-1)
        cand = torch.tanh(gx[:, 2 * hs :] + (r * h) @ self.weight_hh[:, 2 * hs :])  # (B, H)
        h = u * h + (1 - u) * cand
        return h, (h,)


@CONTROLLERS.register("rnn", help="tanh RNN (TF BasicRNNCell)")
class RNN(Controller):
    gates = 1

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size, bias=True)

    def step(self, gx, state):
        (h,) = state
        h = torch.tanh(torch.addmm(gx, h, self.weight_hh))  # (B, H)
        return h, (h,)

    def native_kernel(self) -> CellKernel:
        """The same cell in C++ (``native/cells.cpp``, ``rnn``); the bias is in the input projection."""
        return CellKernel("rnn", (self.hidden_size,), self.weight_hh.shape[1], False, _no_params)


def _no_params() -> None:
    """A cell kernel without parameters of its own."""
    return None


def compile_step(method, **options):
    """``torch.compile`` a bound step method for this instance alone (the models' ``compile_steps``).

    Dynamo keeps its compiled graphs per code object, and every instance of a class shares its methods'
    code, so a process with several models (a benchmark, an in-process sweep) would pile all their
    graphs on one code object and hit the recompile limit. A copy of the code object per instance keeps
    each model's graphs (one per kind of step) to itself. Defaults: ``fullgraph=True, dynamic=False`` and
    no size/alignment asserts in the generated code (Dynamo's guards already fix every input's shape;
    the asserts cost about 2% of a DNC step at the paper's sizes). On CUDA the default mode is
    ``reduce-overhead``: each kind of step is captured as a CUDA graph and replayed, which removes the
    per-kernel launch cost that dominates these small steps on a GPU."""
    import types

    fn = method.__func__
    own = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    own.__kwdefaults__ = fn.__kwdefaults__
    inductor = {"size_asserts": False, "alignment_asserts": False, "scalar_asserts": False,
                **(options.pop("options", None) or {})}
    options = {"fullgraph": True, "dynamic": False, "options": inductor, **options}
    if "mode" not in options and _on_cuda(method.__self__):
        options["mode"] = "reduce-overhead"
        options.pop("options")  # torch.compile takes a mode or Inductor options, not both
    return torch.compile(types.MethodType(own, method.__self__), **options)


def _on_cuda(module) -> bool:
    """Whether ``module`` (a model or a controller) holds its parameters on a CUDA device."""
    param = next(iter(module.parameters()), None) if isinstance(module, nn.Module) else None
    return param is not None and param.device.type == "cuda"


def build_controller(name: str, input_size: int, hidden_size: int) -> Controller:
    return CONTROLLERS.get(name)(input_size, hidden_size)
