"""Training time: the reduction of uniform and cached-uniform writing against regular writing with the same
model, controller, task, T and D (paper Fig. 2 b, d), the devices the runs used, and how they were trained
(the note on populations). Values only: the time table is ``uwbench.report.rendering.tables.time_table``."""
from __future__ import annotations

from typing import List, Optional

import pandas as pd

from uwbench.report.analysis.summary import REDUCED_WRITERS, cpu_recorded
from uwbench.values import is_number


def time_reductions(summary: pd.DataFrame) -> pd.DataFrame:
    """For every uniform / cached-uniform cell with a regular twin (same model, controller, task, T, D):
    its seconds per 100 updates, the twin's, and the reduction 100 (1 - t / t_regular) in %, on CPU seconds
    where both sides recorded them, else on wall seconds (``basis``). The CPU figures are those of the runs
    that had a core to themselves (``cores``); where a side recorded CPU time but none of its runs had a
    core to itself, its reduction is None (``basis`` cpu): its runs' times do not measure the writer."""
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
        cpu = cpu_recorded(r) and cpu_recorded(twin)
        t, t_reg = (r["cpu100_mean"], twin["cpu100_mean"]) if cpu else (r["sec100_mean"], twin["sec100_mean"])
        known = is_number(t) and is_number(t_reg)
        rows.append({"cell": r["cell"], "regular_cell": twin["cell"], "model": r["model"],
                     "controller": r["controller"], "writer": r["writer"], "task": r["task"],
                     "seq_len": r["seq_len"], "memory_size": r["memory_size"], "cache_size": r["cache_size"],
                     "sec100": r["sec100_mean"], "sec100_regular": twin["sec100_mean"],
                     "basis": "cpu" if cpu else "wall", "basis_regular": t_reg if is_number(t_reg) else None,
                     "reduction": 100.0 * (1.0 - t / t_reg) if known else None})
    return pd.DataFrame(rows, columns=["cell", "regular_cell", "model", "controller", "writer", "task", "seq_len",
                                       "memory_size", "cache_size", "sec100", "sec100_regular", "basis",
                                       "basis_regular", "reduction"])


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
