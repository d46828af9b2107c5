"""How the trainer times its updates (docs/design.md §8.1): seconds per 100 updates *without* evaluation,
one host sync per evaluation window, the warm-up update timed apart.

The first update of a process (lazy initialisation and, with a compiled step, the compilation; with
CUDA graphs, the capture) is the *warm-up*: timed on its own (``first_update_seconds``, or after a
resume ``resume_warmup_seconds``) and left out of the per-100 figures, which measure the steady state.
Beside wall time, process CPU time (which leaves out the waiting for a core, though not what sharing one
costs: ``uwbench.report.analysis.cores``) and, of that, the model's forward, loss
and backward (the rest is the trainer's own work).
"""
from __future__ import annotations

import time
from typing import Callable

# A one-thread CPU run whose CPU time was below this share of its wall time shared its core with another
# process; its CPU time is then inflated too (uwbench.report.analysis.cores), so time comparisons leave it out.
CORE_SHARE_FLOOR = 0.9


class UpdateTimer:
    """The clock of one training process. Per update: ``start`` -> ``model_start`` -> ``model_end`` ->
    ``stop``; per evaluation window: ``close_window`` (its seconds per 100 updates)."""

    def __init__(self, first_step: int, sync: Callable[[], None]):
        self.first_step = first_step  # the warm-up update of this process
        self.sync = sync  # waits for the device (CUDA), or nothing
        self.window_timed = 0  # updates of this window in window_time (all but a warm-up update)
        self.window_time = 0.0
        self.warmup_seconds = 0.0  # the last warm-up update's time
        self._t0 = self._c0 = self._m0 = self._m1 = 0.0

    def start(self) -> None:
        self._t0, self._c0 = time.perf_counter(), time.process_time()

    def model_start(self) -> None:
        self._m0 = time.process_time()

    def model_end(self) -> None:
        self._m1 = time.process_time()

    def stop(self, step: int, window_ends: bool, result, counters) -> None:
        """The update ``step`` is done: count it as the warm-up (into ``result`` / ``counters``) or into
        the window. ``window_ends``: an evaluation follows, so the device is synced (the only sync)."""
        if step == self.first_step:
            self.sync()
            self.warmup_seconds = time.perf_counter() - self._t0
            if step == 1:
                result.first_update_seconds = self.warmup_seconds
            else:
                counters.resume_warmup_seconds += self.warmup_seconds
            return
        if window_ends:
            self.sync()
        self.window_time += time.perf_counter() - self._t0
        counters.timed_cpu += time.process_time() - self._c0
        counters.timed_model_cpu += self._m1 - self._m0
        self.window_timed += 1

    def close_window(self, result, counters) -> float:
        """Add the window to the run's totals and start a new one; returns its seconds per 100 updates
        (a window holding only the warm-up update: the warm-up's)."""
        if self.window_timed:
            sec100 = self.window_time / self.window_timed * 100.0
        else:
            sec100 = self.warmup_seconds * 100.0
        result.train_seconds += self.window_time
        counters.timed_steps += self.window_timed
        self.window_timed, self.window_time = 0, 0.0
        return sec100


def finish(result, counters) -> None:
    """The run's per-100 figures from its timed updates, and the warm-ups added to ``train_seconds``."""
    timed_steps = counters.timed_steps
    if timed_steps:
        result.seconds_per_100 = result.train_seconds / timed_steps * 100.0
        result.cpu_seconds_per_100 = counters.timed_cpu / timed_steps * 100.0
        result.model_cpu_seconds_per_100 = counters.timed_model_cpu / timed_steps * 100.0
    else:  # a one-update run: only the warm-up update exists
        result.seconds_per_100 = (result.first_update_seconds or 0.0) * 100.0
    result.train_seconds += (result.first_update_seconds or 0.0) + counters.resume_warmup_seconds

