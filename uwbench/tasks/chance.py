"""The guessing level of a task: what a model that ignores its input scores.

A model that has learned nothing about the input can still learn the targets' marginal distribution.
The best such constant predictor sets the level a trained model must leave before its numbers say
anything about memory:

- classification (``ClassificationTask``): predict the marginal class frequencies p of the test
  targets. Its loss is their entropy H(p) = -sum_c p_c log p_c (the token cross-entropy the task trains
  on), its accuracy max_c p_c (always the likeliest token).
- regression (``RegressionTask``): predict the targets' mean. Its loss and MSE are the targets'
  variance (per output, averaged).

Both are read off the task's fixed, seeded test set, so they are a function of the task's settings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping

import torch

from uwbench.tasks.base import ClassificationTask, RegressionTask, Task, build_task


@dataclass(frozen=True)
class Chance:
    loss: float  # the training loss of the best input-blind predictor
    score: float  # its value of the task's metric (accuracy as a fraction, or MSE)
    metric: str  # the task's metric: accuracy | mse


def chance_level(task: Task) -> Chance:
    """The guessing level of ``task`` (module docstring), from its test set."""
    targets = [b.targets for b in task.test_batches()]
    if isinstance(task, ClassificationTask):
        ids = torch.cat([t.reshape(-1) for t in targets])  # (N,) class ids
        counts = torch.bincount(ids, minlength=task.output_size).double()
        p = counts / counts.sum()
        nz = p[p > 0]
        return Chance(loss=float(-(nz * nz.log()).sum()), score=float(p.max()), metric="accuracy")
    if isinstance(task, RegressionTask):
        values = torch.cat([t.reshape(-1, t.shape[-1]) for t in targets]).double()  # (N, O)
        var = float(values.var(dim=0, unbiased=False).mean())
        return Chance(loss=var, score=var, metric="mse")
    raise TypeError(f"task {task.name!r} is neither a ClassificationTask nor a RegressionTask: no guessing level")


_CACHE: Dict[str, Chance] = {}


def chance_of(name: str, settings: Mapping[str, Any]) -> Chance:
    """The guessing level of the registered task ``name`` with ``settings`` (cached per settings)."""
    key = f"{name}:{sorted(settings.items())!r}"
    if key not in _CACHE:
        _CACHE[key] = chance_level(build_task(name, dict(settings)))
    return _CACHE[key]
