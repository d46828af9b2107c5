"""Multi-objective studies: the Pareto-optimal configurations over all cells, as values (the table is
``uwbench.report.rendering.tables.pareto_table``)."""
from __future__ import annotations

from typing import List, Optional, Tuple

import pandas as pd

from uwbench import metrics, selection
from uwbench.report.analysis.summary import metric_info
from uwbench.report.data.study import StudyView


def pareto_columns(study: StudyView) -> List[Tuple[str, str]]:
    """(runs.csv column, direction) of each objective as the report compares final runs: the task's
    measure on the test set, then each cost's recorded value (``metrics.run_key_of``)."""
    if len(study.objectives) < 2:
        return []
    info = metric_info(study.metric)
    return [(info["column"], "maximize" if info["higher_better"] else "minimize")] + [
        (metrics.run_key_of(m), d) for m, d in study.objectives[1:]]


def pareto_points(study: StudyView, runs: pd.DataFrame) -> Optional[pd.DataFrame]:
    """One row per (cell, configuration) of finished final runs with the means of the objectives and
    ``pareto`` (``selection.pareto_points``), the cell's writer, D, (D+1)/T, lr and clip; None when the
    study has one objective or nothing finished."""
    cols = pareto_columns(study)
    if not cols or len(runs) == 0:
        return None
    points = selection.pareto_points(runs, [c for c, _ in cols], [d for _, d in cols])
    if len(points) == 0:
        return None
    first = runs.drop_duplicates("cell").set_index("cell")
    for col in ("model", "writer", "controller", "task", "seq_len", "memory_size", "cache_size", "compression_ratio"):
        points[col] = [first.at[c, col] if c in first.index and col in first.columns else None for c in points["cell"]]
    done = selection.finished_finals(runs)
    keyed = done.assign(_point=selection.frame_points(done)).drop_duplicates(["cell", "_point"]).set_index(
        ["cell", "_point"])
    for col in ("lr", "clip"):
        points[col] = [keyed.at[(c, k), col] for c, k in zip(points["cell"], points["point"])]
    return points
