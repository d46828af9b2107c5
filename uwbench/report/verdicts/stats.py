"""The statistics of the verdicts: Welch's t-test, Holm's correction, Kendall's tau-b.

- ``welch``: Welch's unequal-variance t-test of two independent samples (the per-seed results of two
  cells), two-sided, from ``scipy.stats.ttest_ind(..., equal_var=False)``.
- ``holm``: Holm's step-down correction of the p-values of one claim's comparisons, so that the chance
  of calling any of them wrongly stays at ``ALPHA`` (Holm 1979): sort the m p-values, compare the k-th
  smallest (k = 1..m) with ALPHA / (m - k + 1) and stop at the first that exceeds its bound.
- ``kendall``: Kendall's tau-b with its two-sided p-value, from ``scipy.stats.kendalltau``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

ALPHA = 0.05  # the family-wise level of each claim
MIN_SEEDS = 2  # a side needs a spread to be tested


@dataclass(frozen=True)
class TTest:
    t: Optional[float]
    p: Optional[float]  # two-sided; None when the test is undefined
    why: str = ""  # why it is undefined


def welch(a: Sequence[float], b: Sequence[float]) -> TTest:
    """Welch's two-sided t-test of ``a`` against ``b`` (t > 0: a's mean is larger)."""
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if min(len(x), len(y)) < MIN_SEEDS:
        return TTest(None, None, f"fewer than {MIN_SEEDS} seeds on a side")
    if np.var(x) == 0 and np.var(y) == 0:
        if x.mean() == y.mean():
            return TTest(0.0, 1.0)
        return TTest(None, None, "no spread on either side")
    res = stats.ttest_ind(x, y, equal_var=False)
    t, p = float(res.statistic), float(res.pvalue)
    if math.isnan(t) or math.isnan(p):
        return TTest(None, None, "the test is undefined for these samples")
    return TTest(t, p)


def holm(pvalues: Sequence[Optional[float]], alpha: float = ALPHA) -> List[bool]:
    """Which hypotheses Holm's procedure rejects at family-wise level ``alpha`` (None: not tested, never
    rejected, and not counted in the family)."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(tested)
    out = [False] * len(pvalues)
    for k, (p, i) in enumerate(tested):
        if p > alpha / (m - k):
            break
        out[i] = True
    return out


def holm_adjusted(pvalues: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Holm-adjusted p-values (the smallest family-wise level at which each is rejected), for display."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(tested)
    out: List[Optional[float]] = [None] * len(pvalues)
    running = 0.0
    for k, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - k) * p))
        out[i] = running
    return out


@dataclass(frozen=True)
class Tau:
    tau: Optional[float]
    p: Optional[float]


def kendall(x: Sequence[float], y: Sequence[float]) -> Tau:
    """Kendall's tau-b of paired values and its two-sided p-value; None where undefined (n < 2 or one
    side all tied)."""
    from scipy import stats

    if len(x) != len(y):
        raise ValueError(f"kendall needs paired values, got {len(x)} and {len(y)}")
    if len(x) < 2:
        return Tau(None, None)
    res = stats.kendalltau(np.asarray(x, dtype=float), np.asarray(y, dtype=float), variant="b")
    tau, p = float(res.statistic), float(res.pvalue)
    if math.isnan(tau):
        return Tau(None, None)
    return Tau(tau, None if math.isnan(p) else p)
