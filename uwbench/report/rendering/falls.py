"""A traced fall's files (``uwbench trace``): write a ``TraceResult`` of ``uwbench/training/trace.py`` to a
folder, read it back, draw it, and put several traces (a run and its branches) side by side.

A trace folder holds ``trace.csv`` (per update and view), ``steps.csv`` (per update), ``compare.csv``
(the reference paths), ``curve.csv`` (the replay's evaluations beside the recorded ones), ``meta.json``
(the window, the path, the branch, ``source``), ``summary.md`` and ``trace.png``; a branch may be kept as
``meta.json``, ``steps.csv`` and ``curve.csv`` alone.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import textwrap
from typing import Dict, List, Sequence

import pandas as pd

from uwbench.atomic import write_text
from uwbench.png import save_png
from uwbench.report.rendering.figures import new_figure
from uwbench.tabular import Table, to_markdown
from uwbench.training.trace import TraceResult, loss_rise, summary

MAX_SHOWN_EVALS = 5  # evaluation columns in branches.md


def write_outputs(result: TraceResult, out_dir: str, source: str = "") -> List[str]:
    """``trace.csv`` (per update and view), ``steps.csv``, ``compare.csv``, ``curve.csv``, ``meta.json``,
    ``summary.md`` and ``trace.png`` in ``out_dir``; returns their paths (``load`` reads them back)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, rows in (("trace.csv", result.rows), ("steps.csv", result.steps), ("compare.csv", result.compare),
                       ("curve.csv", result.curve)):
        p = os.path.join(out_dir, name)
        write_text(p, pd.DataFrame(rows).to_csv(index=False, float_format="%.6g"))
        paths.append(p)
    p = os.path.join(out_dir, "meta.json")
    write_text(p, json.dumps({"path": result.path, "start": result.start, "stop": result.stop,
                              "clip": result.clip, "clip_mode": result.clip_mode, "onset": result.onset,
                              "branch_from": result.branch_from, "changes": result.changes, "source": source},
                             indent=1) + "\n")
    paths.append(p)
    p = os.path.join(out_dir, "summary.md")
    write_text(p, summary(result, source))
    paths.append(p)
    p = os.path.join(out_dir, "trace.png")
    plot(result, p, source)
    paths.append(p)
    return paths


def load(out_dir: str) -> TraceResult:
    """A trace written by ``write_outputs``, read back (to summarise or plot it again without a replay). A
    file left out (a branch kept as ``meta.json``, ``steps.csv`` and ``curve.csv`` only) reads as empty."""
    with open(os.path.join(out_dir, "meta.json")) as f:
        meta = json.load(f)
    meta.pop("source", None)  # what the trace is of: for summary() and plot()
    result = TraceResult(**meta)

    def records(name):
        path = os.path.join(out_dir, name)
        if not os.path.exists(path) or os.path.getsize(path) <= 1:  # a file left out, or an empty frame's csv
            return []
        frame = pd.read_csv(path)
        return [{k: (None if isinstance(v, float) and math.isnan(v) and k == "recorded" else v)
                 for k, v in r.items()} for r in frame.to_dict("records")]

    result.rows, result.steps = records("trace.csv"), records("steps.csv")
    result.compare, result.curve = records("compare.csv"), records("curve.csv")
    for s in result.steps:
        s["spike"] = bool(s["spike"])
    return result


def plot(result: TraceResult, path: str, source: str = "", top: int = 6) -> None:
    """Three panels over the window's updates: the loss, the gradient norm of the tensors that grew most,
    and of the interface fields that grew most (log scale; the clip as a line, the onset marked)."""
    steps = [s["step"] for s in result.steps]
    fig = new_figure(9, 9)
    axes = fig.subplots(3, 1, sharex=True)
    axes[0].plot(steps, [s["loss"] for s in result.steps], lw=0.8, color="k")
    axes[0].set_ylabel("training loss")
    for ax, kind, label in ((axes[1], "tensor", "gradient norm per tensor"),
                            (axes[2], "field", "gradient norm per interface field")):
        names = _growers(result, kind, top)
        for name in names:
            pts = [(r["step"], r["grad_norm"]) for r in result.rows if r["view"] == name]
            ax.plot([s for s, _ in pts], [max(g, 1e-12) for _, g in pts], lw=0.8, label=name)
        if kind == "tensor" and result.clip:
            ax.axhline(result.clip, color="grey", ls="--", lw=0.8, label=f"clip {result.clip:g}")
        ax.set_yscale("log")
        ax.set_ylabel(label)
        if names:
            ax.legend(fontsize=7, loc="upper left", ncol=2)
    for ax in axes:
        if result.onset is not None:
            ax.axvline(result.onset, color="red", lw=0.8, alpha=0.6)
    axes[-1].set_xlabel("update")
    axes[0].set_title(f"{source or 'trace'}: updates {result.start}-{result.stop}"
                      + (f", onset {result.onset} (red)" if result.onset is not None else ""), fontsize=9)
    save_png(fig, path)


def _growers(result: TraceResult, kind: str, top: int) -> List[str]:
    """The ``top`` views of ``kind`` with the largest peak against their own median."""
    by: Dict[str, List[float]] = {}
    for r in result.rows:
        if r["kind"] == kind:
            by.setdefault(r["view"], []).append(r["grad_norm"])
    score = {n: max(g) / max(statistics.median(g), 1e-30) for n, g in by.items() if g}
    return sorted(score, key=lambda n: -score[n])[:top]


# ---- branches side by side ----


def branch_label(result: TraceResult) -> str:
    """What a branch changed (``train.lr=3e-4``, ...), or what an unbranched trace is."""
    if result.changes:
        return ", ".join(f"train.{k}={v}" for k, v in sorted(result.changes.items()))
    return "no change (the run)" if result.branch_from is not None else "the run (replay)"


def branch_rows(results: Sequence[TraceResult]) -> List[Dict]:
    """One row per trace: what it changed, its evaluations in the window, its largest loss, its loss rise
    and gradient onset (None: none)."""
    rows = []
    for r in results:
        row = {"branch": branch_label(r), "from_state": r.branch_from, "window": f"{r.start}-{r.stop}",
               "max_loss": max((s["loss"] for s in r.steps), default=math.nan),
               "last_loss": r.steps[-1]["loss"] if r.steps else math.nan,
               "loss_rise": loss_rise(r), "gradient_onset": r.onset}
        for c in r.curve:
            if c["step"] >= r.start:
                row[f"eval_{c['step']}"] = c["replay"]
        rows.append(row)
    return rows


def write_branches(folders: Sequence[str], out_dir: str, source: str = "") -> List[str]:
    """``branches.csv``, ``branches.md`` and ``branches.png`` (the training loss per update of each trace)
    in ``out_dir``, from trace folders (each read by ``load``; the ``trace`` column names each one's folder,
    in the order given); returns their paths."""
    results = [load(f) for f in folders]
    rows = [{"trace": os.path.basename(os.path.normpath(f)), **row} for f, row in zip(folders, branch_rows(results))]
    frame = pd.DataFrame(rows)
    evals = sorted((c for c in frame.columns if c.startswith("eval_")), key=lambda c: int(c[len("eval_"):]))
    frame = frame[[c for c in frame.columns if not c.startswith("eval_")] + evals]
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, n) for n in ("branches.csv", "branches.md", "branches.png")]
    write_text(paths[0], frame.to_csv(index=False, float_format="%.6g"))
    evals = [c for c in frame.columns if c.startswith("eval_")]
    if len(evals) > MAX_SHOWN_EVALS:  # the markdown shows a few, evenly spread (the CSV has them all)
        keep = {evals[round(i * (len(evals) - 1) / (MAX_SHOWN_EVALS - 1))] for i in range(MAX_SHOWN_EVALS)}
        frame_shown = frame[[c for c in frame.columns if not c.startswith("eval_") or c in keep]]
    else:
        frame_shown = frame
    shown = frame_shown.copy()
    for col in shown.columns:
        if col.startswith("eval_"):
            shown[col] = shown[col].map(lambda v: "" if pd.isna(v) else f"{100 * v:.1f}%")
        elif col in ("max_loss", "last_loss"):
            shown[col] = shown[col].map(lambda v: f"{v:.3f}")
        elif col in ("loss_rise", "gradient_onset", "from_state"):
            shown[col] = shown[col].map(lambda v: "none" if v is None or pd.isna(v) else f"{int(v)}")
    title = f"# Branches of {source or 'a traced run'}\n\n"

    table = Table(title="branches", columns=[str(c) for c in shown.columns],
                  rows=[["" if v is None else str(v) for v in row] for row in shown.itertuples(index=False)])
    write_text(paths[1], title + to_markdown(table))
    fig = new_figure(8, 4.2)
    ax = fig.subplots()

    labels = [row["branch"] for row in rows]
    for r, row in zip(results, rows):
        label = row["branch"] + (f" ({row['window']})" if labels.count(row["branch"]) > 1 else "")
        ax.plot([s["step"] for s in r.steps], [s["loss"] for s in r.steps], lw=0.8, label=label)
    ax.set_xlabel("update")
    ax.set_ylabel("training loss")
    ax.set_title("\n".join(textwrap.wrap(f"{source or 'branches'}: the same weights and batches, one setting "
                                          "changed", 100)), fontsize=9)
    ax.legend(fontsize=7)
    save_png(fig, paths[2])
    return paths
