"""Whether a run had a CPU core to itself while it trained, judged from its own two clocks.

A one-thread run's process CPU time over its wall time, over the same timed updates
(``uwbench.training.timing``), is the share of a core it got: about 0.99 on a core of its own, less where
more processes than cores took turns. CPU time is not load-free: a run that shared its core also spends
more CPU time per update (caches and branch predictors are refilled after every switch), up to half as much
again at shares below 0.8 in the committed runs (docs/speed.md, "Timing on a shared machine").
So a time comparison uses only the runs whose share is at least ``CORE_SHARE_FLOOR``.

Only one-thread CPU runs are judged (``torch_threads`` 1): a run of several threads need not keep them all
busy, and a GPU run's CPU time is not its cost. Any other run is neither kept nor dropped here: its share
is unknown (NaN) and it counts as timed alone.
"""
from __future__ import annotations

import pandas as pd

from uwbench.training.timing import CORE_SHARE_FLOOR  # the floor lives beside the two clocks it compares

__all__ = ["CORE_SHARE_FLOOR", "core_share", "shared_core", "floor_text"]


def core_share(runs: pd.DataFrame) -> pd.Series:
    """Per run: CPU seconds per 100 updates over wall seconds per 100 updates, for one-thread CPU runs;
    NaN where either clock, the device or the thread count says nothing."""
    nan = pd.Series(float("nan"), index=runs.index, dtype=float)
    needed = ("mean_cpu_seconds_per_100", "mean_seconds_per_100", "torch_threads", "device")
    if any(c not in runs.columns for c in needed):
        return nan
    cpu = pd.to_numeric(runs["mean_cpu_seconds_per_100"], errors="coerce")
    wall = pd.to_numeric(runs["mean_seconds_per_100"], errors="coerce")
    threads = pd.to_numeric(runs["torch_threads"], errors="coerce")
    judged = (threads == 1) & (runs["device"].astype(str) == "cpu") & (wall > 0)
    return (cpu / wall).where(judged, nan)


def shared_core(runs: pd.DataFrame) -> pd.Series:
    """Per run: True where it is known to have shared its core (``core_share`` below the floor)."""
    return core_share(runs) < CORE_SHARE_FLOOR


def floor_text() -> str:
    """The rule in words, for the reports' notes."""
    return f"CPU time at least {CORE_SHARE_FLOOR:.0%} of wall time"
