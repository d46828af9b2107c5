"""A report's Verdicts section and its CSVs (``verdicts.csv``, ``orderings.csv``, ``regimes.csv``), from the
``Verdicts`` that ``uwbench.report.verdicts.judge.build`` computes."""
from __future__ import annotations

import os
from typing import List, Optional

from uwbench import atomic
from uwbench.report.analysis import cores
from uwbench.report.rendering.text import int_text, rounded
from uwbench.report.verdicts import regime as regime_mod, stats
from uwbench.report.verdicts.judge import MIN_SEEDS, Value, Verdicts
from uwbench.snapshot import to_csv_text
from uwbench.tabular import Table, fmt, to_markdown


RULE_TEXT = ("each comparison is **not testable at this budget** when a side has not converged (its learning "
             "curve still rises or falls over its last quarter by more than 1 point of accuracy, or 5% of an "
             "MSE, per 1,000 updates, or its training loss has not left the guessing level at "
             "a budget below the paper's; a run whose training loss fell back to the guessing level after its "
             "best evaluation is read up to that evaluation, whose weights its test value measures); at the paper's "
             "own budget the comparison is tested as the paper made it, a side's unsettled curve is named "
             "beside the verdict, and a significant result reads **yes / no at the paper's budget, not "
             "converged** (never a plain yes or no while a side still moves); otherwise Welch's t-test of the per-seed values, Holm-corrected "
             f"across the claim's comparisons at α = {stats.ALPHA:g}: **yes** / **no** when significant (the "
             "claimed winner better / worse), **inconclusive** when not, **not testable with fewer than "
             f"{MIN_SEEDS} seeds** when a side has fewer. Time claims use CPU seconds per 100 updates (wall beside) of the runs that had a "
             f"core to themselves ({cores.floor_text()}) and need no convergence; a side with fewer than "
             f"{MIN_SEEDS} such runs makes a time comparison **not testable on shared cores**. A claim is no when "
             "any comparison is, yes when every one is (the unconverged forms likewise, a plain no or yes first), "
             "not testable when one is not testable.")


def _side(v: Value, dec: int) -> str:
    text = f"{v.label} {fmt(v.mean, dec)}"
    if v.std is not None:
        text += f" ± {fmt(v.std, dec)}"
    text += f" (n={v.n})"
    return text + (f" [wall {fmt(v.wall, dec)}]" if v.wall is not None else "")


def _p(p: Optional[float]) -> str:
    return "" if p is None else f"{p:.3g}"


def ordering_table(v: Verdicts) -> Table:
    """Kendall's tau-b per column of the paper's tables (``orderings.csv``)."""
    return Table(
        title="Orderings: Kendall's τ-b between our means and the paper's values, per table column",
        columns=["Table", "Column", "cells", "τ-b", "p"],
        rows=[[o.table, o.column, str(o.n), o.text(), _p(o.p)] for o in v.orderings],
        csv_columns=["table", "column", "cells", "tau_b", "p"],
        csv_rows=[[o.table, o.column, o.n, rounded(o.tau), rounded(o.p)] for o in v.orderings])


def claim_table(v: Verdicts) -> Table:
    """Every claim and its comparisons (``verdicts.csv``: one row per comparison)."""
    rows, csv_rows = [], []
    for r in v.claims:
        dec = 2 if r.claim.measure == "time" else v.decimals
        ours = "; ".join(f"{c.what}: {_side(c.winner, dec)} vs {_side(c.loser, dec)}"
                         + (f", p = {_p(c.p)} (Holm {_p(c.p_holm)})" if c.p is not None else "")
                         + f" → {c.verdict}" + (f" ({c.reason})" if c.reason else "") for c in r.comparisons)
        rows.append([r.text, r.claim.source, r.measure_name, ours, r.verdict])
        for c in r.comparisons:
            csv_rows.append([r.claim.id, r.text, c.what, c.winner.label, rounded(c.winner.mean),
                             rounded(c.winner.std), c.winner.n, c.loser.label, rounded(c.loser.mean), rounded(c.loser.std), c.loser.n, rounded(c.p),
                             rounded(c.p_holm), c.verdict, c.reason, r.verdict])
    return Table(
        title="The paper's claims", columns=["Claim", "Paper", "Measure", "Ours (mean ± std, n seeds)", "Verdict"],
        rows=rows,
        csv_columns=["claim", "claim_text", "where", "winner", "winner_mean", "winner_std", "winner_n", "loser",
                     "loser_mean", "loser_std", "loser_n", "p", "p_holm", "verdict", "reason", "claim_verdict"],
        csv_rows=csv_rows)


def regime_table(v: Verdicts) -> Table:
    """Has each cell converged (``regimes.csv``)."""
    # the gradient column only where some run recorded its gradient sizes (runs before it did not)
    grads = any(g.grad_peak is not None for g in v.regimes.values())
    rows, csv_rows = [], []
    for cell, g in sorted(v.regimes.items()):
        state = g.state + (f" ({len(g.collapsed)} run(s) collapsed late)" if g.collapsed else "")
        late = f"{len(g.collapsed)} of {g.runs}" if g.runs else ""
        rows.append([cell, state, int_text(g.steps), fmt(g.slope, 3 if g.slope is not None and abs(g.slope) < 1
                                                           else 1, sign=True),
                     fmt(g.loss, 3), fmt(g.guess_loss, 3), late]
                    + ([fmt(g.grad_peak, 0)] if grads else []))
        csv_rows.append([cell, g.state, g.steps, rounded(g.slope), rounded(g.loss), rounded(g.guess_loss),
                         len(g.collapsed) if g.runs else "", g.runs or ""]
                        + ([rounded(g.grad_peak)] if grads else []) + [g.detail])
    grad_title = (f"largest gradient before clipping (after the first {regime_mod.WARMUP_PART:.0%} of "
                  "updates)")
    return Table(
        title="Has each cell converged? (the regime rule)",
        columns=["Cell", "Regime", "updates", "improvement / 1k updates (last quarter)", "train loss",
                 "guessing loss", "collapsed late"] + ([grad_title] if grads else []), rows=rows,
        csv_columns=["cell", "regime", "steps", "slope_per_1k", "train_loss", "guess_loss", "collapsed", "runs"]
        + (["grad_norm_peak"] if grads else []) + ["detail"],
        csv_rows=csv_rows)


def markdown(v: Verdicts) -> str:
    """The report's Verdicts section."""
    lines = ["## Verdicts", "",
             f"Whether the paper's orderings and claims hold in these runs, and whether their budget can tell. "
             f"Rule: {RULE_TEXT} CSV: [`verdicts.csv`](verdicts.csv), [`orderings.csv`](orderings.csv), "
             "[`regimes.csv`](regimes.csv).", ""]
    if v.orderings:
        t = ordering_table(v)
        lines += [f"**{t.title}**", "", to_markdown(t).rstrip("\n"), ""]
    if v.claims:
        t = claim_table(v)
        lines += [f"**{t.title}**", "", to_markdown(t).rstrip("\n"), ""]
    else:
        lines += ["No claim of the paper compares cells that this study has run.", ""]
    if v.regimes:
        t = regime_table(v)
        lines += [f"**{t.title}**", "", to_markdown(t).rstrip("\n"), ""]
    lines += [f"**Compute.** {v.compute.text()}", ""]
    return "\n".join(lines)


def write(v: Verdicts, folder: str) -> List[str]:
    """``verdicts.csv``, ``orderings.csv`` and ``regimes.csv`` in ``folder``; returns their paths."""
    files = []
    for name, t in (("verdicts.csv", claim_table(v)), ("orderings.csv", ordering_table(v)),
                    ("regimes.csv", regime_table(v))):
        path = os.path.join(folder, name)
        atomic.write_text(path, to_csv_text(t.csv_columns, [dict(zip(t.csv_columns, r)) for r in t.csv_rows]))
        files.append(path)
    return files
