"""Run sets of one study under different protocols, side by side (a study's ``protocols:``).

A study may name earlier run sets that differ from its own in a protocol setting, each a snapshot folder
(``runs.csv``, ``curves.csv``) inside the report folder, e.g. Tables 1 and 2 with the decoder that writes
every step (the authors' released code) beside their read-only decoder (the paper's runs,
docs/reference.md §5.4). The report puts each cell's mean ± std of every run set in one table, with
Welch's two-sided test of each other set against the study's own runs and the number of runs that
collapsed late (``regime.py``), so that a reader, and a test, sees what the protocol changes.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import List, Optional

import pandas as pd

from uwbench.errors import NotFoundError
from uwbench.report import formats, regime as regime_mod, stats, tables
from uwbench.snapshot import Snapshot
from uwbench.report.study import StudyView
from uwbench.report.verdicts import cell_regimes

PROTOCOL_AXES = ("decoder_write", "clip_mode")  # the runs.csv columns that name a run's protocol


@dataclass(frozen=True)
class RunSet:
    label: str  # the column header, e.g. "read-only decoder (the paper's runs)"
    runs: pd.DataFrame
    curves: pd.DataFrame
    source: str = ""  # the snapshot folder, relative to the report folder ("" for the study's own runs)


def load_others(study: StudyView, folder: str) -> List[RunSet]:
    """The study's other run sets, read from their snapshot folders under the report ``folder``; an error
    names a folder that is not there."""
    out = []
    for label, sub in study.protocols_other:
        path = os.path.join(folder, sub)
        if not os.path.isfile(os.path.join(path, "runs.csv")):
            raise NotFoundError(f"the study's protocols name the run set {label!r} at {path}, which has no "
                                    "runs.csv: restore the folder from git, or remove it from `protocols:`")
        snap = Snapshot.from_dir(path)
        runs = snap.runs[snap.runs["study"].isin([study.id, ""])] if len(snap.runs) else snap.runs
        out.append(RunSet(label, runs, snap.curves, sub))
    return out


def _collapsed(regimes, cell: str, n: int) -> str:
    """'k of n': the cell's runs in one set that fell back to the guessing level after their best evaluation."""
    g = regimes.get(cell)
    return f"{len(g.collapsed)} of {n}" if g is not None and g.state != regime_mod.UNKNOWN else ""


def protocol_text(runs: pd.DataFrame) -> str:
    """The protocol settings the runs share, e.g. 'decoder_write=false, clip_mode=per_tensor' ('' if none)."""
    parts = []
    for col in PROTOCOL_AXES:
        if col in runs.columns:
            values = sorted({str(v) for v in runs[col] if isinstance(v, str) and v not in ("", "none")})
            if values:
                parts.append(f"{col}={'/'.join(values)}")
    return ", ".join(parts)


def table(study: StudyView, own: RunSet, others: List[RunSet]) -> Optional[formats.Table]:
    """Each cell of the study under every run set: mean ± std (n), runs collapsed late, and Welch's p of
    each other set against the study's own runs; the paper's value last."""
    if not others:
        return None
    mine = set(own.runs["run_id"].astype(str)) if len(own.runs) else set()
    for other in others:
        if mine and mine == set(other.runs["run_id"].astype(str)):
            recorded = protocol_text(other.runs) or "protocol not recorded"
            note = (f"This report's runs are the run set {other.label!r} ({recorded}; snapshot "
                    f"`{other.source}/runs.csv`): the study's own protocol, {own.label or 'its label'}, has no runs "
                    "in this snapshot yet, so there is nothing to put beside them. The report is rebuilt from the "
                    "study's own runs when they are recorded.")
            return formats.Table(title="Protocols side by side", columns=[], rows=[], notes=[note])
    info = tables.metric_info(study.metric)
    dec = info["decimals"]
    sets = [own] + others
    raw = [tables.summarize(study, s.runs) for s in sets]
    regimes = [cell_regimes(study, summ, s.curves) for s, summ in zip(sets, raw)]
    summaries = [summ.set_index("cell") for summ in raw]
    columns, csv_columns = ["Cell"], ["cell"]
    for i, s in enumerate(sets):
        columns += [s.label, "collapsed late"]
        csv_columns += [f"{_key(i)}_mean", f"{_key(i)}_std", f"{_key(i)}_n", f"{_key(i)}_collapsed"]
        if i:
            columns.append("p (Welch)")
            csv_columns.append(f"{_key(i)}_p")
    columns.append("Paper")
    csv_columns.append("paper")
    rows, csv_rows = [], []
    for cell in summaries[0].index:
        row, csv_row = [cell], [cell]
        base = summaries[0].loc[cell]
        for i, (summ, regs) in enumerate(zip(summaries, regimes)):
            r = summ.loc[cell] if cell in summ.index else None
            ok = r is not None and r["state"] == tables.OK
            collapsed = _collapsed(regs, cell, int(r["n"])) if ok else ""
            row += [tables.ours_text(r, dec) if r is not None else "not run", collapsed]
            csv_row += [_r(r["mean"]) if ok else "", _r(r["std"]) if ok else "", int(r["n"]) if ok else 0,
                        collapsed.split(" ")[0] if collapsed else ""]
            if i:
                test = stats.welch(r["samples"], base["samples"]) if ok and base["state"] == tables.OK else None
                p = test.p if test is not None else None
                row.append(formats.fmt(p, 3) if p is not None else "")
                csv_row.append(_r(p))
        paper = base["paper"]
        row.append(formats.fmt(paper, dec) if paper is not None and not _nan(paper) else "")
        csv_row.append(_r(paper))
        rows.append(row)
        csv_rows.append(csv_row)
    notes = [f"{s.label}: " + (protocol_text(s.runs) or "protocol not recorded")
             + (f" (snapshot [`{s.source}/runs.csv`]({s.source}/runs.csv))" if s.source else " (this report's runs)")
             for s in sets]
    notes.append("p (Welch): two-sided, per-seed test values of that run set against this report's runs; "
                 "collapsed late: runs whose training loss fell back to the guessing level after their best "
                 "evaluation (their test value measures the best evaluation's weights).")
    return formats.Table(title="Protocols side by side", columns=columns, rows=rows, csv_columns=csv_columns,
                         csv_rows=csv_rows, notes=notes)


@dataclass(frozen=True)
class Points:
    """What the protocols figure draws: each cell's per-seed values under every run set, and the paper's."""

    cells: List[str]
    sets: List[tuple]  # (label, {cell: per-seed values}) in the table's order, the study's own set first
    paper: dict  # cell -> the paper's value (cells without one are left out)


def points(study: StudyView, own: RunSet, others: List[RunSet]) -> Optional[Points]:
    """The per-seed values of every cell under each run set (the table's data, seed by seed); None without
    other run sets or without a finished run in any set."""
    if not others:
        return None
    sets = [own] + others
    summaries = [tables.summarize(study, s.runs).set_index("cell") for s in sets]
    cells = list(summaries[0].index)
    drawn = [(s.label, {c: tuple(summ.loc[c]["samples"]) for c in cells
                        if c in summ.index and summ.loc[c]["state"] == tables.OK}) for s, summ in zip(sets, summaries)]
    if not any(values for _, values in drawn):
        return None
    paper = {c: float(summaries[0].loc[c]["paper"]) for c in cells
             if summaries[0].loc[c]["paper"] is not None and not _nan(summaries[0].loc[c]["paper"])}
    return Points(cells=cells, sets=drawn, paper=paper)


def _key(i: int) -> str:
    return "this" if i == 0 else f"other{i}"


def _nan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _r(v):
    if v is None or _nan(v):
        return ""
    return round(float(v), 6)
