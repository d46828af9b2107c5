"""Contribution analyser: measure how much each input x_i still contributes to the final state h_T.

The paper (§2.1.1) measures the contribution of input i to state t as c_{i,t} = ||dh_t / dx_i|| and
shows c_{i-1,t} <= lambda_c c_{i,t} for common RNNs (appendix A-C), so c_{i,T} decays (lambda < 1) or
grows (lambda > 1) roughly like lambda^{T-i}; Theorems 1-3 (``uwbench.theory``) are built on that
lambda. This module measures c_{i,T} by autograd for any model and fits lambda, instead of assuming it.

What is analysed is a *probe*: any callable mapping an input sequence (B, T, I) to a final vector
(B, H). Built in:
- ``linear-rnn``: h_t = W x_t + U h_{t-1} (appendix A), where c_{i,T} = ||U^{T-i} W|| exactly;
- ``controller``: a controller from ``uwbench.registry.CONTROLLERS`` (LN-LSTM, LSTM, GRU, RNN) alone;
- any model in ``uwbench.registry.MODELS`` (the LSTM baseline, DNC, NTM, ...): ``target="output"``
  probes the memory-augmented output y at the first decoder step (it reads h_T and the memory),
  ``target="state"`` calls the model's ``encode(inputs) -> (B, H)`` where the model provides one.

Norm: the Frobenius norm of the (H, I) Jacobian by default (``norm="fro"``; any consistent norm fits
the appendix argument, and Frobenius is cheap and smooth); ``norm="spectral"`` gives the largest
singular value. Samples are assumed independent (no batch statistics across samples): the Jacobian of
every sample comes from one backward pass per output unit over the summed batch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional

import numpy as np
import torch
import torch.nn as nn

from uwbench.theory import f_lambda

Probe = Callable[[torch.Tensor], torch.Tensor]  # (B, T, I) -> (B, H)

NORMS: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "fro": lambda jac: jac.flatten(-2).norm(dim=-1),  # (..., H, I) -> (...)
    "spectral": lambda jac: torch.linalg.matrix_norm(jac, ord=2),  # largest singular value
}


def contributions(fn: Probe, inputs: torch.Tensor, *, norm: str = "fro", reduce: str = "mean") -> np.ndarray:
    """c_{i,T} = ||dh_T / dx_i|| for i = 1..T, by autograd (paper §2.1.1).

    ``fn`` maps inputs (B, T, I) to a final state (B, H); ``inputs`` is one batch. Returns c as float64
    numpy, index ``k`` holding i = k + 1 (so the distance T - i is ``T - 1 - k``): shape (T,) averaged
    over the batch (``reduce="mean"``) or (B, T) per sample (``reduce="none"``). Costs one forward and H
    backward passes.
    """
    if norm not in NORMS:
        raise ValueError(f"`norm in {tuple(NORMS)}` must hold, got {norm!r}")
    if reduce not in ("mean", "none"):
        raise ValueError(f"`reduce in ('mean', 'none')` must hold, got {reduce!r}")
    if inputs.dim() != 3 or inputs.shape[1] < 1:
        raise ValueError(f"inputs must be (B, T, I) with T >= 1, got shape {tuple(inputs.shape)}")
    with torch.enable_grad():
        x = inputs.detach().clone().requires_grad_(True)  # (B, T, I)
        h = fn(x)  # (B, H)
        if h.dim() != 2 or h.shape[0] != x.shape[0]:
            raise ValueError(f"the probe must return (B, H) with B = {x.shape[0]}, got shape {tuple(h.shape)}")
        b, t, i = x.shape
        jac = x.new_zeros(b, t, h.shape[1], i)  # (B, T, H, I): dh_T[k] / dx_i for every sample
        for k in range(h.shape[1]):
            (grad,) = torch.autograd.grad(h[:, k].sum(), x, retain_graph=True, allow_unused=True)
            if grad is not None:
                jac[:, :, k, :] = grad  # (B, T, I)
    c = NORMS[norm](jac.detach()).double()  # (B, T)
    out = c.mean(dim=0) if reduce == "mean" else c
    return out.cpu().numpy()


FLAT_LOG_SPREAD = 1e-6  # log c varying less than this (rms) counts as constant in fit_lambda's R^2


@dataclass(frozen=True)
class LambdaFit:
    """log c_{i,T} ~ log scale + (T - i) log lam, fitted by least squares over the distances
    ``min_distance..max_distance`` (``points`` of them had c > 0). ``r2`` is the fit's R^2 in log space
    (1 when log c is constant to within FLAT_LOG_SPREAD)."""

    lam: float
    scale: float  # the fitted c_{T,T}
    r2: float
    points: int
    min_distance: int
    max_distance: int

    def predict(self, distance) -> np.ndarray:
        return self.scale * np.power(self.lam, np.asarray(distance, dtype=float))


def fit_lambda(c, *, min_distance: int = 0, max_distance: Optional[int] = None) -> LambdaFit:
    """Fit lambda in c_{i,T} ~ c_{T,T} lambda^{T-i} (paper §2.1.1, Theorem 1) by a log-linear least
    squares fit of log c against the distance T - i.

    ``c`` is ordered by i = 1..T as ``contributions`` returns it. Zero or non-finite entries are left
    out (their log is undefined). ``min_distance`` skips the most recent steps, ``max_distance`` the
    oldest (e.g. to fit the asymptotic rate, which for h_t = W x_t + U h_{t-1} is U's spectral radius).
    """
    c = np.asarray(c, dtype=float)
    if c.ndim != 1:
        raise ValueError(f"c must be one-dimensional (ordered by i = 1..T), got shape {c.shape}")
    distance = np.arange(c.size)[::-1]  # (T,) T - i for i = 1..T
    hi = c.size - 1 if max_distance is None else max_distance
    use = (distance >= min_distance) & (distance <= hi) & np.isfinite(c) & (c > 0)
    if use.sum() < 2:
        raise ValueError(
            f"`at least 2 positive contributions in distances {min_distance}..{hi}` must hold, got {int(use.sum())}"
        )
    k, y = distance[use].astype(float), np.log(c[use])
    slope, intercept = np.polyfit(k, y, 1)
    resid = y - (intercept + slope * k)
    spread = float(np.sum((y - y.mean()) ** 2))
    # Flat c (lambda = 1) varies only by rounding (float32: ~1e-7): R^2 of noise means nothing, call it 1.
    flat = spread <= FLAT_LOG_SPREAD**2 * y.size
    r2 = 1.0 if flat else 1.0 - float(np.sum(resid**2)) / spread
    return LambdaFit(math.exp(slope), math.exp(intercept), r2, int(use.sum()), int(min_distance), int(hi))


def equivalent_lambda(c) -> float:
    """The lambda of Theorem 1: the one with sum_t c_{t,T} = c_{T,T} f_lambda(T), i.e. a geometric decay
    that carries the same total contribution as the measured one (appendix, proof of Theorem 1).

    Needs T >= 2 and sum(c) > c_{T,T} > 0 (a positive solution exists then, f_lambda(T) increasing in
    lambda); found by bisection on log lambda.
    """
    c = np.asarray(c, dtype=float)
    if c.ndim != 1 or c.size < 2 or not np.all(np.isfinite(c)) or not c[-1] > 0:
        raise ValueError(f"`c is 1-D, T >= 2, finite, c_TT > 0` must hold, got {c!r}")
    ratio = float(c.sum() / c[-1])  # f_lambda(T) must equal this
    if not ratio > 1.0:
        raise ValueError(f"`sum(c) > c_TT` must hold for a positive lambda, got ratio {ratio}")
    n = c.size
    lo, hi = -1.0, 1.0  # log lambda
    while f_lambda(n, math.exp(lo)) > ratio:
        lo *= 2.0
    while f_lambda(n, math.exp(hi)) < ratio:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f_lambda(n, math.exp(mid)) < ratio:
            lo = mid
        else:
            hi = mid
    return math.exp(0.5 * (lo + hi))


# --------------------------------------------------------------------------------------------------
# Probes
# --------------------------------------------------------------------------------------------------


def random_orthogonal(size: int, generator: torch.Generator) -> torch.Tensor:
    """A Haar-random orthogonal matrix (QR of a Gaussian with the signs of R's diagonal fixed)."""
    q, r = torch.linalg.qr(torch.randn(size, size, generator=generator, dtype=torch.float64))
    return (q * torch.sign(torch.diagonal(r))).float()  # (H, H)


class LinearRNN(nn.Module):
    """h_t = W x_t + U h_{t-1}, h_0 = 0 (appendix A; the bias b does not change dh/dx, so none).

    dh_T / dx_i = U^{T-i} W exactly, so c_{i,T} = ||U^{T-i} W||. The default U is ``radius`` times a
    random orthogonal matrix: its spectral radius and norm are both ``radius`` and the Frobenius
    contribution is exactly ||W||_F radius^{T-i}.
    """

    def __init__(self, input_size: int, hidden_size: int, radius: float = 0.9, seed: int = 0):
        super().__init__()
        if input_size < 1 or hidden_size < 1:
            raise ValueError(f"`input_size >= 1 and hidden_size >= 1` must hold, got {input_size}, {hidden_size}")
        if not radius > 0:
            raise ValueError(f"`radius > 0` must hold, got {radius}")
        g = torch.Generator().manual_seed(seed)
        self.W = nn.Parameter(torch.randn(hidden_size, input_size, generator=g) / math.sqrt(input_size))  # (H, I)
        self.U = nn.Parameter(radius * random_orthogonal(hidden_size, g))  # (H, H)

    @classmethod
    def from_matrices(cls, W: torch.Tensor, U: torch.Tensor) -> "LinearRNN":
        """The linear RNN with the given W (H, I) and U (H, H)."""
        if W.dim() != 2 or U.shape != (W.shape[0], W.shape[0]):
            raise ValueError(f"`W (H, I) and U (H, H)` must hold, got {tuple(W.shape)} and {tuple(U.shape)}")
        model = cls(W.shape[1], W.shape[0])
        with torch.no_grad():
            model.W.copy_(W)
            model.U.copy_(U)
        return model

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        h = inputs.new_zeros(inputs.shape[0], self.W.shape[0])  # (B, H)
        wx = inputs @ self.W.T  # (B, T, H): the input term of every step in one matmul
        for t in range(inputs.shape[1]):
            h = wx[:, t] + h @ self.U.T  # (B, H)
        return h


class ControllerProbe(nn.Module):
    """A controller (``uwbench.models.controllers``) run alone over the inputs; returns h_T (B, H)."""

    def __init__(self, controller: nn.Module):
        super().__init__()
        self.controller = controller

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        state = self.controller.initial_state(inputs.shape[0], inputs.device, inputs.dtype)
        gx = self.controller.project(inputs)  # (B, T, G)
        h = state[0]
        for t in range(inputs.shape[1]):
            h, state = self.controller.step(gx[:, t], state)  # (B, H)
        return h


class ModelProbe(nn.Module):
    """A seq2seq model (``uwbench.models``) as a probe.

    ``target="output"``: the output y (B, O) of the first decoder step on an all-zero decoder input,
    which depends on the final encoder state and on what the memory holds (the memory-augmented output).
    ``target="state"``: ``model.encode(inputs)`` (B, H), the controller's final encoder state, for models
    that provide that method.
    """

    TARGETS = ("output", "state")

    def __init__(self, model: nn.Module, target: str = "output"):
        super().__init__()
        if target not in self.TARGETS:
            raise ValueError(f"`target in {self.TARGETS}` must hold, got {target!r}")
        if target == "state" and not callable(getattr(model, "encode", None)):
            raise ValueError(
                f"target 'state' needs the model to define `encode(inputs) -> (B, H)`; "
                f"{type(model).__name__} does not (use target 'output')"
            )
        self.model = model
        self.target = target

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if self.target == "state":
            return self.model.encode(inputs)
        decoder_inputs = inputs.new_zeros(inputs.shape[0], 1, inputs.shape[2])  # (B, 1, I)
        return self.model(inputs, decoder_inputs)[:, 0]  # (B, O)


@dataclass(frozen=True)
class ProbeOptions:
    """How to build a probe (``build_probe``); None means the probe's own default."""

    hidden_size: Optional[int] = None  # linear-rnn: 32, controller: 100, a model: its config's
    seed: int = 0  # the initial weights' seed
    radius: float = 0.9  # linear-rnn: the spectral radius of U
    controller: Optional[str] = None  # controller: its name (default ln_lstm); a model: its config field
    target: str = "output"  # a model: "output" or "state" (ModelProbe)
    values: Mapping[str, Any] = field(default_factory=dict)  # a model: more config values


def _linear_rnn_probe(input_size: int, output_size: int, opts: ProbeOptions, task=None) -> nn.Module:
    return LinearRNN(input_size, opts.hidden_size or 32, radius=opts.radius, seed=opts.seed)


def _controller_probe(input_size: int, output_size: int, opts: ProbeOptions, task=None) -> nn.Module:
    from uwbench.registry import CONTROLLERS

    factory = CONTROLLERS.get(opts.controller or "ln_lstm")
    with torch.random.fork_rng(devices=[]):  # seeded weights without touching the caller's RNG
        torch.manual_seed(opts.seed)
        return ControllerProbe(factory(input_size, opts.hidden_size or 100))


def _model_probe(name: str, input_size: int, output_size: int, opts: ProbeOptions, task=None) -> nn.Module:
    from uwbench.models.base import build_model

    values = dict(opts.values)
    if opts.hidden_size is not None:
        values["hidden_size"] = opts.hidden_size
    if opts.controller is not None:
        values["controller"] = opts.controller
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(opts.seed)
        return ModelProbe(build_model(name, input_size, output_size, values, task=task), opts.target)


# Probes defined here; every other name is looked up in uwbench.registry.MODELS.
PROBES = {"linear-rnn": _linear_rnn_probe, "controller": _controller_probe}


def build_probe(name: str, input_size: int, output_size: int, opts: Optional[ProbeOptions] = None,
                task=None) -> nn.Module:
    """Build the probe ``name``: ``linear-rnn``, ``controller`` (a controller from CONTROLLERS alone), or
    a model registered in ``uwbench.registry.MODELS`` built from ``opts.values`` (plus ``hidden_size`` /
    ``controller`` when given) and wrapped by ``ModelProbe(opts.target)``. An unknown name raises the
    registry's error, which lists the known models. Weights are drawn under ``opts.seed``; load trained
    ones with ``load_checkpoint``.
    """
    opts = opts or ProbeOptions()
    if name in PROBES:
        return PROBES[name](input_size, output_size, opts, task)
    return _model_probe(name, input_size, output_size, opts, task)


CHECKPOINT_KEYS = ("model", "state_dict", "model_state_dict")


def load_checkpoint(probe: nn.Module, path: str) -> nn.Module:
    """Load trained weights into ``probe``: a state dict saved by torch.save, either the module's own or
    one under a key in CHECKPOINT_KEYS. For a ModelProbe the state dict is the wrapped model's."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict):
        for key in CHECKPOINT_KEYS:
            if isinstance(state.get(key), dict):
                state = state[key]
                break
    target = probe.model if isinstance(probe, ModelProbe) else probe
    target.load_state_dict(state)
    return probe
