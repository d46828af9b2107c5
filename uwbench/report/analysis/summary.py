"""Per-cell summaries over the final seeds, and the study's status against the paper.

- ``summarize`` : one row per cell (spec order): our mean ± std over the finished final runs (n), the
  paper's value, the difference, a verdict (matches / within tolerance / off), the cell's state
  (ok / not run / failed / running), training seconds per 100 updates, the device.
- ``study_status`` : the worst verdict of a study's compared cells (the index's status column).

Values only: the tables that show a summary (the paper's layout, every cell, time) are
``uwbench.report.rendering.tables``'s.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import pandas as pd

from uwbench import axes, metrics, selection
from uwbench.report.analysis import cores
from uwbench.report.data.study import StudyView
from uwbench.values import is_number, present

REDUCED_WRITERS = ("uniform", "cached_uniform")  # the writers whose time reduction is reported


MATCHES, WITHIN, OFF = "matches", "within tolerance", "off"
MATCH_FLOOR_POINTS, MATCH_FLOOR_RELATIVE = 1.0, 0.05  # matches: within 2 std, or 1 pp of accuracy / 5% of an MSE


REDUCED = "reduced budget"  # fewer updates than the paper's: its value is not held against the paper's


NOT_RUN, FAILED, INCOMPLETE, OK = "not run", "failed", "incomplete", "ok"


NO_PAPER = "no paper value"


def _int(v) -> Optional[int]:
    return int(v) if is_number(v) else None


def metric_info(metric: str) -> Dict[str, Any]:
    """Column, scale, units and direction of the study's headline measure (``uwbench.metrics``)."""
    m = metrics.measure(metric)
    return {"column": metrics.metric("test", m.name).key, "scale": m.scale, "name": f"test {m.title}",
            "unit": m.unit, "decimals": m.decimals, "curve": metrics.metric("eval", m.name).key,
            "measure": m.name, "higher_better": m.higher_is_better}


def match_floor_text(metric: str) -> str:
    """The least gap that still matches, in words: '1 pp' of accuracy, '5%' of an MSE."""
    if metrics.measure(metric).relative:
        return f"{MATCH_FLOOR_RELATIVE:.0%}"
    return f"{MATCH_FLOOR_POINTS:g} pp"


def verdict(diff: Optional[float], std: Optional[float], paper: Optional[float], metric: str, tol: float,
            steps: Optional[int] = None, paper_steps: Optional[int] = None) -> str:
    """matches: the paper's value lies within our noise (2 std, at least 1 pp / 5 % of an MSE);
    within tolerance: |diff| <= the study's tolerance (pp, or relative for MSE); off: otherwise;
    reduced budget: the runs made fewer updates than the paper's (``steps`` < ``paper_steps``), so their
    value says nothing about the paper's."""
    if diff is None or paper is None:
        return ""
    if paper_steps is not None and (steps is None or steps < paper_steps):
        return REDUCED
    noise = 2.0 * std if is_number(std) else 0.0
    if metrics.measure(metric).relative:
        floor, limit = MATCH_FLOOR_RELATIVE * abs(paper), tol * abs(paper)
    else:
        floor, limit = MATCH_FLOOR_POINTS, tol
    if abs(diff) <= max(noise, floor):
        return MATCHES
    if abs(diff) <= limit:
        return WITHIN
    return OFF


def summarize(study: StudyView, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: the spec's cells in order, then cells found only in the runs (sorted). ``state``:
    ok (at least one finished final run), failed (final runs, none finished), incomplete (trials or
    final runs but none finished: a search still going or interrupted), not run."""
    info = metric_info(study.metric)
    col, scale = info["column"], info["scale"]
    by_cell = {cell: g for cell, g in runs.groupby("cell", sort=True)} if len(runs) else {}
    order = [c.id for c in study.cells] + sorted(c for c in by_cell if study.cell(c) is None)
    rows = []
    for cell_id in order:
        spec_cell = study.cell(cell_id)
        g = by_cell.get(cell_id, runs.iloc[0:0])
        finals = g[g["role"] == "final"]
        trials = g[g["role"] == "trial"]
        done = finals[(finals["status"] == "finished") & finals[col].notna()]
        failed = finals[finals["status"] == "failed"]  # an interrupted (killed) run resumes: incomplete
        done, n_points = select_grid_point(done, info)
        axes_ = dict(spec_cell.axes) if spec_cell else {}
        first = (done if len(done) else g).iloc[0] if len(g) else None
        for k in axes.cell_names():
            if k not in axes_ and first is not None and k in first.index and present(first[k]):
                axes_[k] = first[k]
        values = done[col].to_numpy(dtype=float) * scale
        n = len(values)
        mean = float(np.mean(values)) if n else None
        std = float(np.std(values, ddof=1)) if n > 1 else None
        paper = spec_cell.paper if spec_cell else None
        diff = (mean - paper) if (mean is not None and paper is not None) else None
        if n:
            state = OK
        elif len(failed):
            state = FAILED
        elif len(finals) or len(trials):
            state = INCOMPLETE  # searched, or final runs still going / interrupted
        else:
            state = NOT_RUN
        t100 = done["mean_seconds_per_100"].to_numpy(dtype=float)
        t100 = t100[~np.isnan(t100)]
        shared = cores.shared_core(done)  # runs that took turns on a core: their CPU time is not the writer's
        alone = done[~shared]
        cpu100 = (alone["mean_cpu_seconds_per_100"].to_numpy(dtype=float)
                  if "mean_cpu_seconds_per_100" in alone.columns
                  else np.array([]))  # a snapshot from before the column: no CPU figure
        cpu100 = cpu100[~np.isnan(cpu100)]
        wall_alone = alone["mean_seconds_per_100"].to_numpy(dtype=float)
        wall_alone = wall_alone[~np.isnan(wall_alone)]
        cell_axes = _axis_row(axes_)
        steps = [int(v) for v in done["steps"] if is_number(v)] if "steps" in done.columns else []
        paper_steps = spec_cell.paper_steps if spec_cell else None
        rows.append({
            "cell": cell_id, "in_spec": spec_cell is not None, **cell_axes,
            "compression_ratio": axes.compression_ratio(cell_axes),
            "lr": _unique(done["lr"]), "clip": _unique(done["clip"]),
            "n": n, "n_failed": len(failed), "n_trials": len(trials), "grid_points": n_points,
            "mean": mean, "std": std, "paper": paper, "diff": diff,
            "paper_time_reduction": spec_cell.paper_time_reduction if spec_cell else None,
            "verdict": verdict(diff, std, paper, study.metric, study.tol, min(steps) if steps else None, paper_steps),
            "steps": min(steps) if steps else None, "paper_steps": paper_steps,
            "samples": tuple(float(v) for v in values), "run_ids": tuple(str(r) for r in done["run_id"]),
            "cpu_samples": tuple(float(v) for v in cpu100), "wall_samples": tuple(float(v) for v in wall_alone),
            "n_shared_core": int(shared.sum()),
            "state": state,
            "sec100_mean": float(np.mean(t100)) if len(t100) else None,
            "sec100_std": float(np.std(t100, ddof=1)) if len(t100) > 1 else None,
            "cpu100_mean": float(np.mean(cpu100)) if len(cpu100) else None,
            "device": ", ".join(sorted({d for d in done["device"] if d})),
            "num_parameters": _unique(done["num_parameters"]),
        })
    return pd.DataFrame(rows, columns=summary_columns())


def cpu_recorded(row) -> bool:
    """A cell (a row of ``summarize``) recorded CPU time: some of its runs had a core to themselves
    (``cpu_samples``), or all that recorded it shared one (``n_shared_core``). A snapshot from before the CPU
    column has neither, and its time is compared on wall seconds."""
    samples = row.get("cpu_samples")
    shared = row.get("n_shared_core")
    return (isinstance(samples, (tuple, list)) and len(samples) > 0) or (is_number(shared) and shared > 0)


def _axis_row(values: Mapping[str, Any]) -> Dict[str, Any]:
    """A cell's axes (``uwbench.axes.cell_names``) as summary columns: whole numbers as int (None when
    missing), text as is ('' when missing; a model without a writer is 'none', as its run tag)."""
    row: Dict[str, Any] = {}
    for name in axes.cell_names():
        v = values.get(name)
        kind = axes.get(name).type
        if kind is int:
            row[name] = _int(v)
        elif kind is float:
            row[name] = float(v) if is_number(v) else None
        else:
            row[name] = v if v is not None else ""
    row["writer"] = row.get("writer") or axes.NONE
    return row


def summary_columns() -> Tuple[str, ...]:
    """The columns of ``summarize``: the cell, its axes, then what was measured."""
    return ("cell", "in_spec") + axes.cell_names() + SUMMARY_RESULTS


def extra_axes() -> Tuple[str, ...]:
    """Registered cell axes beyond the ones the tables lay out by name (cells.csv lists them too)."""
    return tuple(a for a in axes.cell_names() if a not in LAID_OUT)


LAID_OUT = ("task", "model", "controller", "writer", "seq_len", "memory_size", "cache_size", "hidden_size")


SUMMARY_RESULTS = ("compression_ratio", "lr", "clip", "n", "n_failed", "n_trials", "grid_points", "mean", "std",
                   "paper_time_reduction", "paper", "diff", "verdict", "state", "sec100_mean", "sec100_std", "cpu100_mean",
                   "device", "num_parameters", "steps", "paper_steps",
                   # per finished final run (the verdicts' tests): the metric in report units, run ids; CPU and
                   # wall seconds per 100 updates of the runs that had a core to themselves
                   "samples", "run_ids", "cpu_samples", "wall_samples",
                   # finished final runs that shared their core (``cores``): left out of the CPU figures
                   "n_shared_core")


def select_grid_point(done: pd.DataFrame, info: Mapping[str, Any]) -> Tuple[pd.DataFrame, int]:
    """Final runs of one cell made with several hyperparameter settings (a faithful study's grid over
    lr x clip, as the paper's ablation): the rows of the setting ``uwbench.selection`` chooses (best mean
    evaluation metric, never the test metric). Returns (kept rows, settings)."""
    return selection.choose_rows(done, metrics.measure(info["measure"]))


def _unique(series: pd.Series):
    vals = sorted({float(v) for v in series if is_number(v)})
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else "mixed"


def study_status(summary: pd.DataFrame) -> str:
    """The study's status for the index: not run, the worst verdict of its compared cells, or
    ``no paper value`` when nothing finished has a paper value to compare with."""
    if not (summary["state"] == OK).any():
        return NOT_RUN
    verdicts = set(summary["verdict"]) - {""}
    for v in (OFF, WITHIN, MATCHES, REDUCED):
        if v in verdicts:
            return v
    return NO_PAPER


def missing_seeds(study: StudyView, summary: pd.DataFrame, runs: pd.DataFrame) -> Dict[str, List[int]]:
    """Per cell that has runs, the seeds its profile plans (a faithful cell's ``CellView.seeds``) that no final
    run of it has (finished, failed or under way): a run set the sweep has not finished, e.g. a profile given
    more seeds. Cells with no runs at all are ``missing_cells``'."""
    finals = runs[runs["role"] == "final"] if len(runs) else runs
    out: Dict[str, List[int]] = {}
    for cell_id, state in zip(summary["cell"], summary["state"]):
        cell = study.cell(cell_id)
        if cell is None or not cell.seeds or state == NOT_RUN:
            continue
        have = {int(s) for s in finals.loc[finals["cell"] == cell_id, "seed"] if is_number(s)}
        lacking = [s for s in cell.seeds if s not in have]
        if lacking:
            out[cell_id] = lacking
    return out


def missing_cells(summary: pd.DataFrame) -> List[str]:
    """The cells of the study with no runs, when some others have runs (a sweep of a subset: ``--cells``)."""
    not_run = [c for c, st in zip(summary["cell"], summary["state"]) if st == NOT_RUN]
    return not_run if len(not_run) < len(summary) else []
