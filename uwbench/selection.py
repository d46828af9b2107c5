"""The selection rule: which runs a cell's result is made of. The sweeps (their summary and the MLflow
parent runs) and the report all ask this module, so they name the same configuration.

- **Best search trial** (tuned mode): the finished trial with the best objective value; ties go to the
  earliest trial. Its configuration is re-run on the final seeds.
- **Best grid point** (faithful mode with a grid over settings, e.g. lr x clip in the paper's ablation):
  the point whose finished final runs have the best mean *evaluation* metric (the best evaluation of
  each run), never the test metric: a configuration is chosen on evaluation data, as the paper's
  validation-based selection; ties go to the first point in sorted order of its parameters.
- **The runs that count**: tuned, every finished final run (the re-runs of the best trial); faithful,
  the finished runs of the best grid point (every finished run when there is one point). Search trials
  never count.

Works on sweep records (``uwbench.sweeps.common.Record``: ``role``, ``status``, ``value``, ``eval``,
``test``, ``params``, ``number``) and on the report's runs frame (``runs.csv`` rows).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from uwbench import metrics
from uwbench.sweeps.space import SEED_PARAM


def _finite(v) -> bool:
    return v is not None and not isinstance(v, str) and not (isinstance(v, float) and math.isnan(v))


def _objective(objective) -> metrics.Metric:
    """An objective given as a Metric, a key (``eval_accuracy``) or a spec ``Objective``."""
    if isinstance(objective, metrics.Metric):
        return objective
    return metrics.get(getattr(objective, "metric", objective))


# --------------------------------------------------------------------------------------------------
# Search trials
# --------------------------------------------------------------------------------------------------


def best_trial(records: Iterable[Any], direction: str) -> Optional[Any]:
    """The best finished search trial by its objective value (ties: the earliest), or None."""
    done = [r for r in records if r.role == "trial" and r.status == "finished" and _finite(r.value)]
    if not done:
        return None
    sign = 1.0 if direction == "maximize" else -1.0
    return max(done, key=lambda r: (sign * r.value, -r.number))


def best_so_far(records: Iterable[Any], direction: str) -> Optional[Any]:
    """The finished run (trial or final) with the best objective value, for a progress line."""
    rows = [r for r in records if r.status == "finished" and _finite(r.value)]
    if not rows:
        return None
    sign = 1.0 if direction == "maximize" else -1.0
    return max(rows, key=lambda r: (sign * r.value, -r.number))


# --------------------------------------------------------------------------------------------------
# Grid points
# --------------------------------------------------------------------------------------------------


def point_key(params: Mapping[str, Any]) -> str:
    """A grid point's identity: its params without the seed, as sorted JSON (the ``search_params`` tag)."""
    return json.dumps({k: v for k, v in params.items() if k != SEED_PARAM}, sort_keys=True, default=str)


def best_point(points: Mapping[str, Sequence[Optional[float]]], measure: metrics.Measure) -> Optional[str]:
    """The key whose values (evaluation metrics) have the best mean; missing values are left out; ties:
    the first key in sorted order; None when no point has a value."""
    best, best_mean = None, None
    for key in sorted(points):
        vals = [float(v) for v in points[key] if _finite(v)]
        if not vals:
            continue
        mean = sum(vals) / len(vals)
        if best_mean is None or measure.better(mean, best_mean):
            best, best_mean = key, mean
    return best


def eval_value(record: Any, objective) -> Optional[float]:
    """A finished run's evaluation metric: its ``eval`` when recorded, else its objective value when the
    objective is an evaluation metric; None otherwise (a test value is never used to select)."""
    value = getattr(record, "eval", None)
    if _finite(value):
        return float(value)
    if _objective(objective).is_eval and _finite(record.value):
        return float(record.value)
    return None


@dataclass
class CellChoice:
    """What counts for one cell: the chosen params (None if nothing finished), the runs that count, and
    the number of grid points seen."""

    params: Optional[Dict[str, Any]]
    runs: List[Any] = field(default_factory=list)
    n_points: int = 0

    @property
    def tests(self) -> List[float]:
        return [r.test for r in self.runs]


def choose(mode: str, objective, records: Sequence[Any]) -> CellChoice:
    """The selection rule for one cell's records (see the module docstring)."""
    obj = _objective(objective)
    finished = [r for r in records if r.role == "final" and r.status == "finished" and _finite(r.test)]
    if mode == "tuned":
        best = best_trial(records, obj.direction)
        return CellChoice(best.params if best else None, finished, 1 if finished else 0)
    groups: Dict[str, List[Any]] = {}
    for r in finished:
        groups.setdefault(point_key(r.params), []).append(r)
    if not groups:
        return CellChoice(None, [], 0)
    if len(groups) == 1:
        key = next(iter(groups))
    else:
        key = best_point({k: [eval_value(r, obj) for r in rows] for k, rows in groups.items()}, obj.measure)
        if key is None:
            raise ValueError(f"cannot choose a grid point: no final run records an evaluation metric "
                             f"({obj.run_metric.at('best_eval').key}); record it with each run")
    return CellChoice(json.loads(key), groups[key], len(groups))


# --------------------------------------------------------------------------------------------------
# The report's runs frame
# --------------------------------------------------------------------------------------------------


def frame_points(done) -> "Any":
    """The grid-point key of each row of a runs frame: its ``search_params`` (the sweep's own record),
    else its lr and clip."""
    if done["search_params"].map(lambda v: isinstance(v, str) and v not in ("", "{}")).any():
        return done["search_params"].map(lambda v: v if isinstance(v, str) else "")
    return done[["lr", "clip"]].apply(
        lambda r: "|".join(format(float(v), ".6g") if _finite(v) else "" for v in r), axis=1)


def choose_rows(done, measure: metrics.Measure):
    """Finished final runs of one cell (a runs frame) -> (the rows that count, grid points): the point
    with the best mean ``best_eval_<measure>``; the same rule as ``choose``."""
    if len(done) == 0:
        return done, 0
    keys = frame_points(done)
    points = sorted(set(keys))
    if len(points) == 1:
        return done, 1
    column = metrics.metric("best_eval", measure.name).key
    best = best_point({p: list(done.loc[keys == p, column]) for p in points}, measure)
    if best is None:
        return done, len(points)
    return done[keys == best], len(points)


def frame_measure(runs) -> metrics.Measure:
    """The measure a runs frame holds: MSE when it has test MSE values and no test accuracy, else accuracy."""
    mse, acc = metrics.metric("test", "mse").key, metrics.metric("test", "accuracy").key
    if len(runs) and runs[mse].notna().any() and runs[acc].isna().all():
        return metrics.measure("mse")
    return metrics.measure("accuracy")


def counted_runs(runs, measure: Optional[metrics.Measure] = None):
    """The runs that count, over every cell of a runs frame: the finished final runs of each cell's chosen
    grid point. What the tables average is what the curves and traces show."""
    import pandas as pd

    if len(runs) == 0:
        return runs
    m = measure or frame_measure(runs)
    done = runs[(runs["role"] == "final") & (runs["status"] == "finished")]
    parts = [choose_rows(g, m)[0] for _, g in done.groupby("cell", sort=False)]
    return pd.concat(parts) if parts else done
