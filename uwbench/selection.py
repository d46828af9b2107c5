"""The selection rule: which runs a cell's result is made of. The sweeps (their summary and the MLflow
parent runs) and the report all ask this module, so they name the same configuration.

- **Best search trial** (tuned mode): the finished trial with the best objective value; ties go to the
  earliest trial. Its configuration is re-run on the final seeds.
- **Best grid point** (faithful mode with a grid over settings, e.g. lr x clip in the paper's ablation):
  the point whose finished final runs have the best mean *evaluation* metric (the best evaluation of
  each run), never the test metric: a configuration is chosen on evaluation data, as the paper's
  validation-based selection; ties go to the first point in sorted order of its parameters.
- **Pareto-optimal trials** (tuned mode with an objective list: the task's measure and costs such as
  seconds per 100 updates): the finished trials whose objective vector no other finished trial
  dominates (at least as good in every objective, strictly better in one). Of trials with equal vectors
  the earliest stands for them. Each Pareto-optimal trial's configuration is re-run on the final seeds.
  Across a study's cells the report draws the same rule over the cells' final results (``pareto_points``).
- **The runs that count**: tuned, every finished final run (the re-runs of the best trial; with several
  objectives, of the Pareto-optimal trial best in the first objective); faithful, the finished runs of
  the best grid point (every finished run when there is one point). Search trials never count.

Works on sweep records (``uwbench.sweeps.common.Record``: ``role``, ``status``, ``value``, ``eval``,
``test``, ``params``, ``number``; ``values``, the objective vector, in a multi-objective study) and on
the report's runs frame (``runs.csv`` rows).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from uwbench import metrics
from uwbench.axes import SEED_PARAM
from uwbench.errors import UserError
from uwbench.values import is_number


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
    done = [r for r in records if r.role == "trial" and r.status == "finished" and is_number(r.value)]
    if not done:
        return None
    sign = 1.0 if direction == "maximize" else -1.0
    return max(done, key=lambda r: (sign * r.value, -r.number))


def best_so_far(records: Iterable[Any], direction: str) -> Optional[Any]:
    """The finished run (trial or final) with the best objective value, for a progress line."""
    rows = [r for r in records if r.status == "finished" and is_number(r.value)]
    if not rows:
        return None
    sign = 1.0 if direction == "maximize" else -1.0
    return max(rows, key=lambda r: (sign * r.value, -r.number))


# --------------------------------------------------------------------------------------------------
# Several objectives: the Pareto rule
# --------------------------------------------------------------------------------------------------


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    """Does objective vector ``a`` dominate ``b``: at least as good in every objective, better in one?"""
    signs = [1.0 if d == "maximize" else -1.0 for d in directions]
    if not len(a) == len(b) == len(signs):
        raise ValueError(f"objective vectors {list(a)} and {list(b)} must each have {len(signs)} values "
                         f"(one per direction {list(directions)})")
    at_least = all(s * x >= s * y for s, x, y in zip(signs, a, b))
    return at_least and any(s * x > s * y for s, x, y in zip(signs, a, b))


def pareto_front(points: Sequence[Optional[Sequence[float]]], directions: Sequence[str]) -> List[int]:
    """The indices of the non-dominated points, in order. A point with a missing or non-finite value
    takes no part; of equal points only the first is kept."""
    valid = [i for i, p in enumerate(points) if p is not None and all(is_number(v) for v in p)]
    front: List[int] = []
    for i in valid:
        p = [float(v) for v in points[i]]
        if any(dominates([float(v) for v in points[j]], p, directions) for j in valid if j != i):
            continue
        if any([float(v) for v in points[j]] == p for j in front):
            continue
        front.append(i)
    return front


def objective_vector(record: Any) -> Optional[Sequence[float]]:
    """A record's objective vector: its ``values`` (several objectives), else ``(value,)``."""
    values = getattr(record, "values", None)
    if values is not None:
        return values
    return None if record.value is None else (record.value,)


def pareto_trials(records: Iterable[Any], directions: Sequence[str]) -> List[Any]:
    """The Pareto-optimal finished search trials (by trial number), each standing for its configuration;
    a trial without a full objective vector (one value per direction) takes no part."""
    done = sorted((r for r in records if r.role == "trial" and r.status == "finished"), key=lambda r: r.number)
    vectors = [objective_vector(r) for r in done]
    vectors = [v if v is not None and len(v) == len(directions) else None for v in vectors]
    return [done[i] for i in pareto_front(vectors, directions)]


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
        vals = [float(v) for v in points[key] if is_number(v)]
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
    if is_number(value):
        return float(value)
    if _objective(objective).is_eval and is_number(record.value):
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


def choose(mode: str, objective, records: Sequence[Any], directions: Optional[Sequence[str]] = None) -> CellChoice:
    """The selection rule for one cell's records (see the module docstring). ``directions``: one per
    objective of a multi-objective study (its first objective is ``objective``)."""
    obj = _objective(objective)
    finished = [r for r in records if r.role == "final" and r.status == "finished" and is_number(r.test)]
    if mode == "tuned" and directions is not None and len(directions) > 1:
        front = pareto_trials(records, directions)
        best = best_trial(front, obj.direction)
        if best is None:
            return CellChoice(None, [], 0)
        runs = [r for r in finished if point_key(r.params) == point_key(best.params)]
        return CellChoice(best.params, runs, len({point_key(r.params) for r in finished}))
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
            raise UserError(f"cannot choose a grid point: no final run records an evaluation metric "
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
        lambda r: "|".join(format(float(v), ".6g") if is_number(v) else "" for v in r), axis=1)


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


def finished_finals(runs):
    """The finished final runs of a runs frame (not trials, not a run still going or failed); an empty
    frame is returned as it is."""
    return runs[(runs["role"] == "final") & (runs["status"] == "finished")] if len(runs) else runs


def counted_runs(runs, measure: Optional[metrics.Measure] = None):
    """The runs that count, over every cell of a runs frame: the finished final runs of each cell's chosen
    grid point. What the tables average is what the curves and traces show."""
    import pandas as pd

    if len(runs) == 0:
        return runs
    m = measure or frame_measure(runs)
    done = finished_finals(runs)
    parts = [choose_rows(g, m)[0] for _, g in done.groupby("cell", sort=False)]
    return pd.concat(parts) if parts else done


def pareto_points(runs, columns: Sequence[str], directions: Sequence[str]):
    """The report's Pareto view of a runs frame: one row per (cell, configuration) of finished final
    runs, with ``n``, the mean (and ``<column>_std``) of each objective column and ``pareto`` (True where
    no other row dominates it, over all cells: ``pareto_front`` on the means)."""
    import pandas as pd

    done = finished_finals(runs)
    rows = []
    for (cell, point), g in (done.groupby(["cell", frame_points(done)], sort=False) if len(done) else []):
        row = {"cell": cell, "point": point, "n": len(g)}
        for col in columns:
            vals = pd.to_numeric(g[col], errors="coerce").dropna()
            row[col] = float(vals.mean()) if len(vals) else float("nan")
            row[f"{col}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else 0.0
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["cell", "point", "n", *[c for col in columns for c in (col, f"{col}_std")]])
    front = set(pareto_front([[r[c] for c in columns] for r in rows], directions))
    frame["pareto"] = [i in front for i in range(len(rows))]
    return frame
