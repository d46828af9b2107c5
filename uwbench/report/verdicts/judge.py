"""Verdicts: do the paper's orderings and claims hold in our numbers, and can this budget tell?

- ``orderings``: per column of the paper's table (``rendering.tables.paper_tables``), Kendall's tau-b between our
  cell means and the paper's values, with its p-value (``stats.kendall``; "n/a" with fewer than two cells
  or when one side is all ties).
- ``claims.CLAIMS``: the paper's claims as data, each checked on every pair of cells it applies to.
- ``compute.compute``: what the study's runs cost.

The rule, one for every comparison of a claim:

1. **not testable at this budget** when a side of an accuracy or MSE comparison has not converged
   (``regime``: its curve still rises over its last quarter, or its training loss has not left the
   guessing level at a budget below the paper's). The reason names the side, its slope and its loss.
2. **not testable on shared cores** when a side of a time comparison has fewer than ``stats.MIN_SEEDS``
   runs that had a CPU core to themselves while they trained (``analysis.cores``): a run that took turns
   on a core spends more CPU time per update, so its time is not its writer's.
   **not testable with fewer than 2 seeds** (``stats.MIN_SEEDS``) when a side has fewer finished seeds
   than that (no test can be made of one value: more seeds would decide), **inconclusive** when (time)
   the sides ran on different devices.
3. Otherwise Welch's t-test of the two sides' per-seed values (``stats.welch``), and Holm's correction
   across the tested comparisons of the claim at ``stats.ALPHA`` (``stats.holm``): **yes** when rejected
   with the claimed winner better, **no** when rejected with it worse, **inconclusive** when the
   difference is within the noise. At the paper's own budget a side that has not converged is tested
   (the claim is a claim about that budget), and a significant result then reads **yes at the paper's
   budget, not converged** or **no at the paper's budget, not converged**: no report says a plain yes
   or no unless both sides have converged.

Time claims are judged on CPU seconds per 100 updates of the runs that had a core to themselves, with
wall seconds shown beside them; they need no convergence. A claim is **no** when any comparison is no,
else no-not-converged when any is, **yes** when every comparison is yes, yes-not-converged when every
one is a yes of either kind, **not testable at this budget** when a comparison is not
testable, **not testable on shared cores** when one is that, **not testable with fewer than 2 seeds** when
one is that, inconclusive otherwise. The ablation's claim (UW helps most at compression ratios of about
10-40%, paper Section 3.1 and Fig. 2 a, c) compares, per model, controller, task and T, the per-seed
gains of UW over regular writing at the best ratio inside that window with those at the best outside it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pandas as pd

from uwbench.report.analysis import cores
from uwbench.report.analysis.compute import Compute, compute
from uwbench.report.analysis.labels import cap, column_label, label_flags, model_label
from uwbench.report.analysis.summary import OK, cpu_recorded, metric_info
from uwbench.report.data.study import StudyView
from uwbench.report.verdicts import regime as regime_mod, stats
from uwbench.report.verdicts.claims import CLAIMS, SERIES_AXES, TWIN_AXES, Claim, Side  # noqa: F401 - re-exported
from uwbench.report.verdicts.regime import Regime
from uwbench.tabular import Table
from uwbench.values import is_number, number_or_none

YES, NO, INCONCLUSIVE, NOT_TESTABLE = "yes", "no", "inconclusive", "not testable at this budget"
# A significant difference at the paper's own budget with a side whose curve has not converged: the
# paper's claim as made (at that budget) is tested, but a plain yes or no would say more than the runs do.
YES_UNSETTLED, NO_UNSETTLED = "yes at the paper's budget, not converged", "no at the paper's budget, not converged"
# A time comparison whose side has fewer than MIN_SEEDS runs that had a core to themselves (``cores``): the
# others' CPU times include the cost of sharing one, so they do not measure the writer.
NOT_TIMED = "not testable on shared cores"
MIN_SEEDS = stats.MIN_SEEDS
# A comparison with a side of fewer than MIN_SEEDS finished seeds: Welch's test needs two values a side.
FEW_SEEDS = f"not testable with fewer than {MIN_SEEDS} seeds"


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


def orderings(blocks: Sequence[Table]) -> List[Ordering]:
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
    shared: int = 0  # time claims: the side's runs left out for having shared their core (``cores``)


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
    """The checks before a test: (a verdict that is not a test's, reason), or (None, '') when it can be tested."""
    if needs_regime:
        stuck = [v for v in (winner, loser) if v.regime is None or not v.regime.testable]
        if stuck:
            return NOT_TESTABLE, "; ".join(
                f"{v.label}: {v.regime.state if v.regime else regime_mod.UNKNOWN}"
                + (f", {v.regime.detail}" if v.regime and v.regime.detail else "") for v in stuck)
    short = [v for v in (winner, loser) if v.shared and v.n < MIN_SEEDS]
    if short:  # its runs' times are not the writer's: no more seeds would say so, runs with a core would
        return NOT_TIMED, "; ".join(
            f"{v.label}: {v.n} of {v.n + v.shared} runs had a core to themselves ({cores.floor_text()})"
            for v in short)
    if winner.mean is None or loser.mean is None:
        return INCONCLUSIVE, "a side has no value"
    few = [v for v in (winner, loser) if v.n < MIN_SEEDS]
    if few:
        return FEW_SEEDS, "; ".join(f"{v.label}: {v.n} seed{'s' if v.n != 1 else ''}" for v in few)
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
    if any(v == NOT_TIMED for v in verdicts):
        return NOT_TIMED
    if any(v == FEW_SEEDS for v in verdicts):
        return FEW_SEEDS
    return INCONCLUSIVE


def _value(row, measure: str, label: str, regimes: Mapping[str, Regime]) -> Value:
    if measure == "time":
        shared = int(row.get("n_shared_core") or 0)
        cpu = cpu_recorded(row)
        samples = tuple(row["cpu_samples"]) if cpu else tuple(row["wall_samples"])
        return _from_samples(samples, label + (" (CPU)" if cpu else " (wall)"),
                             wall=number_or_none(row["sec100_mean"]) if cpu else None, shared=shared)
    return _from_samples(tuple(row["samples"]), label, regime=regimes.get(row["cell"]))


def _from_samples(samples: Tuple[float, ...], label: str, **kw) -> Value:
    n = len(samples)
    mean = sum(samples) / n if n else None
    std = (sum((s - mean) ** 2 for s in samples) / (n - 1)) ** 0.5 if n > 1 else None
    return Value(mean, std, n, label, samples, **kw)


def _where(row, axes: Sequence[str]) -> str:
    """Where a comparison is made: the task, T and D of ``axes`` (the labels name the controller where needed)."""
    return column_label(row, [a for a in ("task", "seq_len", "memory_size") if a in axes]) or row["cell"]


def evaluate(claim: Claim, summary: pd.DataFrame, metric: str = "accuracy",
             regimes: Optional[Mapping[str, Regime]] = None) -> Optional[ClaimResult]:
    """Check one claim on the report's cell table (``summary.summarize``) and the cells' regimes (a cell
    without one counts as unknown: not testable); None when no cells apply."""
    regimes = regimes or {}
    done = summary[summary["state"] == OK]
    if claim.tasks:
        done = done[done["task"].isin(claim.tasks)]
    info = metric_info(metric)
    higher = False if claim.measure == "time" else info["higher_better"]
    name = "CPU s / 100 updates" if claim.measure == "time" else cap(info["name"])
    flags = label_flags(summary)
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
                wv = _value(w, claim.measure, model_label(w, **flags), regimes)
                lv = _value(lo, claim.measure, model_label(lo, **flags), regimes)
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
        what = f"{model_label(best_in[3], **flags)} vs regular writing, {_where(best_in[3], SERIES_AXES)}"
        comps.append(Comparison(what, wv, lv, verdict or "", reason))
    return comps


def cell_regimes(study: StudyView, summary: pd.DataFrame, curves: pd.DataFrame) -> Dict[str, Regime]:
    """The regime of every finished cell (``regime.regime``), with its task's guessing level where the task
    can be built here."""
    from uwbench.metrics import measure

    info = metric_info(study.metric)
    m = measure(info["measure"])
    out = {}
    for _, r in summary[summary["state"] == OK].iterrows():
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
# The report's verdicts
# --------------------------------------------------------------------------------------------------


@dataclass
class Verdicts:
    """A report's verdicts: the orderings, the claims, the cells' regimes, what the runs cost (the section and
    its CSVs are ``uwbench.report.rendering.verdict_tables``'s)."""

    orderings: List[Ordering]
    claims: List[ClaimResult]
    compute: Compute
    regimes: Dict[str, Regime] = field(default_factory=dict)
    decimals: int = 1


def build(study: StudyView, summary: pd.DataFrame, runs: pd.DataFrame, curves: pd.DataFrame,
          blocks: Sequence[Table]) -> Verdicts:
    """The report's verdicts (orderings of the paper-layout ``blocks``, claims, regimes, compute)."""
    regimes = cell_regimes(study, summary, curves)
    return Verdicts(orderings=orderings(blocks), claims=claim_results(summary, study.metric, regimes=regimes),
                    compute=compute(runs, curves), regimes=regimes, decimals=metric_info(study.metric)["decimals"])
