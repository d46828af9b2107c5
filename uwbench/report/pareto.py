"""Multi-objective studies: the Pareto-optimal configurations over all cells, as a table."""
from __future__ import annotations

from typing import List, Optional, Tuple

import pandas as pd

from uwbench import metrics, selection
from uwbench.report.formats import Table, fmt
from uwbench.report.study import StudyView
from uwbench.report.tables import _csv, _gtext, _itext, metric_info, model_label


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


def pareto_table(study: StudyView, points: pd.DataFrame) -> Table:
    """The Pareto-optimal configurations (no other cell's configuration is better in every objective)."""
    info = metric_info(study.metric)
    dec, col = info["decimals"], info["column"]
    costs = [(metrics.run_key_of(m), metrics.COSTS[m]) for m, _ in study.objectives[1:]]
    columns = ["Cell", "Model", "D", "(D+1)/T", "lr", "clip", f"{info['name']} ({info['unit'] or 'MSE'})",
               *[f"{c.title}{f' ({c.unit})' if c.unit else ''}" for _, c in costs]]
    csv_columns = ["cell", "writer", "memory_size", "compression_ratio", "lr", "clip", "n", f"{col}_mean",
                   f"{col}_std", *[k for key, _ in costs for k in (f"{key}_mean", f"{key}_std")]]
    rows, csv_rows = [], []
    front = points[points["pareto"]].sort_values(col, ascending=not info["higher_better"], kind="stable")
    for _, r in front.iterrows():
        acc = f"{fmt(r[col] * info['scale'], dec)} ± {fmt(r[col + '_std'] * info['scale'], dec)} (n={int(r['n'])})"
        rows.append([r["cell"], model_label(r), _itext(r["memory_size"]), fmt(r["compression_ratio"], 3),
                     _gtext(r["lr"]), _gtext(r["clip"]), acc,
                     *[fmt(r[key], c.decimals) for key, c in costs]])
        csv_rows.append([_csv(r["cell"]), _csv(r["writer"]), _csv(r["memory_size"]), _csv(r["compression_ratio"]),
                         _csv(r["lr"]), _csv(r["clip"]), int(r["n"]), _csv(r[col]), _csv(r[col + "_std"]),
                         *[_csv(r[k]) for key, _ in costs for k in (key, f"{key}_std")]])
    notes = [f"{len(front)} of {len(points)} configurations (cell and lr, clip) are Pareto-optimal: none of the "
             f"others is at least as good in every objective and better in one (means over the final runs)."]
    return Table(title="Pareto-optimal configurations", columns=columns, rows=rows, csv_columns=csv_columns,
                 csv_rows=csv_rows, notes=notes)
