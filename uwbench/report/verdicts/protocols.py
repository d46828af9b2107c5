"""Run sets of one study under different protocols, compared: each cell's summary under every run set, its
runs that collapsed late (``regime``), and Welch's two-sided test of each other set against the study's own
runs, so that a reader, and a test, sees what the protocol changes (the table is
``uwbench.report.rendering.protocols``'s, the figure ``rendering.figures.protocols_dots``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pandas as pd

from uwbench.report.analysis.summary import OK, summarize
from uwbench.report.data.protocols import RunSet
from uwbench.report.data.study import StudyView
from uwbench.report.verdicts import stats
from uwbench.report.verdicts.judge import cell_regimes
from uwbench.report.verdicts.regime import Regime
from uwbench.values import is_number


@dataclass
class SideBySide:
    """The study's own run set and the others, cell by cell: ``summaries`` (indexed by cell), ``regimes`` and
    ``pvalues`` (cell -> Welch's p against the own set; empty for the own set) in the order of ``sets``, the own
    set first. ``same_as``: another set holding exactly this report's runs (the study's own protocol has no
    runs yet), and nothing is compared."""

    sets: List[RunSet]
    summaries: List[pd.DataFrame] = field(default_factory=list)
    regimes: List[Dict[str, Regime]] = field(default_factory=list)
    pvalues: List[Dict[str, Optional[float]]] = field(default_factory=list)
    same_as: Optional[RunSet] = None


def side_by_side(study: StudyView, own: RunSet, others: List[RunSet]) -> Optional[SideBySide]:
    """Every cell of the study under every run set; None without other run sets."""
    if not others:
        return None
    sets = [own] + others
    mine = set(own.runs["run_id"].astype(str)) if len(own.runs) else set()
    for other in others:
        if mine and mine == set(other.runs["run_id"].astype(str)):
            return SideBySide(sets=sets, same_as=other)
    raw = [summarize(study, s.runs) for s in sets]
    regimes = [cell_regimes(study, summ, s.curves) for s, summ in zip(sets, raw)]
    summaries = [summ.set_index("cell") for summ in raw]
    base = summaries[0]
    pvalues: List[Dict[str, Optional[float]]] = [{}]
    for summ in summaries[1:]:
        ps: Dict[str, Optional[float]] = {}
        for cell in base.index:
            r = summ.loc[cell] if cell in summ.index else None
            ok = r is not None and r["state"] == OK
            test = stats.welch(r["samples"], base.loc[cell]["samples"]) if ok and base.loc[cell]["state"] == OK else None
            ps[cell] = test.p if test is not None else None
        pvalues.append(ps)
    return SideBySide(sets=sets, summaries=summaries, regimes=regimes, pvalues=pvalues)


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
    summaries = [summarize(study, s.runs).set_index("cell") for s in sets]
    cells = list(summaries[0].index)
    drawn = [(s.label, {c: tuple(summ.loc[c]["samples"]) for c in cells
                        if c in summ.index and summ.loc[c]["state"] == OK}) for s, summ in zip(sets, summaries)]
    if not any(values for _, values in drawn):
        return None
    paper = {c: float(summaries[0].loc[c]["paper"]) for c in cells if is_number(summaries[0].loc[c]["paper"])}
    return Points(cells=cells, sets=drawn, paper=paper)
