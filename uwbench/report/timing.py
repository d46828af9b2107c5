"""Training-time tables: seconds per 100 updates per cell, and the reduction of uniform and cached-uniform
writing against regular writing with the same model, controller, task, T and D (paper Fig. 2 b, d)."""
from __future__ import annotations

from typing import List, Optional

import pandas as pd

from uwbench.report.formats import Table, fmt
from uwbench.report.tables import (REDUCED_WRITERS, _csv, _itext, _round, _time_text, label_flags, model_label,
                                   task_label)
from uwbench.values import is_number


def time_reductions(summary: pd.DataFrame) -> pd.DataFrame:
    """For every uniform / cached-uniform cell with a regular twin (same model, controller, task, T, D):
    its seconds per 100 updates, the twin's, and the reduction 100 (1 - t / t_regular) in %, on CPU seconds
    where both sides recorded them (steady on a shared machine), else on wall seconds (``basis``)."""
    keys = ["model", "controller", "task", "seq_len", "memory_size"]
    regular = {tuple(str(r[k]) for k in keys): r for _, r in summary.iterrows()
               if r["writer"] == "regular" and is_number(r["sec100_mean"])}
    rows = []
    for _, r in summary.iterrows():
        if r["writer"] not in REDUCED_WRITERS or not is_number(r["sec100_mean"]):
            continue
        twin = regular.get(tuple(str(r[k]) for k in keys))
        if twin is None:
            continue
        cpu = is_number(r["cpu100_mean"]) and is_number(twin["cpu100_mean"])
        t, t_reg = (r["cpu100_mean"], twin["cpu100_mean"]) if cpu else (r["sec100_mean"], twin["sec100_mean"])
        rows.append({"cell": r["cell"], "regular_cell": twin["cell"], "model": r["model"],
                     "controller": r["controller"], "writer": r["writer"], "task": r["task"],
                     "seq_len": r["seq_len"], "memory_size": r["memory_size"], "cache_size": r["cache_size"],
                     "sec100": r["sec100_mean"], "sec100_regular": twin["sec100_mean"],
                     "basis": "cpu" if cpu else "wall", "basis_regular": t_reg,
                     "reduction": 100.0 * (1.0 - t / t_reg)})
    return pd.DataFrame(rows, columns=["cell", "regular_cell", "model", "controller", "writer", "task", "seq_len",
                                       "memory_size", "cache_size", "sec100", "sec100_regular", "basis",
                                       "basis_regular", "reduction"])


def _regular_text(x, has_cpu: bool) -> str:
    """The regular twin's seconds per 100 updates on the basis of the reduction beside it."""
    if x is None:
        return ""
    if not has_cpu:
        return f"{x['sec100_regular']:.2f}"
    return f"{x['basis_regular']:.2f}" + ("" if x["basis"] == "cpu" else " (wall)")


def devices(summary: pd.DataFrame) -> List[str]:
    out = set()
    for d in summary["device"]:
        out.update(x.strip() for x in str(d or "").split(",") if x.strip())
    return sorted(out)


def training_note(runs: pd.DataFrame) -> Optional[str]:
    """How the finished final runs were trained, where some trained in a population (their ``population_size``;
    ``uwbench.training.population``): a member's seconds per 100 updates is its share of its population's
    time, so a run set that mixes the two kinds says so. None where every run trained alone."""
    if "population_size" not in runs.columns or not len(runs):
        return None
    final = runs[(runs["role"] == "final") & (runs["status"] == "finished")]
    together = final["population_size"][final["population_size"].map(is_number)]
    if len(together) == 0:
        return None
    sizes = together.astype(int).value_counts().sort_index()
    parts = [f"{n} in populations of {k}" for k, n in sizes.items()]
    alone = len(final) - len(together)
    if alone:
        parts.append(f"{alone} alone")
    text = (f"Trained: {', '.join(parts)} (of {len(final)} final runs). A population member's time is its share "
            "of its population's (the population's time over its members)")
    if alone or len(sizes) > 1:
        text += ("; this run set mixes runs trained alike and not: a time compared across cells of different kinds "
                 "compares a run's own time with a share of a population's")
    return text + "."


def time_table(summary: pd.DataFrame, runs: Optional[pd.DataFrame] = None) -> Optional[Table]:
    """Seconds per 100 updates (training only, evaluation excluded) per cell, and the reduction of
    uniform and cached-uniform writing against regular writing. ``runs``: the report's runs, for the note on
    populations (``training_note``)."""
    timed = summary[summary["sec100_mean"].map(is_number)]
    if len(timed) == 0:
        return None
    red = {r["cell"]: r for _, r in time_reductions(summary).iterrows()}
    has_paper = timed["paper_time_reduction"].map(is_number).any()
    has_cpu = timed["cpu100_mean"].map(is_number).any()  # snapshots from before the CPU column have none
    columns = ["Model", "Task", "T", "D", "s / 100 updates"] + (["CPU s / 100"] if has_cpu else [])
    # the regular twin's time on the basis its reduction is computed on: CPU seconds where both sides have them
    regular_column = "regular writing's CPU s / 100" if has_cpu else "vs regular (s / 100)"
    columns += ["n", regular_column, "time reduction (%)"] + (["paper (%)"] if has_paper else [])
    csv_columns = ["cell", "model", "writer", "controller", "task", "seq_len", "memory_size", "cache_size",
                   "sec100_mean", "sec100_std"] + (["cpu_sec100_mean"] if has_cpu else []) + [
                   "n", "device", "regular_cell", "sec100_regular"] + (
                   ["reduction_basis", "basis_sec100_regular"] if has_cpu else []) + [
                   "reduction_percent", "paper_reduction_percent"]
    rows, csv_rows = [], []
    flags = label_flags(summary)
    for _, r in timed.iterrows():
        x = red.get(r["cell"])
        cpu = [fmt(r["cpu100_mean"], 2)] if has_cpu else []
        rows.append([model_label(r, **flags), task_label(r["task"]),
                     _itext(r["seq_len"]), _itext(r["memory_size"]), _time_text(r)] + cpu + [str(int(r["n"])),
                     _regular_text(x, has_cpu), fmt(x["reduction"], 1) if x is not None else ""] + (
                        [fmt(r["paper_time_reduction"], 1)] if has_paper else []))
        csv_rows.append([r["cell"], r["model"], r["writer"], r["controller"], r["task"], _csv(r["seq_len"]),
                         _csv(r["memory_size"]), _csv(r["cache_size"]), _round(r["sec100_mean"]),
                         _round(r["sec100_std"])] + ([_round(r["cpu100_mean"])] if has_cpu else []) + [
                         int(r["n"]), r["device"],
                         x["regular_cell"] if x is not None else "",
                         _round(x["sec100_regular"]) if x is not None else ""] + (
                         [x["basis"] if x is not None else "", _round(x["basis_regular"]) if x is not None else ""]
                         if has_cpu else []) + [
                         _round(x["reduction"]) if x is not None else "", _round(r["paper_time_reduction"])])
    dev = ", ".join(devices(summary)) or "unknown"
    notes = [f"Device: {dev}. Training seconds per 100 updates, evaluation excluded, mean ± std over final seeds.",
             "Time reduction = 100 × (1 − t / t_regular) against the regular-writing cell with the same model, "
             "controller, task, T and D, on CPU seconds where both recorded them (else wall seconds); timings "
             "compare only on the same device."]
    if has_cpu:
        notes.append("CPU s / 100: the run's own CPU seconds per 100 updates (mean over seeds). On a shared machine "
                     "the wall time also counts the waiting for a core; the CPU time does not, so where the two "
                     "differ much the runs shared their cores.")
        notes.append("Regular writing's CPU s / 100: the regular-writing cell the reduction is taken against, on the "
                     "same CPU seconds (a value marked (wall) is wall seconds, where a side recorded no CPU time).")
    trained = training_note(runs) if runs is not None else None
    if trained is not None:
        notes.append(trained)
    return Table(title=f"Training time per 100 updates ({dev})", columns=columns, rows=rows,
                 csv_columns=csv_columns, csv_rows=csv_rows, notes=notes)
