"""Recurrent controllers: layer-norm LSTM (default), LSTM, GRU and tanh RNN.

All share one interface so the memory models can precompute the external-input projection for every
step in one matmul and add the read-vector part per step (DESIGN.md §5):

    gx = controller.project(x, rows)    # x (..., I_part) @ weight_ih[rows] (+ bias once)  -> (..., G)
    h, state = controller.step(gx, state)

``state`` is a tuple whose first element is the output h (B, H). CUW replaces ``state[0]`` with the
attended state a_t (paper Algorithm 1); the LSTM cell c is kept (reference §3.3).

Cell equations follow TensorFlow 1.x, which the authors' code used (reference §2.2, §5.1):
- ``ln_lstm``: LayerNormBasicLSTMCell: z = [x; h] K (no bias), per-gate layer norm on i, j, f, o,
  c = c * sigmoid(f + 1) + sigmoid(i) * tanh(j), c <- LN(c) (stored normalised), h = tanh(c) * sigmoid(o).
  4H(I+H) + 10H parameters.
- ``lstm``: LSTMCell with bias and forget bias 1: 4H(I+H+1).
- ``gru``: GRUCell (reset applied to h before the candidate matmul): 3H(I+H+1).
- ``rnn``: BasicRNNCell h = tanh([x; h] W + b): H(I+H+1).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from uwbench.registry import CONTROLLERS

State = Tuple[torch.Tensor, ...]

# TF's layer-norm variance epsilon (reference §2.2). Note: layer norm of a constant vector has a
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
            raise ValueError(f"`input_size >= 1 and hidden_size >= 1` must hold, got {input_size}, {hidden_size}")
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

    def step(self, gx: torch.Tensor, state: State) -> Tuple[torch.Tensor, State]:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, state: State) -> Tuple[torch.Tensor, State]:
        """One step on raw input x (B, I)."""
        return self.step(self.project(x), state)


class LayerNorm(nn.Module):
    """Per-unit gain/shift layer norm over the last axis with TF's epsilon (reference §2.2)."""

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

    def initial_state(self, batch, device, dtype=torch.float32) -> State:
        z = torch.zeros(batch, self.hidden_size, device=device, dtype=dtype)
        return (z, z)

    def step(self, gx, state):
        h, c = state  # (B, H), (B, H)
        z = gx + h @ self.weight_hh  # (B, 4H)
        i, j, f, o = (ln(part) for ln, part in zip(self.ln_gates, z.chunk(4, dim=-1)))
        c = c * torch.sigmoid(f + FORGET_BIAS) + torch.sigmoid(i) * torch.tanh(j)  # (B, H)
        c = self.ln_cell(c)  # the normalised cell is the stored state
        h = torch.tanh(c) * torch.sigmoid(o)
        return h, (h, c)


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
        i, j, f, o = (gx + h @ self.weight_hh).chunk(4, dim=-1)  # 4 x (B, H)
        c = c * torch.sigmoid(f + FORGET_BIAS) + torch.sigmoid(i) * torch.tanh(j)
        h = torch.tanh(c) * torch.sigmoid(o)
        return h, (h, c)


@CONTROLLERS.register("gru", help="GRU (TF GRUCell: reset gate applied to h before the candidate matmul)")
class GRU(Controller):
    gates = 3

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size, bias=True)
        with torch.no_grad():  # TF initialises the gate bias to 1 (gates start open), the candidate's to 0
            self.bias[: 2 * hidden_size].fill_(1.0)

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
        h = torch.tanh(gx + h @ self.weight_hh)  # (B, H)
        return h, (h,)


def build_controller(name: str, input_size: int, hidden_size: int) -> Controller:
    return CONTROLLERS.get(name)(input_size, hidden_size)
