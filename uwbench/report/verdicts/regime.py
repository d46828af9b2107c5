"""Has a cell learned what its budget lets it learn? The regime rule behind "not testable at this budget".

A comparison between two cells means something only when both have stopped improving: a curve still
rising at the last evaluation ranks the cells by how fast they learn, not by where they end, and the
paper's claims are about where they end. So before a claim is tested, each side's regime is read off
its learning curves (``curves.csv``: the evaluation metric and the training loss at every evaluation):

- **rising**: the seed-mean evaluation curve still improves over the last quarter of the run (steps from
  3/4 of the last step on). Its least-squares slope there, in the improving direction, per 1,000
  updates, is above the measure's threshold (``RISE``): 1.0 percentage point of accuracy, or 5% of the
  level for an MSE.
- **at the guessing level**: the seed-mean training loss over the last quarter is at least
  ``GUESS_RATIO`` (95%) of the loss of the best input-blind predictor (``uwbench.tasks.chance``). A flat
  curve there can be the plateau that precedes learning (copy sits on it for ~2,500 updates at T=50), so
  it counts against testing unless the run had the paper's own budget, where the paper's numbers end
  too (the paper's LSTM ends at its guessing level on copy).
- **converged**: none of these. Also **unknown** when the last quarter has fewer than ``MIN_POINTS`` evaluations.

A side that has not converged makes a comparison **not testable at this budget**, unless its runs made
the paper's number of updates: the paper's claims are claims at that budget, so there the comparison is
tested as the paper made it, and the side's state is reported beside the verdict (``Regime.testable``).

A run **collapsed** when its training loss had clearly left the guessing level (``LEARNED_RATIO``) and is
back at it at some evaluation after its best one, even if it climbed part of the way back later: a late divergence (4 of the 10 paper-size DNC and DNC+UW runs on copy did this, back at the
guessing level from 4,750 to 9,750 of their 10,000 updates after reaching 62-87%: docs/findings.md). Its test value measures the weights of its best evaluation
(the trainer tests the best checkpoint), so its curve is read up to that evaluation, and the cell's
regime names how many of its runs collapsed and when. Slopes are read per run, each over the last
quarter of its own curve, and averaged (for runs evaluated at the same steps, the slope of the
seed-mean curve); the training loss likewise.

Why these numbers (read off the committed curves): the reduced runs of Tables 1-3 and the ablation end
with copy/reverse/add/max gaining 2-25 points per 1,000 updates, far above 1.0; a flat curve's slope,
estimated from 10 evaluations of 320 sequences each, scatters by about half a point per 1,000 updates,
so 1.0 is about two of its standard errors. The sinusoid runs still fall by 27-290% of their level per
1,000 updates at 800 updates, far above 5%.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Tuple

import numpy as np
import pandas as pd

from uwbench import metrics

CONVERGED, RISING, FALLING, AT_GUESS, UNKNOWN = ("converged", "rising", "falling", "at the guessing level",
                                                 "unknown")
LAST_PART = 0.25  # the tail of the run whose slope is read
MIN_POINTS = 3  # evaluations the tail needs for a slope
GUESS_RATIO = 0.95  # training loss at or above this share of the guessing loss: not left it
LEARNED_RATIO = 0.75  # a collapse needs a run that had learned: its training loss this far below guessing
WARMUP_PART = 0.1  # the start of a run whose gradient sizes are not counted in ``Regime.grad_peak``


@dataclass(frozen=True)
class Rise:
    """How much improvement per 1,000 updates still counts as converged."""

    limit: float
    relative: bool  # True: a share of the curve's level; False: in the measure's display units

    def text(self, unit: str) -> str:
        if self.relative:
            return f"{self.limit:.0%} of its level"
        if unit and self.limit == 1 and unit.endswith("s"):  # "1 point", not "1 points"
            unit = unit[:-1]
        return f"{self.limit:g}{' ' + unit if unit else ''}"


RISE = {name: Rise(limit, relative=metrics.MEASURES[name].relative)  # how a measure's differences read
        for name, limit in (("accuracy", 1.0), ("mse", 0.05))}


@dataclass(frozen=True)
class Regime:
    state: str
    steps: Optional[int] = None  # the last evaluated step
    slope: Optional[float] = None  # improvement per 1,000 updates over the last quarter (display units, or a share)
    loss: Optional[float] = None  # mean training loss over the last quarter
    guess_loss: Optional[float] = None  # the guessing level's loss
    detail: str = ""
    collapsed: Tuple[int, ...] = ()  # the best-evaluation steps of the runs that collapsed after them
    runs: int = 0  # the runs whose curves were read
    paper_budget: bool = False  # the runs made the paper's number of updates
    brief: str = ""  # the slope (and any collapse) in a few words, for a verdict's reason
    # the largest gradient before clipping (``metrics.GRAD_NORM``) over the cell's runs after their first
    # WARMUP_PART of updates (the first windows of a fresh model are large and harmless); None if not recorded
    grad_peak: Optional[float] = None

    @property
    def converged(self) -> bool:
        return self.state == CONVERGED

    @property
    def testable(self) -> bool:
        """Whether a comparison may be tested: converged, or at the paper's own budget, where the paper's
        claim is a claim about that budget (the state is reported beside the verdict)."""
        return self.converged or self.paper_budget


def _tail(series: pd.Series) -> pd.Series:
    last = float(series.index.max())
    return series[series.index >= (1.0 - LAST_PART) * last]


def _collapse_step(ev: pd.Series, tl: pd.Series, guess_loss: Optional[float], higher_better: bool) -> Optional[int]:
    """The best evaluation's step of a run that collapsed after it, else None.

    A run collapsed when its training loss had clearly left the guessing level (at most ``LEARNED_RATIO``
    of it by its best evaluation) and is back at it (``GUESS_RATIO``) at some
    evaluation after its best one: its weights stopped computing anything (a late divergence), whether
    or not it climbed part of the way back before its last update. Its test value measures its best
    evaluation's weights, so its curve is read up to that evaluation.
    """
    if guess_loss is None or len(tl) == 0 or len(ev) == 0:
        return None
    at_guess = tl >= GUESS_RATIO * guess_loss
    best = ev.idxmax() if higher_better else ev.idxmin()
    if not (tl[tl.index <= best] <= LEARNED_RATIO * guess_loss).any():
        return None  # it never clearly learned: hovering near the guessing level is not a collapse
    return int(best) if at_guess[at_guess.index > best].any() else None


def _grad_peak(run: pd.DataFrame) -> Optional[float]:
    """The run's largest recorded gradient after its first WARMUP_PART of updates, or None if none."""
    sizes = run[run["metric"] == metrics.GRAD_NORM].dropna(subset=["value"])
    later = sizes[sizes["step"] > WARMUP_PART * float(sizes["step"].max())] if len(sizes) else sizes
    return float(later["value"].max()) if len(later) else None


def regime(curves: pd.DataFrame, run_ids: Iterable[str], curve_metric: str, measure: str, scale: float,
           higher_better: bool, unit: str = "", guess_loss: Optional[float] = None,
           paper_steps: Optional[int] = None) -> Regime:
    """The regime of a cell from its finished runs' curves (module docstring).

    Each run's slope is read over the last quarter of its own curve, and the cell's slope is their mean (for
    runs evaluated at the same steps: the slope of the seed-mean curve); a run that collapsed is read up to
    its best evaluation (``_collapse_step``).
    """
    ids = set(run_ids)
    mine = curves[curves["run_id"].isin(ids)] if len(curves) else curves
    if len(mine) == 0 or not (mine["metric"] == curve_metric).any():
        return Regime(UNKNOWN, detail="no learning curve recorded")
    rule = RISE[measure]
    peaks = [p for p in (_grad_peak(run) for _, run in mine.groupby("run_id")) if p is not None]
    grad_peak = round(max(peaks), 9) if peaks else None
    slopes, losses, levels, collapsed, last = [], [], [], [], 0
    for _, run in mine.groupby("run_id"):
        ev = run[run["metric"] == curve_metric].groupby("step")["value"].mean().sort_index()
        tl = run[run["metric"] == "train_loss"].groupby("step")["value"].mean().sort_index()
        if len(ev) == 0:
            continue
        last = max(last, int(ev.index.max()))
        cut = _collapse_step(ev, tl, guess_loss, higher_better)
        if cut is not None:
            collapsed.append(cut)
            ev, tl = ev[ev.index <= cut], tl[tl.index <= cut]
        tail = _tail(ev)
        if len(tail) < MIN_POINTS:
            return Regime(UNKNOWN, last, grad_peak=grad_peak, detail=f"{len(tail)} evaluation(s) in the last quarter "
                                                                     f"(a slope needs {MIN_POINTS})")
        x, y = tail.index.to_numpy(dtype=float), tail.to_numpy(dtype=float) * scale
        slopes.append(float(np.polyfit(x, y, 1)[0]) * 1000.0 * (1.0 if higher_better else -1.0))  # gain / 1k
        levels.append(float(np.mean(np.abs(y))))
        if len(tl):
            losses.append(float(_tail(tl).mean()))
    if not slopes:
        return Regime(UNKNOWN, detail="no learning curve recorded")
    per_k, level = float(np.mean(slopes)), float(np.mean(levels))
    # rounded to 9 decimals: the least-squares fit's last bits differ between CPUs, and a slope such as
    # -6.25 must print the same everywhere
    slope = round(per_k / level if rule.relative and level > 0 else per_k, 9)
    loss = round(float(np.mean(losses)), 9) if losses else None
    paper_budget = paper_steps is not None and last >= paper_steps
    shown = f"{slope:+.1%} of its level" if rule.relative else f"{slope:+.1f}{' ' + unit if unit else ''}"
    note = (f"; {len(collapsed)} of {len(slopes)} runs collapsed to the guessing level after their best "
            f"evaluation (at {', '.join(f'{c:,}' for c in sorted(collapsed))} updates), read up to it"
            if collapsed else "")
    brief = f"{shown} per 1,000 updates" + (f", {len(collapsed)} of {len(slopes)} runs collapsed late"
                                            if collapsed else "")
    base = dict(steps=last, slope=slope, loss=loss, guess_loss=guess_loss, collapsed=tuple(sorted(collapsed)),
                runs=len(slopes),
                paper_budget=paper_budget, brief=brief, grad_peak=grad_peak)
    if slope > rule.limit:
        return Regime(RISING, **base, detail=f"still improving by {shown} per 1,000 updates over its last quarter "
                                             f"(converged: at most {rule.text(unit)}){note}")
    if slope < -rule.limit:
        return Regime(FALLING, **base, detail=f"getting worse by {shown} per 1,000 updates over its last quarter "
                                              f"(converged: within {rule.text(unit)} either way){note}")
    if loss is not None and guess_loss is not None and loss >= GUESS_RATIO * guess_loss and not paper_budget:
        return Regime(AT_GUESS, **base, detail=f"training loss {loss:.3f} against {guess_loss:.3f} for always "
                                               f"guessing the likeliest output, at a budget below the paper's{note}")
    return Regime(CONVERGED, **base, detail=f"{shown} per 1,000 updates over its last quarter{note}")
