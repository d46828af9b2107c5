"""Report tables: per-cell summaries over final seeds, the paper's layout, time, and their text forms.

- ``summarize`` : one row per cell (spec order): our mean ± std over the finished final runs (n), the
  paper's value, the difference, a verdict (matches / within tolerance / off), the cell's state
  (ok / not run / failed / running), training seconds per 100 updates, the device.
- ``paper_tables`` : the paper's layout (e.g. Table 1: models as rows, task and length T as columns),
  ours beside the paper's value and the difference (one block per controller where a model/writer pair
  was run with several controllers, as in the ablation figure's panels).
- ``time_table`` : seconds per 100 updates per cell and the reduction of uniform / cached-uniform
  writing against regular writing with the same model, controller, task, T and D (paper Fig. 2 b, d).

Tables are plain ``Table`` objects written to Markdown, CSV, LaTeX (booktabs) and HTML by the functions
at the end (no tabulate, no Styler: the text is ours, so it is stable).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from uwbench import axes, metrics, selection
from uwbench.report.formats import Table, fmt
from uwbench.report.study import StudyView
from uwbench.values import is_number

REDUCED_WRITERS = ("uniform", "cached_uniform")  # the writers whose time reduction is reported

# verdicts of one cell against the paper (and of a study: the worst of its cells)
MATCHES, WITHIN, OFF = "matches", "within tolerance", "off"
REDUCED = "reduced budget"  # fewer updates than the paper's: its value is not held against the paper's
NOT_RUN, FAILED, INCOMPLETE, OK = "not run", "failed", "incomplete", "ok"
NO_PAPER = "no paper value"




def _int(v) -> Optional[int]:
    return int(v) if is_number(v) else None


# --------------------------------------------------------------------------------------------------
# Per-cell summary
# --------------------------------------------------------------------------------------------------


def metric_info(metric: str) -> Dict[str, Any]:
    """Column, scale, units and direction of the study's headline measure (``uwbench.metrics``)."""
    m = metrics.measure(metric)
    return {"column": metrics.metric("test", m.name).key, "scale": m.scale, "name": f"test {m.title}",
            "unit": m.unit, "decimals": m.decimals, "curve": metrics.metric("eval", m.name).key,
            "measure": m.name, "higher_better": m.higher_is_better}


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
        floor, limit = 0.05 * abs(paper), tol * abs(paper)
    else:
        floor, limit = 1.0, tol
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
            if k not in axes_ and first is not None and k in first.index and first[k] not in ("", None) and not (
                    isinstance(first[k], float) and math.isnan(first[k])):
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
        cpu100 = (done["mean_cpu_seconds_per_100"].to_numpy(dtype=float) if "mean_cpu_seconds_per_100" in done.columns
                  else np.array([]))  # a snapshot from before the column: no CPU figure
        cpu100 = cpu100[~np.isnan(cpu100)]
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
            "cpu_samples": tuple(float(v) for v in cpu100), "wall_samples": tuple(float(v) for v in t100),
            "state": state,
            "sec100_mean": float(np.mean(t100)) if len(t100) else None,
            "sec100_std": float(np.std(t100, ddof=1)) if len(t100) > 1 else None,
            "cpu100_mean": float(np.mean(cpu100)) if len(cpu100) else None,
            "device": ", ".join(sorted({d for d in done["device"] if d})),
            "num_parameters": _unique(done["num_parameters"]),
        })
    return pd.DataFrame(rows, columns=summary_columns())


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
                   # per finished final run (the verdicts' tests): the metric in report units, run ids, CPU and
                   # wall seconds per 100 updates
                   "samples", "run_ids", "cpu_samples", "wall_samples")


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


# --------------------------------------------------------------------------------------------------
# Labels
# --------------------------------------------------------------------------------------------------


def model_label(row, mention: Iterable[str] = ()) -> str:
    """Paper-style name: DNC, DNC+UW, DNC+CUW, DNC+RW, NTM+UW, LSTM, and in parentheses the axes in
    ``mention`` that must tell cells apart (memory slots, hidden size, cache size, controller, ...: their
    ``uwbench.axes.label``), where they apply to the row."""
    model = str(row["model"])
    writer = row["writer"]
    label = axes.get("model").display.get(model, model.upper()) + axes.get("writer").suffix.get(writer, f"+{writer}")
    mention = set(mention)
    extras = [axes.label(name, row[name]) for name in axes.label_axes()
              if name in mention and _isnum_or_str(row.get(name)) and axes.applies(name, row)]
    return label + (f" ({', '.join(extras)})" if extras else "")


def cap(text: str) -> str:
    """First letter upper case, the rest as is ('test MSE' -> 'Test MSE')."""
    return text[:1].upper() + text[1:]


def task_label(task: str) -> str:
    return str(task).replace("_", " ").capitalize() if task else ""


def column_label(row, names: Sequence[str]) -> str:
    parts = []
    for a in names:
        if a == "task":
            parts.append(task_label(row["task"]))
        elif a in ("seq_len", "memory_size") and is_number(row[a]):
            parts.append(axes.label(a, int(row[a])))
    return " ".join(parts)


IDENTITY = ["model", "writer", "task", "seq_len", "memory_size"]  # what a table row or column already names


def label_flags(summary: pd.DataFrame) -> Dict[str, frozenset]:
    """``{"mention": axes}``: the axes labels must name. The controller, where a model and writer ran
    with several (as the ablation's LSTM and RNN panels); every other label axis (cache size, hidden
    size, ...) where it tells apart cells that agree on the identity axes and the label axes before it."""
    mention = set()
    if _needs(summary, "controller", ["model", "writer"]):
        mention.add("controller")
    mention |= _needs_in_order(summary, IDENTITY + ["controller"])
    return {"mention": frozenset(mention)}


def _needs_in_order(frame: pd.DataFrame, keys: List[str]) -> set:
    """The label axes (other than D and the controller) that distinguish rows agreeing on ``keys`` and
    on the label axes checked before them (registry order)."""
    out, keys = set(), list(keys)
    for name in axes.names():
        if name not in axes.label_axes() or name in ("memory_size", "controller") or name not in frame:
            continue
        if _needs(frame, name, keys):
            out.add(name)
        keys.append(name)
    return out


def _varies(frame: pd.DataFrame, col: str) -> bool:
    vals = {v for v in frame[col] if is_number(v) or (isinstance(v, str) and v)}
    return len(vals) > 1


def _needs(frame: pd.DataFrame, axis: str, keys: Sequence[str]) -> bool:
    """Does ``axis`` distinguish cells that agree on ``keys``?"""
    if len(frame) == 0:
        return False
    for _, g in frame.groupby([frame[k].astype(str) for k in keys], sort=False, dropna=False):  # None is a value
        if _varies(g, axis):
            return True
    return False


def _writer_rank(w) -> int:
    order = list(axes.get("writer").suffix)
    return order.index(w) if w in order else len(order)


def _sort_value(v):
    return (0, float(v)) if is_number(v) else (1, 0.0)


def ours_text(row, decimals: int) -> str:
    """'97.1 ± 0.4 (n=5)', 'not run', 'failed (0/3)', 'incomplete', with failed seeds named."""
    if row["state"] == NOT_RUN:
        return "not run"
    if row["state"] == INCOMPLETE:
        return "incomplete (no finished final run)"
    if row["state"] == FAILED:
        return f"failed (0/{row['n_failed']})"
    n = int(row["n"])
    text = fmt(row["mean"], decimals)
    if is_number(row["std"]):
        text += f" ± {fmt(row['std'], decimals)}"
    note = f"n={n}" + (f", {int(row['n_failed'])} failed" if row["n_failed"] else "")
    return f"{text} ({note})"


def paper_tables(summary: pd.DataFrame, study: StudyView) -> List[Table]:
    """The paper's layout: rows = models (+ writer), column groups = the axes that vary among task,
    T and D, each group 'ours | paper | Δ'. One block per controller when controllers must be told apart."""
    if len(summary) == 0:
        return []
    info = metric_info(study.metric)
    by_controller = _needs(summary, "controller", ["model", "writer"])
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
                                            _writer_rank(labels[lab]["first"]["writer"]),
                                            _sort_value(labels[lab]["first"]["memory_size"]), lab))
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
             if not _varies(block, a) and _isnum_or_str(block.iloc[0][a])]
    if controller:
        const.insert(0, f"{axes.display('controller', controller)} controller")
    const = [c for c in const if c]
    return title + (": " + ", ".join(const) if const else "")


def _paper_block(controller: str, block: pd.DataFrame, info: Mapping[str, Any]) -> Table:
    dec = info["decimals"]
    block_axes, memory_in_rows = _block_axes(block)
    keys = ["model", "writer"] + block_axes + (["memory_size"] if memory_in_rows else [])
    mention = _needs_in_order(block, keys) | ({"memory_size"} if memory_in_rows else set())
    task_order = list(dict.fromkeys(block["task"]))  # the spec's (the paper's) task order
    ordered = sorted(block.to_dict("records"), key=lambda r: (
        task_order.index(r["task"]), _sort_value(r["seq_len"]), _sort_value(r["memory_size"])))
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
            crow += [_round(r["mean"]), _round(r["std"]), int(r["n"]), _round(r["paper"]),
                     _round(r["diff"]), r["state"]]
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
    axes = [a for a in ("task", "seq_len") if _varies(block, a)]
    if not _needs(block, "memory_size", ["model", "writer"] + axes):
        return axes, False
    mem = block[block["memory_size"].map(is_number)]
    sets = {key: frozenset(g["memory_size"]) for key, g in
            mem.groupby([mem["model"].astype(str), mem["writer"].astype(str)], sort=False)}
    if len(set(sets.values())) == 1:
        return axes + ["memory_size"], False
    return axes, True


def _isnum_or_str(v) -> bool:
    return is_number(v) or (isinstance(v, str) and bool(v))


def _round(v, digits: int = 6):
    return round(float(v), digits) if is_number(v) else ""


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
                     _itext(r["seq_len"]), _itext(r["memory_size"]), fmt(r["compression_ratio"], 3),
                     _gtext(r["lr"]), _gtext(r["clip"]), ours_text(r, dec), fmt(r["paper"], dec) or "—",
                     fmt(r["diff"], dec, sign=True), r["verdict"], _time_text(r)])
        csv_rows.append([_csv(r[c]) for c in csv_columns])
    return Table(title="All cells", columns=columns, rows=rows, csv_columns=csv_columns, csv_rows=csv_rows)


def _csv(v):
    if isinstance(v, float):
        return _round(v)
    return "" if v is None else v


def _itext(v) -> str:
    return str(int(v)) if is_number(v) else ""


def _gtext(v) -> str:
    if isinstance(v, str):
        return v
    return f"{float(v):.3g}" if is_number(v) else ""


def _time_text(r) -> str:
    if not is_number(r["sec100_mean"]):
        return ""
    text = f"{r['sec100_mean']:.2f}"
    if is_number(r["sec100_std"]):
        text += f" ± {r['sec100_std']:.2f}"
    return text


def missing_cells(summary: pd.DataFrame) -> List[str]:
    """The cells of the study with no runs, when some others have runs (a sweep of a subset: ``--cells``)."""
    not_run = [c for c, st in zip(summary["cell"], summary["state"]) if st == NOT_RUN]
    return not_run if len(not_run) < len(summary) else []
