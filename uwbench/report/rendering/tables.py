"""The report's tables as ``Table`` objects (``uwbench.tabular``: written to Markdown, CSV and LaTeX):

- ``paper_tables`` : the paper's layout (e.g. Table 1: models as rows, task and length T as columns),
  ours beside the paper's value and the difference (one block per controller where a model/writer pair
  was run with several controllers, as in the ablation figure's panels).
- ``cells_table`` : every cell in one long table (``cells.csv``).
- ``time_table`` : seconds per 100 updates per cell and the reduction of uniform / cached-uniform
  writing against regular writing with the same model, controller, task, T and D (paper Fig. 2 b, d).
- ``pareto_table`` : a multi-objective study's Pareto-optimal configurations.

The values are ``uwbench.report.analysis``'s (``summary.summarize``, ``timing.time_reductions``,
``pareto.pareto_points``); this module only lays them out.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import pandas as pd

from uwbench import axes, metrics
from uwbench.report.analysis import cores
from uwbench.report.analysis.labels import (cap, column_label, label_flags, model_label, needs, needs_in_order,
                                            sort_value, task_label, varies, writer_rank)
from uwbench.report.analysis.summary import cpu_recorded, extra_axes, metric_info
from uwbench.report.analysis.timing import devices, time_reductions, training_note
from uwbench.report.data.study import StudyView
from uwbench.report.rendering.text import csv_value, int_text, ours_text, rounded, short_number, time_text
from uwbench.tabular import Table, fmt
from uwbench.values import is_number, present


def paper_tables(summary: pd.DataFrame, study: StudyView) -> List[Table]:
    """The paper's layout: rows = models (+ writer), column groups = the axes that vary among task,
    T and D, each group 'ours | paper | Δ'. One block per controller when controllers must be told apart."""
    if len(summary) == 0:
        return []
    info = metric_info(study.metric)
    by_controller = needs(summary, "controller", ["model", "writer"])
    blocks = ([(c, g) for c, g in summary.groupby("controller", sort=False)] if by_controller
              else [("", summary)])
    return [_paper_block(controller, block, info) for controller, block in blocks]


def _block_rows(block: pd.DataFrame, block_axes: List[str], mention, groups: List[str]):
    """(label -> {"rows": {column group -> cell row}, "first": a row}, labels in the table's row order)."""
    labels: Dict[str, Dict[str, Any]] = {}
    for _, r in block.iterrows():
        label = model_label(r, mention)
        g = column_label(r, block_axes) or groups[0]
        entry = labels.setdefault(label, {"rows": {}, "first": r})
        if g in entry["rows"]:  # two cells collide: tell them apart by id
            label = f"{label} [{r['cell']}]"
            entry = labels.setdefault(label, {"rows": {}, "first": r})
        entry["rows"][g] = r
    models = list(dict.fromkeys(block["model"]))  # the spec's model order
    order = sorted(labels, key=lambda lab: (models.index(labels[lab]["first"]["model"]),
                                            writer_rank(labels[lab]["first"]["writer"]),
                                            sort_value(labels[lab]["first"]["memory_size"]), lab))
    return labels, order


def _size_cells(entry, has_hidden: bool, has_params: bool) -> Tuple[List[str], List[Any]]:
    """A row's N_h and # params (a range when its cells differ), as shown and as CSV."""
    row, crow = [], []
    for col, shown, sep in (("hidden_size", has_hidden, "{:d}"), ("num_parameters", has_params, "{:,}")):
        if not shown:
            continue
        vals = sorted({int(r[col]) for r in entry["rows"].values() if is_number(r[col])})
        row.append("–".join(sep.format(v) for v in (vals[0], vals[-1])) if len(vals) > 1
                   else (sep.format(vals[0]) if vals else ""))
        crow.append(vals[0] if len(vals) == 1 else "")
    return row, crow


def _block_title(block: pd.DataFrame, controller: str, info: Mapping[str, Any]) -> str:
    unit = f" ({info['unit']})" if info["unit"] else ""
    title = f"{cap(info['name'])}{unit}"
    const = [column_label(block.iloc[0], [a]) for a in ("task", "seq_len", "memory_size")
             if not varies(block, a) and present(block.iloc[0][a])]
    if controller:
        const.insert(0, f"{axes.display('controller', controller)} controller")
    const = [c for c in const if c]
    return title + (": " + ", ".join(const) if const else "")


def _paper_block(controller: str, block: pd.DataFrame, info: Mapping[str, Any]) -> Table:
    dec = info["decimals"]
    block_axes, memory_in_rows = _block_axes(block)
    keys = ["model", "writer"] + block_axes + (["memory_size"] if memory_in_rows else [])
    mention = needs_in_order(block, keys) | ({"memory_size"} if memory_in_rows else set())
    task_order = list(dict.fromkeys(block["task"]))  # the spec's (the paper's) task order
    ordered = sorted(block.to_dict("records"), key=lambda r: (
        task_order.index(r["task"]), sort_value(r["seq_len"]), sort_value(r["memory_size"])))
    groups = list(dict.fromkeys(column_label(r, block_axes) for r in ordered))
    if groups == [""]:
        groups = [f"{cap(info['name'])}" + (f" ({info['unit']})" if info["unit"] else "")]
    labels, order = _block_rows(block, block_axes, mention, groups)
    has_hidden = any(is_number(r["hidden_size"]) for _, r in block.iterrows())
    has_params = any(is_number(r["num_parameters"]) for _, r in block.iterrows())
    head = ["Model"] + (["N_h"] if has_hidden else []) + (["# params"] if has_params else [])
    columns, csv_columns = list(head), list(head)
    for g in groups:
        columns += [g, "paper", "Δ"]
        csv_columns += [f"{g} mean", f"{g} std", f"{g} n", f"{g} paper", f"{g} diff", f"{g} state"]
    rows, csv_rows = [], []
    for lab in order:
        entry = labels[lab]
        sizes, csv_sizes = _size_cells(entry, has_hidden, has_params)
        row, crow = [lab] + sizes, [lab] + csv_sizes
        for g in groups:
            r = entry["rows"].get(g)
            if r is None:
                row += ["", "", ""]
                crow += ["", "", "", "", "", ""]
                continue
            row += [ours_text(r, dec), fmt(r["paper"], dec) or "—", fmt(r["diff"], dec, sign=True)]
            crow += [rounded(r["mean"]), rounded(r["std"]), int(r["n"]), rounded(r["paper"]),
                     rounded(r["diff"]), r["state"]]
        rows.append(row)
        csv_rows.append(crow)
    notes = ["ours: mean ± std over the finished final seeds (n = number of seeds); Δ = ours − paper"]
    if (block["grid_points"].fillna(0) > 1).any():
        notes.append("cells run on several grid points (e.g. lr × clip) show the point with the best mean "
                     "evaluation metric; all points are in runs.csv")
    return Table(title=_block_title(block, controller, info), columns=columns, rows=rows,
                 groups=[("", len(head))] + [(g, 3) for g in groups],
                 csv_columns=csv_columns, csv_rows=csv_rows, notes=notes)


def _block_axes(block: pd.DataFrame) -> Tuple[List[str], bool]:
    """The column axes of one table block (task and T where they vary), and whether the memory size D
    is a column axis (every model + writer run on the same D values: the ablation's grid) or part of the
    row name (Table 3's DNC at D = 15, 30, 60 beside UW at D = 15). D tied to the task (Table 4) is neither."""
    axes = [a for a in ("task", "seq_len") if varies(block, a)]
    if not needs(block, "memory_size", ["model", "writer"] + axes):
        return axes, False
    mem = block[block["memory_size"].map(is_number)]
    sets = {key: frozenset(g["memory_size"]) for key, g in
            mem.groupby([mem["model"].astype(str), mem["writer"].astype(str)], sort=False)}
    if len(set(sets.values())) == 1:
        return axes + ["memory_size"], False
    return axes, True


def cells_table(summary: pd.DataFrame, study: StudyView) -> Table:
    """Every cell in one long table (the CSV a script would read)."""
    info = metric_info(study.metric)
    dec = info["decimals"]
    columns = ["Cell", "Model", "Task", "T", "D", "(D+1)/T", "lr", "clip", f"ours ({info['unit'] or 'MSE'})",
               "paper", "Δ", "verdict", "s / 100 updates"]
    csv_columns = ["cell", "model", "writer", "controller", "task", "seq_len", "memory_size", "cache_size",
                   "hidden_size", *extra_axes(), "compression_ratio", "lr", "clip", "steps", "grid_points", "n", "n_failed",
                   "n_trials", "mean",
                   "std", "paper", "diff", "verdict", "state", "sec100_mean", "sec100_std", "device", "num_parameters"]
    rows, csv_rows = [], []
    flags = label_flags(summary)
    for _, r in summary.iterrows():
        rows.append([r["cell"], model_label(r, **flags), task_label(r["task"]),
                     int_text(r["seq_len"]), int_text(r["memory_size"]), fmt(r["compression_ratio"], 3),
                     short_number(r["lr"]), short_number(r["clip"]), ours_text(r, dec), fmt(r["paper"], dec) or "—",
                     fmt(r["diff"], dec, sign=True), r["verdict"], time_text(r)])
        csv_rows.append([csv_value(r[c]) for c in csv_columns])
    return Table(title="All cells", columns=columns, rows=rows, csv_columns=csv_columns, csv_rows=csv_rows)


def time_table(summary: pd.DataFrame, runs: Optional[pd.DataFrame] = None) -> Optional[Table]:
    """Seconds per 100 updates (training only, evaluation excluded) per cell, and the reduction of
    uniform and cached-uniform writing against regular writing. ``runs``: the report's runs, for the note on
    populations (``training_note``)."""
    timed = summary[summary["sec100_mean"].map(is_number)]
    if len(timed) == 0:
        return None
    red = {r["cell"]: r for _, r in time_reductions(summary).iterrows()}
    has_paper = timed["paper_time_reduction"].map(is_number).any()
    shared = int(timed["n_shared_core"].sum()) if "n_shared_core" in timed.columns else 0
    # snapshots from before the CPU column have none; runs that all shared their cores have no CPU figure
    has_cpu = any(cpu_recorded(r) for _, r in timed.iterrows())
    columns = ["Model", "Task", "T", "D", "s / 100 updates"] + (["CPU s / 100"] if has_cpu else [])
    # the regular twin's time on the basis its reduction is computed on: CPU seconds where both sides have them
    regular_column = "regular writing's CPU s / 100" if has_cpu else "vs regular (s / 100)"
    columns += ["n"] + (["CPU-timed n"] if shared else []) + [regular_column, "time reduction (%)"] + (
        ["paper (%)"] if has_paper else [])
    csv_columns = ["cell", "model", "writer", "controller", "task", "seq_len", "memory_size", "cache_size",
                   "sec100_mean", "sec100_std"] + (["cpu_sec100_mean"] if has_cpu else []) + [
                   "n", "n_shared_core", "device", "regular_cell", "sec100_regular"] + (
                   ["reduction_basis", "basis_sec100_regular"] if has_cpu else []) + [
                   "reduction_percent", "paper_reduction_percent"]
    rows, csv_rows = [], []
    flags = label_flags(summary)
    for _, r in timed.iterrows():
        x = red.get(r["cell"])
        cpu = [fmt(r["cpu100_mean"], 2)] if has_cpu else []
        rows.append([model_label(r, **flags), task_label(r["task"]),
                     int_text(r["seq_len"]), int_text(r["memory_size"]), time_text(r)] + cpu + [str(int(r["n"]))] + (
                     [str(int(r["n"]) - int(r["n_shared_core"]))] if shared else []) + [
                     _regular_text(x, has_cpu), fmt(x["reduction"], 1) if x is not None else ""] + (
                        [fmt(r["paper_time_reduction"], 1)] if has_paper else []))
        csv_rows.append([r["cell"], r["model"], r["writer"], r["controller"], r["task"], csv_value(r["seq_len"]),
                         csv_value(r["memory_size"]), csv_value(r["cache_size"]), rounded(r["sec100_mean"]),
                         rounded(r["sec100_std"])] + ([rounded(r["cpu100_mean"])] if has_cpu else []) + [
                         int(r["n"]), int(r["n_shared_core"]), r["device"],
                         x["regular_cell"] if x is not None else "",
                         rounded(x["sec100_regular"]) if x is not None else ""] + (
                         [x["basis"] if x is not None else "", rounded(x["basis_regular"]) if x is not None else ""]
                         if has_cpu else []) + [
                         rounded(x["reduction"]) if x is not None else "", rounded(r["paper_time_reduction"])])
    dev = ", ".join(devices(summary)) or "unknown"
    notes = [f"Device: {dev}. Training seconds per 100 updates, evaluation excluded, mean ± std over final seeds.",
             "Time reduction = 100 × (1 − t / t_regular) against the regular-writing cell with the same model, "
             "controller, task, T and D, on CPU seconds where both recorded them (else wall seconds); timings "
             "compare only on the same device."]
    if has_cpu:
        notes.append("CPU s / 100: the run's own CPU seconds per 100 updates (mean over the seeds that had a core to "
                     "themselves). On a shared machine the wall time also counts the waiting for a core.")
        notes.append("Regular writing's CPU s / 100: the regular-writing cell the reduction is taken against, on the "
                     "same CPU seconds (a value marked (wall) is wall seconds, where a side recorded no CPU time).")
    if shared:
        notes.append(f"{shared} of {int(timed['n'].sum())} runs shared their core while they trained (CPU time "
                     f"below {cores.CORE_SHARE_FLOOR:.0%} of wall time: more processes than cores took turns). "
                     "Sharing a core also costs CPU time, so their CPU times are left out: CPU s / 100, the "
                     "reductions and the time verdicts use the CPU-timed runs only, and a reduction is blank where "
                     "a side has none (docs/speed.md, \"Timing on a shared machine\").")
    trained = training_note(runs) if runs is not None else None
    if trained is not None:
        notes.append(trained)
    return Table(title=f"Training time per 100 updates ({dev})", columns=columns, rows=rows,
                 csv_columns=csv_columns, csv_rows=csv_rows, notes=notes)


def _regular_text(x, has_cpu: bool) -> str:
    """The regular twin's seconds per 100 updates on the basis of the reduction beside it."""
    if x is None or not is_number(x["basis_regular"]):
        return ""
    if not has_cpu:
        return f"{x['sec100_regular']:.2f}"
    return f"{x['basis_regular']:.2f}" + ("" if x["basis"] == "cpu" else " (wall)")


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
        rows.append([r["cell"], model_label(r), int_text(r["memory_size"]), fmt(r["compression_ratio"], 3),
                     short_number(r["lr"]), short_number(r["clip"]), acc,
                     *[fmt(r[key], c.decimals) for key, c in costs]])
        csv_rows.append([csv_value(r["cell"]), csv_value(r["writer"]), csv_value(r["memory_size"]), csv_value(r["compression_ratio"]),
                         csv_value(r["lr"]), csv_value(r["clip"]), int(r["n"]), csv_value(r[col]), csv_value(r[col + "_std"]),
                         *[csv_value(r[k]) for key, _ in costs for k in (key, f"{key}_std")]])
    notes = [f"{len(front)} of {len(points)} configurations (cell and lr, clip) are Pareto-optimal: none of the "
             f"others is at least as good in every objective and better in one (means over the final runs)."]
    return Table(title="Pareto-optimal configurations", columns=columns, rows=rows, csv_columns=csv_columns,
                 csv_rows=csv_rows, notes=notes)
