"""The Protocols side by side table: each cell of the study under every run set (mean ± std (n), runs
collapsed late, Welch's p of each other set against the study's own runs), the paper's value last; from
``uwbench.report.verdicts.protocols.side_by_side``."""
from __future__ import annotations

from typing import List, Optional

from uwbench.report.analysis.summary import OK, metric_info
from uwbench.report.data.protocols import RunSet, protocol_text
from uwbench.report.data.study import StudyView
from uwbench.report.rendering.text import ours_text, rounded
from uwbench.report.verdicts import regime as regime_mod
from uwbench.report.verdicts.protocols import side_by_side
from uwbench.tabular import Table, fmt
from uwbench.values import is_number


def _collapsed(regimes, cell: str, n: int) -> str:
    """'k of n': the cell's runs in one set that fell back to the guessing level after their best evaluation."""
    g = regimes.get(cell)
    return f"{len(g.collapsed)} of {n}" if g is not None and g.state != regime_mod.UNKNOWN else ""


def table(study: StudyView, own: RunSet, others: List[RunSet]) -> Optional[Table]:
    """Each cell of the study under every run set: mean ± std (n), runs collapsed late, and Welch's p of
    each other set against the study's own runs; the paper's value last."""
    compared = side_by_side(study, own, others)
    if compared is None:
        return None
    if compared.same_as is not None:
        other = compared.same_as
        recorded = protocol_text(other.runs) or "protocol not recorded"
        note = (f"This report's runs are the run set {other.label!r} ({recorded}; snapshot "
                f"`{other.source}/runs.csv`): the study's own protocol, {own.label or 'its label'}, has no runs "
                "in this snapshot yet, so there is nothing to put beside them. The report is rebuilt from the "
                "study's own runs when they are recorded.")
        return Table(title="Protocols side by side", columns=[], rows=[], notes=[note])
    dec = metric_info(study.metric)["decimals"]
    sets, summaries = compared.sets, compared.summaries
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
        for i, (summ, regs) in enumerate(zip(summaries, compared.regimes)):
            r = summ.loc[cell] if cell in summ.index else None
            ok = r is not None and r["state"] == OK
            collapsed = _collapsed(regs, cell, int(r["n"])) if ok else ""
            row += [ours_text(r, dec) if r is not None else "not run", collapsed]
            csv_row += [rounded(r["mean"]) if ok else "", rounded(r["std"]) if ok else "", int(r["n"]) if ok else 0,
                        collapsed.split(" ")[0] if collapsed else ""]
            if i:
                p = compared.pvalues[i].get(cell)
                row.append(fmt(p, 3) if p is not None else "")
                csv_row.append(rounded(p))
        paper = base["paper"]
        row.append(fmt(paper, dec) if is_number(paper) else "")
        csv_row.append(rounded(paper))
        rows.append(row)
        csv_rows.append(csv_row)
    notes = [f"{s.label}: " + (protocol_text(s.runs) or "protocol not recorded")
             + (f" (snapshot [`{s.source}/runs.csv`]({s.source}/runs.csv))" if s.source else " (this report's runs)")
             for s in sets]
    notes.append("p (Welch): two-sided, per-seed test values of that run set against this report's runs; "
                 "collapsed late: runs whose training loss fell back to the guessing level after their best "
                 "evaluation (their test value measures the best evaluation's weights).")
    return Table(title="Protocols side by side", columns=columns, rows=rows, csv_columns=csv_columns,
                 csv_rows=csv_rows, notes=notes)


def _key(i: int) -> str:
    return "this" if i == 0 else f"other{i}"
