"""Sinusoid continuation (paper §3.4, appendix "Visualizations ... sinusoidal regression").

Each sequence samples y = 5 + A sin(2 pi f x + phi) with A ~ U(1, 5), f ~ U(10, 30), phi ~ U(0, 100)
at x_t = (t + eps_1)/1000, eps_1 ~ U(-1, 1), t = 1 .. T + T_out. The encoder reads y_1..y_T (one real
value per step, no end marker); the decoder then predicts y_{T+1}..y_{T+T_out}. The noisy variant
adds eps_2 ~ U(-2, 2) to every *input* value; targets stay clean. Loss and metric: MSE over the
decoding steps (``RegressionTask``). T = T_out = 100.

Choices the paper leaves open (docs/reference.md §11), made here:
- The decoder inputs are all zero (B, T_out, 1), as for the synthetic tasks (docs/reference.md §2.1): the model
  generates from memory and its own state, never from the true previous value.
- eps_1 is drawn for every step (``jitter: step``): one eps_1 per sequence would only shift the phase,
  which phi ~ U(0, 100) already does, so it could not "ensure the sequence varies". ``jitter:
  sequence`` gives the other reading.
- Values are not normalised (inputs around 5 +- 5, +- 2 noise): the paper's MSE numbers are on this
  scale.

The decoder writes to memory every step (``SinusoidConfig.DECODER_WRITE``), as the paper's appendix says
for this task alone; a run's ``model.decoder_write`` overrides it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Dict, Literal, Optional

import torch

from uwbench.registry import TASKS
from uwbench.tasks.base import Batch, RegressionTask


@dataclass
class SinusoidConfig:
    DECODER_WRITE: ClassVar[bool] = True  # "In decoding, we let MANNs write to memory at every timestep"

    seq_len: int = 100  # T, input steps
    out_len: int = 100  # T_out, steps to generate
    offset: float = 5.0  # the 5 in y = 5 + A sin(...)
    amp_min: float = 1.0  # A ~ U(amp_min, amp_max)
    amp_max: float = 5.0
    freq_min: float = 10.0  # f ~ U(freq_min, freq_max)
    freq_max: float = 30.0
    phase_min: float = 0.0  # phi ~ U(phase_min, phase_max)
    phase_max: float = 100.0
    eps_range: float = 1.0  # eps_1 ~ U(-eps_range, eps_range) in x_t = (t + eps_1) / x_scale
    x_scale: float = 1000.0
    jitter: Literal["step", "sequence"] = "step"  # one eps_1 per step (default) or per sequence
    noise: float = 0.0  # eps_2 ~ U(-noise, noise) added to the inputs (the noisy variant: 2)
    test_size: int = 640
    test_seed: int = 20190506  # the fixed test set's seed, independent of the run's seed

    def __post_init__(self):
        checks = [
            ("seq_len >= 1", self.seq_len >= 1, self.seq_len),
            ("out_len >= 1", self.out_len >= 1, self.out_len),
            ("0 < amp_min <= amp_max", 0 < self.amp_min <= self.amp_max, (self.amp_min, self.amp_max)),
            ("0 < freq_min <= freq_max", 0 < self.freq_min <= self.freq_max, (self.freq_min, self.freq_max)),
            ("phase_min <= phase_max", self.phase_min <= self.phase_max, (self.phase_min, self.phase_max)),
            ("eps_range >= 0", self.eps_range >= 0, self.eps_range),
            ("x_scale > 0", self.x_scale > 0, self.x_scale),
            ("noise >= 0", self.noise >= 0, self.noise),
            ("test_size >= 1", self.test_size >= 1, self.test_size),
        ]
        for rule, ok, value in checks:
            if not ok:
                raise ValueError(f"`{rule}` must hold, got {value}")


@dataclass
class NoisySinusoidConfig(SinusoidConfig):
    noise: float = 2.0  # eps_2 ~ U(-2, 2) (paper §3.4)


def _uniform(lo: float, hi: float, shape, generator: torch.Generator) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(shape, generator=generator, dtype=torch.float64)


def generate(cfg: SinusoidConfig, batch_size: int, generator: torch.Generator) -> Dict[str, torch.Tensor]:
    """Draw ``batch_size`` sinusoids. Returns the parameters and the sampled values (float64):
    amplitude, frequency, phase (B,); x, clean (B, T + T_out); inputs (B, T) with the input noise."""
    b, total = batch_size, cfg.seq_len + cfg.out_len
    amplitude = _uniform(cfg.amp_min, cfg.amp_max, (b,), generator)  # (B,)
    frequency = _uniform(cfg.freq_min, cfg.freq_max, (b,), generator)  # (B,)
    phase = _uniform(cfg.phase_min, cfg.phase_max, (b,), generator)  # (B,)
    eps_shape = (b, total) if cfg.jitter == "step" else (b, 1)
    eps = _uniform(-cfg.eps_range, cfg.eps_range, eps_shape, generator)  # (B, T+T_out) or (B, 1)
    t = torch.arange(1, total + 1, dtype=torch.float64)  # (T+T_out,) 1-indexed as in the paper
    x = (t + eps) / cfg.x_scale  # (B, T+T_out)
    clean = cfg.offset + amplitude[:, None] * torch.sin(2 * math.pi * frequency[:, None] * x + phase[:, None])
    inputs = clean[:, : cfg.seq_len]  # (B, T)
    if cfg.noise > 0:
        inputs = inputs + _uniform(-cfg.noise, cfg.noise, inputs.shape, generator)
    return {"amplitude": amplitude, "frequency": frequency, "phase": phase, "x": x, "clean": clean,
            "inputs": inputs}


class SinusoidTask(RegressionTask):
    input_size = 1
    output_size = 1

    def __init__(self, config: SinusoidConfig, name: str):
        super().__init__(config)
        self.name = name

    def max_encoder_steps(self) -> int:
        return self.config.seq_len

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        cfg = self.config
        g = generate(cfg, batch_size, generator)
        inputs = g["inputs"].float().unsqueeze(-1)  # (B, T, 1)
        targets = g["clean"][:, cfg.seq_len :].float().unsqueeze(-1)  # (B, T_out, 1)
        decoder_inputs = torch.zeros(batch_size, cfg.out_len, 1)  # (B, T_out, 1) all zero (module doc)
        return Batch(inputs=inputs, decoder_inputs=decoder_inputs, targets=targets)


@TASKS.register("sinusoid", config=SinusoidConfig,
                help="continue a sinusoid: read 100 values, generate the next 100 (paper §3.4), MSE")
def build_sinusoid(cfg: SinusoidConfig) -> SinusoidTask:
    return SinusoidTask(cfg, "sinusoid")


@TASKS.register("sinusoid_noisy", config=NoisySinusoidConfig,
                help="sinusoid continuation with U(-2,2) noise on the inputs (paper §3.4), MSE")
def build_sinusoid_noisy(cfg: NoisySinusoidConfig) -> SinusoidTask:
    return SinusoidTask(cfg, "sinusoid_noisy")


def plot_sinusoid(inputs, targets, outputs, write_gates=None, title: Optional[str] = None):
    """One panel of the appendix's sinusoid figures: the given input then the generated continuation
    (truth red, prediction blue), and the write gate of every step underneath.

    ``inputs`` (T,), ``targets`` (T_out,), ``outputs`` (T_out,): one sequence, arrays or tensors.
    ``write_gates`` (T + T_out,) or None (no lower panel, e.g. for the LSTM). Returns the Figure.
    """
    from matplotlib.figure import Figure  # no pyplot: no backend, no global figure state

    fig = Figure(figsize=(6, 3.6 if write_gates is not None else 2.6))
    if write_gates is not None:
        ax, ax_gate = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    else:
        ax, ax_gate = fig.subplots(1, 1), None
    draw_sinusoid(ax, ax_gate, inputs, targets, outputs, write_gates, title)
    fig.tight_layout()
    return fig


def draw_sinusoid(ax, ax_gate, inputs, targets, outputs, write_gates=None, title: Optional[str] = None,
                  written=None) -> None:
    """Draw one sequence into ``ax`` (input, true and generated continuation) and its write gate per
    step into ``ax_gate`` (skipped when either is None). Shapes as ``plot_sinusoid``; ``written``
    (T + T_out,) bool, optional: the steps the memory was written (UW / CUW / RW hold the others),
    drawn green, held steps grey."""
    import numpy as np

    def flat(a):
        a = a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(a)
        return a.reshape(-1)

    x_in, y_true, y_pred = flat(inputs), flat(targets), flat(outputs)
    t_in, t_out = len(x_in), len(y_true)
    if len(y_pred) != t_out:
        raise ValueError(f"`len(outputs) == len(targets)` must hold, got {len(y_pred)} and {t_out}")
    gates = flat(write_gates) if write_gates is not None else None
    if gates is not None and len(gates) != t_in + t_out:
        raise ValueError(f"`len(write_gates) == T + T_out` must hold, got {len(gates)} and {t_in + t_out}")
    steps_in = np.arange(1, t_in + 1)
    steps_out = np.arange(t_in + 1, t_in + t_out + 1)
    ax.plot(steps_in, x_in, color="tab:red", lw=1.2, label="input / truth")
    ax.plot(steps_out, y_true, color="tab:red", lw=1.2)
    ax.plot(steps_out, y_pred, color="tab:blue", lw=1.2, label="generated")
    ax.axvline(t_in + 0.5, color="grey", lw=0.8, ls="--")
    ax.set_ylabel("y")
    ax.legend(loc="upper left", fontsize=7, frameon=False)
    if title:
        ax.set_title(title, fontsize=9)
    if ax_gate is not None and gates is not None:
        steps = np.arange(1, t_in + t_out + 1)
        if written is None:
            ax_gate.bar(steps, gates, width=1.0, color="tab:green")
        else:
            mask = flat(written).astype(bool)
            if len(mask) != len(gates):
                raise ValueError(f"`len(written) == T + T_out` must hold, got {len(mask)} and {len(gates)}")
            ax_gate.bar(steps[mask], gates[mask], width=1.0, color="tab:green", label="written")
            ax_gate.bar(steps[~mask], gates[~mask], width=1.0, color="lightgrey", label="held")
            ax_gate.legend(loc="upper left", fontsize=6, frameon=False, ncol=2)
        ax_gate.axvline(t_in + 0.5, color="grey", lw=0.8, ls="--")
        ax_gate.set_ylim(0, max(1.0, float(np.nanmax(gates)) if len(gates) else 1.0))
        ax_gate.set_ylabel("write gate", fontsize=8)
        ax_gate.set_xlabel("time step")
    else:
        ax.set_xlabel("time step")
