"""Verdicts: do the paper's orderings and claims hold in our numbers, and can this budget tell?

- ``orderings``: per column of the paper's table (``tables.paper_tables``), Kendall's tau-b between our
  cell means and the paper's values, with its p-value (``stats.kendall``; "n/a" with fewer than two cells
  or when one side is all ties).
- ``claims.CLAIMS``: the paper's claims as data, each checked on every pair of cells it applies to.
- ``compute.compute``: what the study's runs cost.

The rule, one for every comparison of a claim:

1. **not testable at this budget** when a side of an accuracy or MSE comparison has not converged
   (``regime``: its curve still rises over its last quarter, or its training loss has not left the
   guessing level at a budget below the paper's). The reason names the side, its slope and its loss.
2. **inconclusive** when a side has fewer than ``stats.MIN_SEEDS`` finished seeds, or (time) the sides
   ran on different devices.
3. Otherwise Welch's t-test of the two sides' per-seed values (``stats.welch``), and Holm's correction
   across the tested comparisons of the claim at ``stats.ALPHA`` (``stats.holm``): **yes** when rejected
   with the claimed winner better, **no** when rejected with it worse, **inconclusive** when the
   difference is within the noise. At the paper's own budget a side that has not converged is tested
   (the claim is a claim about that budget), and a significant result then reads **yes at the paper's
   budget, not converged** or **no at the paper's budget, not converged**: no report says a plain yes
   or no unless both sides have converged.

Time claims are judged on each run's CPU seconds per 100 updates (steady on a shared machine), with
wall seconds shown beside them; they need no convergence. A claim is **no** when any comparison is no,
else no-not-converged when any is, **yes** when every comparison is yes, yes-not-converged when every
one is a yes of either kind, **not testable at this budget** when a comparison is not
testable, inconclusive otherwise. The ablation's claim (UW helps most at compression ratios of about
10-40%, paper Section 3.1 and Fig. 2 a, c) compares, per model, controller, task and T, the per-seed
gains of UW over regular writing at the best ratio inside that window with those at the best outside it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pandas as pd

from uwbench import atomic
from uwbench.report import formats, stats, tables
from uwbench.report import regime as regime_mod
from uwbench.report.claims import CLAIMS, SERIES_AXES, TWIN_AXES, Claim, Side  # noqa: F401 - re-exported
from uwbench.report.compute import Compute, compute
from uwbench.report.regime import Regime
from uwbench.snapshot import to_csv_text
from uwbench.report.study import StudyView
from uwbench.values import is_number, number_or_none

YES, NO, INCONCLUSIVE, NOT_TESTABLE = "yes", "no", "inconclusive", "not testable at this budget"
# A significant difference at the paper's own budget with a side whose curve has not converged: the
# paper's claim as made (at that budget) is tested, but a plain yes or no would say more than the runs do.
YES_UNSETTLED, NO_UNSETTLED = "yes at the paper's budget, not converged", "no at the paper's budget, not converged"
MIN_SEEDS = stats.MIN_SEEDS


# --------------------------------------------------------------------------------------------------
# Orderings: Kendall's tau-b
# --------------------------------------------------------------------------------------------------


@dataclass
class Ordering:
    table: str  # the paper table block's title
    column: str  # the column group (e.g. "Copy T=50")
    n: int  # cells with both our mean and the paper's value
    tau: Optional[float]
    p: Optional[float] = None

    def text(self) -> str:
        if self.tau is not None:
            return f"{self.tau:+.2f}"
        return "n/a (fewer than 2 cells)" if self.n < 2 else "n/a (all tied)"


def orderings(blocks: Sequence[formats.Table]) -> List[Ordering]:
    """Per column group of each paper-layout table: tau-b between our means and the paper's values."""
    out = []
    for t in blocks:
        cols = list(t.csv_columns)
        for i, name in enumerate(cols):
            if not name.endswith(" mean") or f"{name[:-5]} paper" not in cols:
                continue
            group = name[:-5]
            j = cols.index(f"{group} paper")
            pairs = [(r[i], r[j]) for r in t.csv_rows if is_number(r[i]) and is_number(r[j])]
            if not any(is_number(r[j]) for r in t.csv_rows):
                continue  # no paper values in this column: nothing to rank against
            tau = stats.kendall([a for a, _ in pairs], [b for _, b in pairs])
            out.append(Ordering(table=t.title, column=group, n=len(pairs), tau=tau.tau, p=tau.p))
    return out


# --------------------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------------------


@dataclass
class Value:
    """One side of a comparison: its per-seed values (mean, std and n follow from them), its regime."""

    mean: Optional[float]
    std: Optional[float]
    n: int
    label: str = ""
    samples: Tuple[float, ...] = ()
    regime: Optional[Regime] = None
    wall: Optional[float] = None  # time claims: the mean wall seconds per 100 updates, shown beside


@dataclass
class Comparison:
    what: str  # e.g. "Copy T=50 D=4"
    winner: Value
    loser: Value
    verdict: str
    reason: str = ""
    p: Optional[float] = None  # Welch's two-sided p-value
    p_holm: Optional[float] = None  # Holm-adjusted across the claim's tested comparisons


@dataclass
class ClaimResult:
    claim: Claim
    comparisons: List[Comparison]
    verdict: str
    measure_name: str = ""
    tasks: Tuple[str, ...] = ()  # the tasks of the cells compared

    @property
    def text(self) -> str:
        """The claim as these runs test it (only the tasks they have: ``Claim.text_for``)."""
        return self.claim.text_for(self.tasks)


def gate(winner: Value, loser: Value, needs_regime: bool, same_device: bool = True) -> Tuple[Optional[str], str]:
    """The checks before a test: (NOT_TESTABLE or INCONCLUSIVE, reason), or (None, '') when it can be tested."""
    if needs_regime:
        stuck = [v for v in (winner, loser) if v.regime is None or not v.regime.testable]
        if stuck:
            return NOT_TESTABLE, "; ".join(
                f"{v.label}: {v.regime.state if v.regime else regime_mod.UNKNOWN}"
                + (f", {v.regime.detail}" if v.regime and v.regime.detail else "") for v in stuck)
    if winner.mean is None or loser.mean is None:
        return INCONCLUSIVE, "a side has no value"
    if min(winner.n, loser.n) < MIN_SEEDS:
        return INCONCLUSIVE, f"fewer than {MIN_SEEDS} seeds on a side"
    if not same_device:
        return INCONCLUSIVE, "timed on different devices"
    return None, ""


def decide(comps: List[Comparison], higher_better: bool) -> None:
    """Welch's test of every comparison the gate let through, Holm's correction across them, verdicts set."""
    tested = [c for c in comps if c.verdict == ""]
    tests = [stats.welch(c.winner.samples, c.loser.samples) for c in tested]
    pvals = [t.p for t in tests]
    rejected = stats.holm(pvals)
    adjusted = stats.holm_adjusted(pvals)
    for c, t, rej, adj in zip(tested, tests, rejected, adjusted):
        c.p, c.p_holm = t.p, adj
        if t.p is None:
            c.verdict, c.reason = INCONCLUSIVE, t.why
            continue
        better = c.winner.mean > c.loser.mean if higher_better else c.winner.mean < c.loser.mean
        if not rej:
            c.verdict, c.reason = INCONCLUSIVE, f"within the noise: Holm-adjusted p = {adj:.3g} ≥ {stats.ALPHA:g}"
        else:
            c.verdict = YES if better else NO
        unsettled = _unsettled(c)
        if unsettled:
            c.reason = "; ".join(filter(None, (c.reason, unsettled)))
            c.verdict = {YES: YES_UNSETTLED, NO: NO_UNSETTLED}.get(c.verdict, c.verdict)


def _unsettled(c: Comparison) -> str:
    """For a comparison tested at the paper's budget: the sides that had not converged there, or ''."""
    sides = [v for v in (c.winner, c.loser) if v.regime is not None and not v.regime.converged]
    return ("at the paper's budget, where " + "; ".join(
        f"{v.label} is {v.regime.state}" + (f" ({v.regime.brief})" if v.regime.brief else "") for v in sides)
            if sides else "")


def combine(verdicts: Sequence[str]) -> str:
    """A claim's verdict from its comparisons (module docstring)."""
    if any(v == NO for v in verdicts):
        return NO
    if any(v == NO_UNSETTLED for v in verdicts):
        return NO_UNSETTLED
    if verdicts and all(v == YES for v in verdicts):
        return YES
    if verdicts and all(v in (YES, YES_UNSETTLED) for v in verdicts):
        return YES_UNSETTLED
    if any(v == NOT_TESTABLE for v in verdicts):
        return NOT_TESTABLE
    return INCONCLUSIVE


def _value(row, measure: str, label: str, regimes: Mapping[str, Regime]) -> Value:
    if measure == "time":
        samples = tuple(row["cpu_samples"]) or tuple(row["wall_samples"])
        return _from_samples(samples, label + (" (CPU)" if row["cpu_samples"] else " (wall)"),
                             wall=number_or_none(row["sec100_mean"]) if row["cpu_samples"] else None)
    return _from_samples(tuple(row["samples"]), label, regime=regimes.get(row["cell"]))


def _from_samples(samples: Tuple[float, ...], label: str, **kw) -> Value:
    n = len(samples)
    mean = sum(samples) / n if n else None
    std = (sum((s - mean) ** 2 for s in samples) / (n - 1)) ** 0.5 if n > 1 else None
    return Value(mean, std, n, label, samples, **kw)


def _where(row, axes: Sequence[str]) -> str:
    """Where a comparison is made: the task, T and D of ``axes`` (the labels name the controller where needed)."""
    return tables.column_label(row, [a for a in ("task", "seq_len", "memory_size") if a in axes]) or row["cell"]


def evaluate(claim: Claim, summary: pd.DataFrame, metric: str = "accuracy",
             regimes: Optional[Mapping[str, Regime]] = None) -> Optional[ClaimResult]:
    """Check one claim on the report's cell table (``tables.summarize``) and the cells' regimes (a cell
    without one counts as unknown: not testable); None when no cells apply."""
    regimes = regimes or {}
    done = summary[summary["state"] == tables.OK]
    if claim.tasks:
        done = done[done["task"].isin(claim.tasks)]
    info = tables.metric_info(metric)
    higher = False if claim.measure == "time" else info["higher_better"]
    name = "CPU s / 100 updates" if claim.measure == "time" else tables.cap(info["name"])
    flags = tables.label_flags(summary)
    winners = [r for _, r in done.iterrows() if claim.winner.holds(r)]
    losers = [r for _, r in done.iterrows() if claim.loser.holds(r)]
    if claim.window is not None:
        comps = _window_comparisons(claim, winners, losers, flags, info["higher_better"], regimes)
    else:
        comps = []
        for w in winners:
            for lo in losers:
                if tuple(str(w[a]) for a in claim.same) != tuple(str(lo[a]) for a in claim.same):
                    continue
                wv = _value(w, claim.measure, tables.model_label(w, **flags), regimes)
                lv = _value(lo, claim.measure, tables.model_label(lo, **flags), regimes)
                same_device = claim.measure != "time" or str(w["device"]) == str(lo["device"])
                verdict, reason = gate(wv, lv, claim.measure != "time", same_device)
                comps.append(Comparison(_where(w, claim.same), wv, lv, verdict or "", reason))
    if not comps:
        return None
    decide(comps, higher_better=True if claim.window is not None else higher)
    tasks = tuple(sorted({str(r["task"]) for r in winners + losers}))
    return ClaimResult(claim, comps, combine([c.verdict for c in comps]), name, tasks)


def _gains(w, twin, sign: float) -> Tuple[float, ...]:
    """Per-seed gains of a writer over its twin (paired by position in seed order; a gain is an improvement)."""
    return tuple(sign * (a - b) for a, b in zip(w["samples"], twin["samples"]))


def _window_comparisons(claim: Claim, winners, losers, flags, higher_better: bool,
                        regimes: Mapping[str, Regime]) -> List[Comparison]:
    """Per series over D: the gains of the winner's writer over its twin at the ratio inside the window
    where the mean gain is largest, against those at the largest outside it."""
    lo_w, hi_w = claim.window
    twins = {tuple(str(r[a]) for a in TWIN_AXES): r for r in losers}
    sign = 1.0 if higher_better else -1.0
    series: Dict[tuple, List[tuple]] = {}
    for w in winners:
        twin = twins.get(tuple(str(w[a]) for a in TWIN_AXES))
        ratio = number_or_none(w["compression_ratio"])
        if twin is None or ratio is None or not w["samples"] or not twin["samples"]:
            continue
        gains = _gains(w, twin, sign)
        stuck = [regimes.get(c) for c in (w["cell"], twin["cell"])]
        series.setdefault(tuple(str(w[a]) for a in SERIES_AXES), []).append((ratio, gains, stuck, w))
    comps = []
    for points in series.values():
        inside = [p for p in points if lo_w - 1e-9 <= p[0] <= hi_w + 1e-9]
        outside = [p for p in points if not (lo_w - 1e-9 <= p[0] <= hi_w + 1e-9)]
        if not inside or not outside:
            continue
        best_in = max(inside, key=lambda p: sum(p[1]) / len(p[1]))
        best_out = max(outside, key=lambda p: sum(p[1]) / len(p[1]))

        def value(p, where):
            regs = [r for r in p[2] if r is None or not r.converged]
            reg = (regs[0] or Regime(regime_mod.UNKNOWN)) if regs else Regime(regime_mod.CONVERGED)
            return _from_samples(p[1], f"gain at (D+1)/T = {p[0]:.0%} ({where})", regime=reg)

        wv, lv = value(best_in, "inside"), value(best_out, "outside")
        verdict, reason = gate(wv, lv, needs_regime=True)
        what = f"{tables.model_label(best_in[3], **flags)} vs regular writing, {_where(best_in[3], SERIES_AXES)}"
        comps.append(Comparison(what, wv, lv, verdict or "", reason))
    return comps


def cell_regimes(study: StudyView, summary: pd.DataFrame, curves: pd.DataFrame) -> Dict[str, Regime]:
    """The regime of every finished cell (``regime.regime``), with its task's guessing level where the task
    can be built here."""
    from uwbench.metrics import measure

    info = tables.metric_info(study.metric)
    m = measure(info["measure"])
    out = {}
    for _, r in summary[summary["state"] == tables.OK].iterrows():
        spec_cell = study.cell(r["cell"])
        out[r["cell"]] = regime_mod.regime(
            curves, r["run_ids"], info["curve"], info["measure"], m.scale, m.higher_is_better,
            "points" if m.unit == "%" else m.unit,
            guess_loss=_guess_loss(spec_cell.task if spec_cell else {}),
            paper_steps=spec_cell.paper_steps if spec_cell else None)
    return out


def _guess_loss(task: Mapping[str, Any]) -> Optional[float]:
    if not task.get("name"):
        return None
    from uwbench.tasks.chance import chance_of

    try:
        return chance_of(task["name"], {k: v for k, v in task.items() if k != "name"}).loss
    except Exception:  # noqa: BLE001 - a task whose data is not on this machine: no guessing level
        return None


def claim_results(summary: pd.DataFrame, metric: str = "accuracy", claims: Sequence[Claim] = CLAIMS,
                  regimes: Optional[Mapping[str, Regime]] = None) -> List[ClaimResult]:
    return [r for r in (evaluate(c, summary, metric, regimes) for c in claims) if r is not None]


# --------------------------------------------------------------------------------------------------
# The report's section
# --------------------------------------------------------------------------------------------------


RULE_TEXT = ("each comparison is **not testable at this budget** when a side has not converged (its learning "
             "curve still rises or falls over its last quarter by more than 1 point of accuracy, or 5% of an "
             "MSE, per 1,000 updates, or its training loss has not left the guessing level at "
             "a budget below the paper's; a run whose training loss fell back to the guessing level after its "
             "best evaluation is read up to that evaluation, whose weights its test value measures); at the paper's "
             "own budget the comparison is tested as the paper made it, a side's unsettled curve is named "
             "beside the verdict, and a significant result reads **yes / no at the paper's budget, not "
             "converged** (never a plain yes or no while a side still moves); otherwise Welch's t-test of the per-seed values, Holm-corrected "
             f"across the claim's comparisons at α = {stats.ALPHA:g}: **yes** / **no** when significant (the "
             "claimed winner better / worse), **inconclusive** when not, or when a side has fewer than "
             f"{MIN_SEEDS} seeds. Time claims use CPU seconds per 100 updates (wall beside) and need no "
             "convergence. A claim is no when any comparison is, yes when every one is (the unconverged forms "
             "likewise, a plain no or yes first), not testable when one is not testable.")


@dataclass
class Verdicts:
    orderings: List[Ordering]
    claims: List[ClaimResult]
    compute: Compute
    regimes: Dict[str, Regime] = field(default_factory=dict)
    decimals: int = 1
    files: List[str] = field(default_factory=list)

    def ordering_table(self) -> formats.Table:
        return formats.Table(
            title="Orderings: Kendall's τ-b between our means and the paper's values, per table column",
            columns=["Table", "Column", "cells", "τ-b", "p"],
            rows=[[o.table, o.column, str(o.n), o.text(), _p(o.p)] for o in self.orderings],
            csv_columns=["table", "column", "cells", "tau_b", "p"],
            csv_rows=[[o.table, o.column, o.n, _r(o.tau), _r(o.p)] for o in self.orderings])

    def claim_table(self) -> formats.Table:
        rows, csv_rows = [], []
        for r in self.claims:
            dec = 2 if r.claim.measure == "time" else self.decimals
            ours = "; ".join(f"{c.what}: {_side(c.winner, dec)} vs {_side(c.loser, dec)}"
                             + (f", p = {_p(c.p)} (Holm {_p(c.p_holm)})" if c.p is not None else "")
                             + f" → {c.verdict}" + (f" ({c.reason})" if c.reason else "") for c in r.comparisons)
            rows.append([r.text, r.claim.source, r.measure_name, ours, r.verdict])
            for c in r.comparisons:
                csv_rows.append([r.claim.id, r.text, c.what, c.winner.label, _r(c.winner.mean), _r(c.winner.std), c.winner.n,
                                 c.loser.label, _r(c.loser.mean), _r(c.loser.std), c.loser.n, _r(c.p),
                                 _r(c.p_holm), c.verdict, c.reason, r.verdict])
        return formats.Table(
            title="The paper's claims", columns=["Claim", "Paper", "Measure", "Ours (mean ± std, n seeds)", "Verdict"],
            rows=rows,
            csv_columns=["claim", "claim_text", "where", "winner", "winner_mean", "winner_std", "winner_n", "loser", "loser_mean",
                         "loser_std", "loser_n", "p", "p_holm", "verdict", "reason", "claim_verdict"],
            csv_rows=csv_rows)

    def regime_table(self) -> formats.Table:
        # the gradient column only where some run recorded its gradient sizes (runs before it did not)
        grads = any(g.grad_peak is not None for g in self.regimes.values())
        rows, csv_rows = [], []
        for cell, g in sorted(self.regimes.items()):
            state = g.state + (f" ({len(g.collapsed)} run(s) collapsed late)" if g.collapsed else "")
            late = f"{len(g.collapsed)} of {g.runs}" if g.runs else ""
            rows.append([cell, state, _i(g.steps), formats.fmt(g.slope, 3 if g.slope is not None and abs(g.slope) < 1
                                                               else 1, sign=True),
                         formats.fmt(g.loss, 3), formats.fmt(g.guess_loss, 3), late]
                        + ([formats.fmt(g.grad_peak, 0)] if grads else []))
            csv_rows.append([cell, g.state, g.steps, _r(g.slope), _r(g.loss), _r(g.guess_loss),
                             len(g.collapsed) if g.runs else "", g.runs or ""]
                            + ([_r(g.grad_peak)] if grads else []) + [g.detail])
        grad_title = (f"largest gradient before clipping (after the first {regime_mod.WARMUP_PART:.0%} of "
                      "updates)")
        return formats.Table(
            title="Has each cell converged? (the regime rule)",
            columns=["Cell", "Regime", "updates", "improvement / 1k updates (last quarter)", "train loss",
                     "guessing loss", "collapsed late"] + ([grad_title] if grads else []), rows=rows,
            csv_columns=["cell", "regime", "steps", "slope_per_1k", "train_loss", "guess_loss", "collapsed", "runs"]
            + (["grad_norm_peak"] if grads else []) + ["detail"],
            csv_rows=csv_rows)

    def markdown(self) -> str:
        lines = ["## Verdicts", "",
                 f"Whether the paper's orderings and claims hold in these runs, and whether their budget can tell. "
                 f"Rule: {RULE_TEXT} CSV: [`verdicts.csv`](verdicts.csv), [`orderings.csv`](orderings.csv), "
                 "[`regimes.csv`](regimes.csv).", ""]
        if self.orderings:
            t = self.ordering_table()
            lines += [f"**{t.title}**", "", formats.to_markdown(t).rstrip("\n"), ""]
        if self.claims:
            t = self.claim_table()
            lines += [f"**{t.title}**", "", formats.to_markdown(t).rstrip("\n"), ""]
        else:
            lines += ["No claim of the paper compares cells that this study has run.", ""]
        if self.regimes:
            t = self.regime_table()
            lines += [f"**{t.title}**", "", formats.to_markdown(t).rstrip("\n"), ""]
        lines += [f"**Compute.** {self.compute.text()}", ""]
        return "\n".join(lines)

    def write(self, folder: str, files: List[str]) -> None:
        for name, t in (("verdicts.csv", self.claim_table()), ("orderings.csv", self.ordering_table()),
                        ("regimes.csv", self.regime_table())):
            path = os.path.join(folder, name)
            atomic.write_text(path, to_csv_text(t.csv_columns, [dict(zip(t.csv_columns, r)) for r in t.csv_rows]))
            files.append(path)


def _side(v: Value, dec: int) -> str:
    text = f"{v.label} {formats.fmt(v.mean, dec)}"
    if v.std is not None:
        text += f" ± {formats.fmt(v.std, dec)}"
    text += f" (n={v.n})"
    return text + (f" [wall {formats.fmt(v.wall, dec)}]" if v.wall is not None else "")


def _p(p: Optional[float]) -> str:
    return "" if p is None else f"{p:.3g}"


def _i(v) -> str:
    return "" if v is None else str(int(v))


def _r(v) -> Any:
    return "" if v is None else round(float(v), 6)


def build(study: StudyView, summary: pd.DataFrame, runs: pd.DataFrame, curves: pd.DataFrame,
          blocks: Sequence[formats.Table], folder: str, files: List[str]) -> Verdicts:
    """The report's verdicts (orderings, claims, regimes, compute), their CSVs written into ``folder``."""
    regimes = cell_regimes(study, summary, curves)
    v = Verdicts(orderings=orderings(blocks), claims=claim_results(summary, study.metric, regimes=regimes),
                 compute=compute(runs, curves), regimes=regimes,
                 decimals=tables.metric_info(study.metric)["decimals"])
    v.write(folder, files)
    return v
