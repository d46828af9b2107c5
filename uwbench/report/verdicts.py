"""Verdicts that fit a reduced run: do the paper's orderings and claims hold in our numbers?

A shortened run cannot match the paper's absolute accuracies, but it can say whether the paper's
orderings hold:

- ``orderings``: per column of the paper's table (``tables.paper_tables``), Kendall's tau-b between our
  cell means and the paper's values (``kendall_tau_b``; "n/a" with fewer than two cells or when one side
  is all ties).
- ``CLAIMS``: the paper's claims, each as data (which cells it compares, on which measure, which side
  should win). A claim is checked on every pair of cells it applies to (the same model, controller, task,
  T and D unless it says otherwise); claims with no such pair in a study are skipped.
- ``compute``: what the study's runs cost (core-hours, updates, seeds).

The rule, one for every comparison (``compare``): a side's value is its mean +- std over the finished
final seeds. **yes**: the claimed winner is better and the two intervals do not overlap; **no**: the claimed
winner is worse and the intervals do not overlap; **inconclusive**: the intervals overlap, or a side has
fewer than ``MIN_SEEDS`` seeds (no spread to judge by), or (time) the two sides ran on different devices.
A claim is **yes** when every comparison is yes, **no** when at least one is no (the paper states it for
each of them), inconclusive otherwise. The ablation's claim (UW helps most at compression ratios of about
10-40%, paper Section 3.1 and Fig. 2 a, c) compares, per model, controller, task and T, the largest gain
of UW over regular writing inside that window with the largest outside it, each gain with the spread
std_UW + std_regular, under the same rule.
"""
from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from uwbench.report import tables
from uwbench.report.runs import to_csv_text
from uwbench.report.study import StudyView

YES, NO, INCONCLUSIVE = "yes", "no", "inconclusive"
MIN_SEEDS = 2
TWIN_AXES = ("model", "controller", "task", "seq_len", "memory_size")  # what a writer comparison holds fixed
SERIES_AXES = ("model", "controller", "task", "seq_len")  # a series over D (the ablation's curves)
SINUSOID_TASKS = ("sinusoid", "sinusoid_noisy")
PIXEL_TASKS = ("pixel_mnist", "pixel_mnist_permuted", "digits", "digits_permuted")  # Table 3 and its stand-in


# --------------------------------------------------------------------------------------------------
# Kendall's tau-b
# --------------------------------------------------------------------------------------------------


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> Optional[float]:
    """Kendall's tau-b of paired values, ties counted (Kendall 1945): (C - D) / sqrt((n0 - n1)(n0 - n2)),
    n0 = n(n-1)/2 pairs, n1 / n2 the pairs tied in x / in y. None when it is undefined (n < 2, or every
    value of one side tied)."""
    if len(x) != len(y):
        raise ValueError(f"kendall_tau_b needs paired values, got {len(x)} and {len(y)}")
    n = len(x)
    if n < 2:
        return None
    concordant = discordant = tied_x = tied_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = _sign(x[i] - x[j]), _sign(y[i] - y[j])
            if dx == 0:
                tied_x += 1
            if dy == 0:
                tied_y += 1
            if dx and dy:
                if dx == dy:
                    concordant += 1
                else:
                    discordant += 1
    n0 = n * (n - 1) // 2
    denom = math.sqrt((n0 - tied_x) * (n0 - tied_y))
    if denom == 0:
        return None
    return (concordant - discordant) / denom


def _sign(v: float) -> int:
    return (v > 0) - (v < 0)


@dataclass
class Ordering:
    table: str  # the paper table block's title
    column: str  # the column group (e.g. "Copy T=50")
    n: int  # cells with both our mean and the paper's value
    tau: Optional[float]

    def text(self) -> str:
        if self.tau is not None:
            return f"{self.tau:+.2f}"
        return "n/a (fewer than 2 cells)" if self.n < 2 else "n/a (all tied)"


def orderings(blocks: Sequence[tables.Table]) -> List[Ordering]:
    """Per column group of each paper-layout table: tau-b between our means and the paper's values."""
    out = []
    for t in blocks:
        cols = list(t.csv_columns)
        for i, name in enumerate(cols):
            if not name.endswith(" mean") or f"{name[:-5]} paper" not in cols:
                continue
            group = name[:-5]
            j = cols.index(f"{group} paper")
            pairs = [(r[i], r[j]) for r in t.csv_rows if tables._isnum(r[i]) and tables._isnum(r[j])]
            if not any(tables._isnum(r[j]) for r in t.csv_rows):
                continue  # no paper values in this column: nothing to rank against
            tau = kendall_tau_b([a for a, _ in pairs], [b for _, b in pairs])
            out.append(Ordering(table=t.title, column=group, n=len(pairs), tau=tau))
    return out


# --------------------------------------------------------------------------------------------------
# Claims as data
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """Which cells are one side of a claim: a model (None: any) and writers (empty: any)."""

    model: Optional[str] = None
    writers: Tuple[str, ...] = ()

    def holds(self, row) -> bool:
        return (self.model is None or row["model"] == self.model) and (not self.writers or row["writer"] in self.writers)


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    source: str  # where the paper makes it
    winner: Side
    loser: Side
    same: Tuple[str, ...] = TWIN_AXES  # axes equal within a compared pair
    tasks: Tuple[str, ...] = ()  # the tasks it is made for (empty: any)
    measure: str = "metric"  # metric: the study's test metric | time: seconds per 100 updates (lower wins)
    window: Optional[Tuple[float, float]] = None  # ratio window: the gain must peak inside it


CLAIMS = (
    Claim("dnc-beats-lstm", "Regular DNC beats the LSTM", "Table 1",
          winner=Side("dnc", ("regular",)), loser=Side("lstm"), same=("task", "seq_len"), tasks=("copy", "reverse")),
    Claim("uw-beats-regular", "UW beats regular writing on copy and reverse", "Table 1",
          winner=Side(None, ("uniform",)), loser=Side(None, ("regular",)), tasks=("copy", "reverse")),
    Claim("cuw-beats-uw", "CUW beats UW on add and max", "Table 2",
          winner=Side(None, ("cached_uniform",)), loser=Side(None, ("uniform",)), tasks=("add", "max")),
    Claim("uw-cuw-cut-time", "UW and CUW cut training time (seconds per 100 updates) against regular writing",
          "Section 3.1, Fig. 2 (b, d)", winner=Side(None, ("uniform", "cached_uniform")),
          loser=Side(None, ("regular",)), measure="time"),
    Claim("uw-gain-peaks", "In the ablation, UW helps most at compression ratios of about 10-40%",
          "Section 3.1, Fig. 2 (a, c)", winner=Side(None, ("uniform",)), loser=Side(None, ("regular",)),
          tasks=("double",), window=(0.10, 0.40)),
    Claim("uw-beats-regular-ablation", "In the ablation, UW beats regular writing in every configuration",
          "Section 3.1, Fig. 2 (a, c)", winner=Side(None, ("uniform",)), loser=Side(None, ("regular",)),
          tasks=("double",)),
    Claim("uw-cuw-beat-regular-sinusoid", "On sinusoid regression UW and CUW beat regular writing",
          "Section 3.4, Fig. 3", winner=Side(None, ("uniform", "cached_uniform")), loser=Side(None, ("regular",)),
          tasks=SINUSOID_TASKS),
    Claim("uw-cuw-beat-lstm-sinusoid", "On sinusoid regression UW and CUW beat the LSTM", "Section 3.4, Fig. 3",
          winner=Side(None, ("uniform", "cached_uniform")), loser=Side("lstm"), same=("task", "seq_len"),
          tasks=SINUSOID_TASKS),
    Claim("cuw-beats-uw-noisy", "On noisy sinusoids CUW beats UW", "Section 3.4, Fig. 3 (b)",
          winner=Side(None, ("cached_uniform",)), loser=Side(None, ("uniform",)), tasks=("sinusoid_noisy",)),
    Claim("uw-cuw-beat-dnc-pixels", "On pixel sequences UW and CUW beat the regular DNC at every memory size it has",
          "Table 3", winner=Side("dnc", ("uniform", "cached_uniform")), loser=Side("dnc", ("regular",)),
          same=("model", "controller", "task", "seq_len"), tasks=PIXEL_TASKS),
)


@dataclass
class Value:
    """One side of a comparison: mean, std, seeds."""

    mean: Optional[float]
    std: Optional[float]
    n: int
    label: str = ""

    def interval(self) -> Optional[Tuple[float, float]]:
        if self.mean is None or self.std is None:
            return None
        return self.mean - self.std, self.mean + self.std


@dataclass
class Comparison:
    what: str  # e.g. "Copy T=50 D=4"
    winner: Value
    loser: Value
    verdict: str
    reason: str = ""


@dataclass
class ClaimResult:
    claim: Claim
    comparisons: List[Comparison]
    verdict: str
    measure_name: str = ""


def compare(winner: Value, loser: Value, higher_better: bool, same_device: bool = True) -> Tuple[str, str]:
    """The one rule: (verdict, reason). See the module docstring."""
    if winner.mean is None or loser.mean is None:
        return INCONCLUSIVE, "a side has no value"
    if min(winner.n, loser.n) < MIN_SEEDS or winner.interval() is None or loser.interval() is None:
        return INCONCLUSIVE, f"fewer than {MIN_SEEDS} seeds on a side"
    if not same_device:
        return INCONCLUSIVE, "timed on different devices"
    (wl, wh), (ll, lh) = winner.interval(), loser.interval()
    if wl <= lh and ll <= wh:
        return INCONCLUSIVE, "mean ± std intervals overlap"
    better = winner.mean > loser.mean if higher_better else winner.mean < loser.mean
    return (YES, "") if better else (NO, "")


def combine(verdicts: Sequence[str]) -> str:
    """A claim's verdict from its comparisons: yes if all yes, no if any no, else inconclusive."""
    if verdicts and all(v == YES for v in verdicts):
        return YES
    if any(v == NO for v in verdicts):
        return NO
    return INCONCLUSIVE


def _num(v) -> Optional[float]:
    return float(v) if tables._isnum(v) else None


def _value(row, measure: str, label: str) -> Value:
    if measure == "time":
        return Value(_num(row["sec100_mean"]), _num(row["sec100_std"]), int(row["n"]), label)
    return Value(_num(row["mean"]), _num(row["std"]), int(row["n"]), label)


def _where(row, axes: Sequence[str]) -> str:
    """Where a comparison is made: the task, T and D of ``axes`` (the labels name the controller where needed)."""
    return tables.column_label(row, [a for a in ("task", "seq_len", "memory_size") if a in axes]) or row["cell"]


def evaluate(claim: Claim, summary: pd.DataFrame, metric: str = "accuracy") -> Optional[ClaimResult]:
    """Check one claim on the report's cell table (``tables.summarize``); None when no cells apply."""
    done = summary[summary["state"] == tables.OK]
    if claim.tasks:
        done = done[done["task"].isin(claim.tasks)]
    info = tables.metric_info(metric)
    higher = False if claim.measure == "time" else info["higher_better"]
    name = "s / 100 updates" if claim.measure == "time" else tables.cap(info["name"])
    flags = tables.label_flags(summary)
    winners = [r for _, r in done.iterrows() if claim.winner.holds(r)]
    losers = [r for _, r in done.iterrows() if claim.loser.holds(r)]

    def key(r, axes):
        return tuple(str(r[a]) for a in axes)

    if claim.window is not None:
        comps = _window_comparisons(claim, winners, losers, flags, info["higher_better"])
    else:
        comps = []
        for w in winners:
            for lo in losers:
                if key(w, claim.same) != key(lo, claim.same):
                    continue
                wv = _value(w, claim.measure, tables.model_label(w, **flags))
                lv = _value(lo, claim.measure, tables.model_label(lo, **flags))
                same_device = claim.measure != "time" or str(w["device"]) == str(lo["device"])
                verdict, reason = compare(wv, lv, higher, same_device)
                comps.append(Comparison(_where(w, claim.same), wv, lv, verdict, reason))
    if not comps:
        return None
    return ClaimResult(claim, comps, combine([c.verdict for c in comps]), name)


def _window_comparisons(claim: Claim, winners, losers, flags, higher_better: bool) -> List[Comparison]:
    """Per series over D: the largest gain of the winner's writer over its twin inside the ratio window
    against the largest outside it (a gain is an improvement: lower is better for an MSE)."""
    lo_w, hi_w = claim.window
    twins = {tuple(str(r[a]) for a in TWIN_AXES): r for r in losers}
    series: Dict[tuple, List[tuple]] = {}
    for w in winners:
        twin = twins.get(tuple(str(w[a]) for a in TWIN_AXES))
        ratio = _num(w["compression_ratio"])
        if twin is None or ratio is None or _num(w["mean"]) is None or _num(twin["mean"]) is None:
            continue
        gain = (float(w["mean"]) - float(twin["mean"])) * (1.0 if higher_better else -1.0)
        stds = (_num(w["std"]), _num(twin["std"]))
        spread = None if None in stds else stds[0] + stds[1]
        n = min(int(w["n"]), int(twin["n"]))
        series.setdefault(tuple(str(w[a]) for a in SERIES_AXES), []).append((ratio, gain, spread, n, w))
    comps = []
    for points in series.values():
        inside = [p for p in points if lo_w - 1e-9 <= p[0] <= hi_w + 1e-9]
        outside = [p for p in points if not (lo_w - 1e-9 <= p[0] <= hi_w + 1e-9)]
        if not inside or not outside:
            continue
        best_in = max(inside, key=lambda p: p[1])
        best_out = max(outside, key=lambda p: p[1])
        row = best_in[4]
        label = tables.model_label(row, **flags)

        def value(p, where):
            return Value(p[1], p[2], p[3], f"gain at (D+1)/T = {p[0]:.0%} ({where})")

        wv, lv = value(best_in, "inside"), value(best_out, "outside")
        verdict, reason = compare(wv, lv, higher_better=True)
        what = f"{label} vs regular writing, {_where(row, SERIES_AXES)}"
        comps.append(Comparison(what, wv, lv, verdict, reason))
    return comps


def claim_results(summary: pd.DataFrame, metric: str = "accuracy", claims: Sequence[Claim] = CLAIMS) -> List[ClaimResult]:
    return [r for r in (evaluate(c, summary, metric) for c in claims) if r is not None]


# --------------------------------------------------------------------------------------------------
# Compute
# --------------------------------------------------------------------------------------------------


THREAD_COLUMNS = ("threads", "torch_threads")  # read when the snapshot records a thread count


@dataclass
class Compute:
    core_hours: float
    gpu_hours: float
    n_runs: int
    n_timed: int
    n_trials: int
    n_finals: int
    updates: List[int]
    seeds: List[int]
    seeds_per_cell: int
    threads_recorded: bool

    def text(self) -> str:
        parts = [f"{self.core_hours:.2f} CPU core-hours" + (f" and {self.gpu_hours:.2f} GPU-hours" if self.gpu_hours else "")
                 + f" over {_count(self.n_runs, 'run')} ({_count(self.n_trials, 'search trial')}, "
                 f"{_count(self.n_finals, 'final run')}; {self.n_timed} with recorded times): training plus "
                 "evaluation wall time"
                 + (" × each run's threads" if self.threads_recorded else
                    " × 1 thread per CPU run (the trainer's CPU default; runs.csv records no thread count)")]
        if self.updates:
            lo, hi = self.updates[0], self.updates[-1]
            parts.append(f"{lo:,} updates per final run" if lo == hi else f"{lo:,}-{hi:,} updates per final run")
        if self.seeds:
            parts.append(f"final seeds {', '.join(str(s) for s in self.seeds)} (up to {self.seeds_per_cell} per cell)")
        return "; ".join(parts) + "."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def compute(runs: pd.DataFrame, curves: pd.DataFrame) -> Compute:
    """Core-hours (training + evaluation seconds × threads, CPU runs; GPU runs as GPU-hours), updates per
    final run (the last step of its learning curve) and the final seeds."""
    if len(runs) == 0:
        return Compute(0.0, 0.0, 0, 0, 0, 0, [], [], 0, False)
    secs = runs["train_seconds"].fillna(0.0).astype(float) + runs["eval_seconds"].fillna(0.0).astype(float)
    timed = (runs["train_seconds"].notna() | runs["eval_seconds"].notna())
    col = next((c for c in THREAD_COLUMNS if c in runs.columns and runs[c].notna().any()), None)
    threads = runs[col].astype(float).fillna(1.0) if col else pd.Series(1.0, index=runs.index)
    gpu = runs["device"].map(lambda d: isinstance(d, str) and d.startswith("cuda"))
    core_h = float((secs * threads)[timed & ~gpu].sum()) / 3600.0
    gpu_h = float(secs[timed & gpu].sum()) / 3600.0
    finals = runs[runs["role"] == "final"]
    updates: List[int] = []
    if len(curves) and len(finals):
        mine = curves[curves["run_id"].isin(set(finals["run_id"]))]
        if len(mine):
            updates = sorted({int(v) for v in mine.groupby("run_id")["step"].max()})
    done = finals[finals["status"] == "finished"]
    seeds = sorted({int(s) for s in done["seed"] if tables._isnum(s)})
    per_cell = int(done.groupby("cell")["seed"].nunique().max()) if len(done) else 0
    return Compute(core_h, gpu_h, len(runs), int(timed.sum()), int((runs["role"] == "trial").sum()), len(finals),
                   updates, seeds, per_cell, col is not None)


# --------------------------------------------------------------------------------------------------
# The report's section
# --------------------------------------------------------------------------------------------------


@dataclass
class Verdicts:
    orderings: List[Ordering]
    claims: List[ClaimResult]
    compute: Compute
    decimals: int = 1
    files: List[str] = field(default_factory=list)

    def ordering_table(self) -> tables.Table:
        return tables.Table(
            title="Orderings: Kendall's τ-b between our means and the paper's values, per table column",
            columns=["Table", "Column", "cells", "τ-b"],
            rows=[[o.table, o.column, str(o.n), o.text()] for o in self.orderings],
            csv_columns=["table", "column", "cells", "tau_b"],
            csv_rows=[[o.table, o.column, o.n, "" if o.tau is None else round(o.tau, 6)] for o in self.orderings])

    def claim_table(self) -> tables.Table:
        rows, csv_rows = [], []
        for r in self.claims:
            dec = 2 if r.claim.measure == "time" else self.decimals
            ours = "; ".join(f"{c.what}: {_side(c.winner, dec)} vs {_side(c.loser, dec)} → {c.verdict}"
                             + (f" ({c.reason})" if c.reason else "") for c in r.comparisons)
            rows.append([r.claim.text, r.claim.source, r.measure_name, ours, r.verdict])
            for c in r.comparisons:
                csv_rows.append([r.claim.id, c.what, c.winner.label, _r(c.winner.mean), _r(c.winner.std), c.winner.n,
                                 c.loser.label, _r(c.loser.mean), _r(c.loser.std), c.loser.n, c.verdict, c.reason,
                                 r.verdict])
        return tables.Table(
            title="The paper's claims", columns=["Claim", "Paper", "Measure", "Ours (mean ± std, n seeds)", "Verdict"],
            rows=rows,
            csv_columns=["claim", "where", "winner", "winner_mean", "winner_std", "winner_n", "loser", "loser_mean",
                         "loser_std", "loser_n", "verdict", "reason", "claim_verdict"],
            csv_rows=csv_rows)

    def markdown(self) -> str:
        lines = ["## Verdicts", "",
                 "Whether the paper's orderings and claims hold in these (reduced) runs. Rule: each side is its "
                 f"mean ± std over the finished final seeds; **yes** / **no** when the intervals do not overlap "
                 f"(the claimed winner better / worse), **inconclusive** when they overlap, a side has fewer than "
                 f"{MIN_SEEDS} seeds, or (time) the sides ran on different devices. A claim is yes when every "
                 "comparison is, no when any is. CSV: [`verdicts.csv`](verdicts.csv), "
                 "[`orderings.csv`](orderings.csv).", ""]
        if self.orderings:
            t = self.ordering_table()
            lines += [f"**{t.title}**", "", tables.to_markdown(t).rstrip("\n"), ""]
        if self.claims:
            t = self.claim_table()
            lines += [f"**{t.title}**", "", tables.to_markdown(t).rstrip("\n"), ""]
        else:
            lines += ["No claim of the paper compares cells that this study has run.", ""]
        lines += [f"**Compute.** {self.compute.text()}", ""]
        return "\n".join(lines)

    def html(self) -> str:
        parts = ["<h2>Verdicts</h2>\n",
                 f"<p>Each side is its mean ± std over the finished final seeds: yes / no when the intervals do not "
                 f"overlap, inconclusive when they overlap or a side has fewer than {MIN_SEEDS} seeds (or, for time, "
                 "the sides ran on different devices). A claim is yes when every comparison is, no when any is.</p>\n"]
        if self.orderings:
            parts.append(tables.to_html(self.ordering_table()))
        if self.claims:
            parts.append(tables.to_html(self.claim_table()))
        parts.append(f"<p><b>Compute.</b> {html.escape(self.compute.text())}</p>\n")
        return "".join(parts)

    def write(self, folder: str, files: List[str]) -> None:
        for name, t in (("verdicts.csv", self.claim_table()), ("orderings.csv", self.ordering_table())):
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(to_csv_text(t.csv_columns, [dict(zip(t.csv_columns, r)) for r in t.csv_rows]))
            files.append(path)


def _side(v: Value, dec: int) -> str:
    text = f"{v.label} {tables.fmt(v.mean, dec)}"
    if v.std is not None:
        text += f" ± {tables.fmt(v.std, dec)}"
    return text + f" (n={v.n})"


def _r(v) -> Any:
    return "" if v is None else round(float(v), 6)


def build(study: StudyView, summary: pd.DataFrame, runs: pd.DataFrame, curves: pd.DataFrame,
          blocks: Sequence[tables.Table], folder: str, files: List[str]) -> Verdicts:
    """The report's verdicts (orderings, claims, compute), their CSVs written into ``folder``."""
    v = Verdicts(orderings=orderings(blocks), claims=claim_results(summary, study.metric),
                 compute=compute(runs, curves), decimals=tables.metric_info(study.metric)["decimals"])
    v.write(folder, files)
    return v
