"""The timing harness: candidates timed interleaved, round by round.

Each candidate first runs ``warmup`` untimed iterations (lazy initialisation; compilation for compiled
candidates, whose first call is kept apart as ``first_call``). Then every round runs each candidate
once, the starting candidate rotating, so that a burst of load from other processes hits all of them
alike. Each iteration is timed with ``time.process_time`` (this process's CPU time: with one thread it
leaves out the time spent waiting for a core, though not what sharing one costs:
``uwbench.report.analysis.cores``) and with
``time.perf_counter`` (wall).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from uwbench.errors import UserError


@dataclass
class Timing:
    """The timed iterations of one candidate, in seconds."""

    wall: List[float] = field(default_factory=list)
    cpu: List[float] = field(default_factory=list)
    first_call: Optional[float] = None  # wall seconds of the first (warm-up) call: includes compilation

    @property
    def wall_ms(self) -> float:
        return statistics.median(self.wall) * 1e3

    @property
    def cpu_ms(self) -> float:
        return statistics.median(self.cpu) * 1e3

    def as_dict(self) -> Dict[str, Any]:
        return {"median_wall_ms": round(self.wall_ms, 2), "median_cpu_ms": round(self.cpu_ms, 2),
                "min_cpu_ms": round(min(self.cpu) * 1e3, 2), "max_cpu_ms": round(max(self.cpu) * 1e3, 2),
                "repeats": len(self.cpu),
                "first_call_s": None if self.first_call is None else round(self.first_call, 2)}


def interleave(candidates: Dict[str, Callable[[], Any]], repeats: int = 7, warmup: int = 2) -> Dict[str, Timing]:
    """Time each zero-argument callable ``repeats`` times after ``warmup`` untimed calls, round by round
    (one call of every candidate per round; the starting candidate rotates each round). Keys are ids."""
    if repeats < 1 or warmup < 1:
        raise UserError(f"`repeats >= 1 and warmup >= 1` must hold, got repeats={repeats}, warmup={warmup}")
    names = list(candidates)
    timings = {name: Timing() for name in names}
    for w in range(warmup):
        for name in names:
            t0 = time.perf_counter()
            candidates[name]()
            if w == 0:
                timings[name].first_call = time.perf_counter() - t0
    for r in range(repeats):
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            c0, t0 = time.process_time(), time.perf_counter()
            candidates[name]()
            timings[name].wall.append(time.perf_counter() - t0)
            timings[name].cpu.append(time.process_time() - c0)
    return timings
