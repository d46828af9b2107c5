"""The writers' schedules scored side by side by Theorem 2's bound (``uwbench theory bound``, and the table
``uwbench theory contributions`` prints with its fitted lambda): regular,
uniform (Eq. 7), cached uniform (§2.3.1) and random writing for T tokens, D slots and lambda, against the
real optimum g_lambda (Theorem 3) and the best integer split. Built on ``uwbench.theory``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from uwbench.theory import (IntegerSplit, _check_positive, best_integer_split, contribution_bound,
                            expected_random_bound, g_lambda, random_write_prob, uniform_interval, uniform_positions)
from uwbench.errors import UserError


WRITER_ROWS = ("regular", "uniform", "cached_uniform", "random")


def work(T: int) -> int:
    """The steps ``schedule_table``'s progress counts for T tokens: two expectations over the T+1 steps."""
    return 2 * (T + 1)


def check_compresses(T: int, D: int) -> None:
    """Theorems 2 and 3 are about a memory smaller than the sequence: D < T. With D >= T the D slots hold
    every token, so writing every step (regular writing) keeps them all, and the optimum's D+1 intervals
    of T/(D+1) < 1 step are no schedule a writer can follow."""
    if not D < T:
        raise UserError(f"`memory_size < seq_len` must hold for the bound to mean anything, got D={D}, T={T}: "
                         f"{D} slots hold all {T} tokens, so regular writing keeps every one and no writer needs to "
                         "skip a step (the optimum would be intervals of "
                         f"{T / (D + 1):.2g} steps); choose D below T")


@dataclass(frozen=True)
class ScheduleRow:
    """One writer's schedule scored by Theorem 2.

    ``positions``: 0-indexed write steps (None for the random writer, scored in expectation);
    ``writes``: their number (expected for random); ``bound``: I_lambda of the D writes the memory
    keeps (the most recent D, ``kept_writes``); ``bound_all_writes``: I_lambda if every write kept its
    own slot; ``of_optimum``: bound / g_lambda (<= 1 for lambda <= 1).
    """

    writer: str
    positions: Optional[Tuple[int, ...]]
    writes: float
    bound: float
    bound_all_writes: float
    of_optimum: float
    note: str = ""


@dataclass(frozen=True)
class ScheduleTable:
    """The bound of every writer for T tokens (``n_steps = T + 1`` encoder steps, the horizon of the
    bound), D slots and lambda, with the real optimum g_lambda(n_steps, D) (Theorem 3) and the best
    integer split (``best_integer_split``; None when n_steps < D + 1).

    ``paper_optimum`` is the paper's g_lambda(T, D) with T the input length (Theorem 3 as stated, the
    end marker not counted), shown beside ``optimum``, the value over the T + 1 steps the encoder runs
    and the one the rows are scored against."""

    seq_len: int
    n_steps: int
    memory_size: int
    lam: float
    C: float
    cache_size: Optional[int]
    rule: str
    rows: Tuple[ScheduleRow, ...]
    optimum: float
    best_integer: Optional[IntegerSplit]
    paper_optimum: float

    def row(self, writer: str) -> ScheduleRow:
        for r in self.rows:
            if r.writer == writer:
                return r
        raise KeyError(f"no row for writer {writer!r}; rows: {', '.join(r.writer for r in self.rows)}")


def schedule_table(
    T: int,
    D: int,
    lam: float,
    cache_size: Optional[int] = None,
    *,
    rule: str = "code",
    C: float = 1.0,
    write_prob: Optional[float] = None,
    progress: Optional[Callable[[int], None]] = None,
) -> ScheduleTable:
    """Theorem 2's bound for each writer's schedule on a task of T tokens read as ``n = T + 1`` encoder
    steps (the end marker included, docs/reference.md §2.1), with D memory slots:

    - ``regular``: a write at every step (the memory keeps the last D);
    - ``uniform``: ``uniform_positions(n, D, rule=rule)`` (Eq. 7 / the authors' code's rule);
    - ``cached_uniform``: the same with interval min(s, L), L = ``cache_size`` (§2.3.1); left out when
      ``cache_size`` is None. The bound scores the write steps only, not the cache's attention;
    - ``random``: the expected bound over Bernoulli(p) masks, p = (D+1)/T unless ``write_prob``.

    ``optimum`` is g_lambda(n, D): the maximum for lambda <= 1, the minimum for lambda > 1.
    ``paper_optimum`` is g_lambda(T, D), the paper's optimum with T the input length.
    ``progress(k)``: k more of the ``work(T)`` steps done (the random writer's expectation takes most of the
    time, quadratic in T).
    """
    _check_positive("seq_len", T)
    _check_positive("memory_size", D)
    n = T + 1
    p = random_write_prob(n, D) if write_prob is None else write_prob
    optimum = g_lambda(n, D, lam, C)
    schedules = {
        "regular": (list(range(n)), "every step"),
        "uniform": (uniform_positions(n, D, rule=rule), f"rule {rule}, interval {uniform_interval(n, D, rule)}"),
    }
    if cache_size is not None:
        s = min(uniform_interval(n, D, rule), cache_size)
        schedules["cached_uniform"] = (uniform_positions(n, D, cache_size, rule=rule), f"L={cache_size}, interval {s}")
    rows = []
    for writer, (positions, note) in schedules.items():
        bound = contribution_bound(positions, n, lam, C, base=0, memory_size=D)
        rows.append(ScheduleRow(
            writer, tuple(positions), float(len(positions)), bound,
            contribution_bound(positions, n, lam, C, base=0), bound / optimum, note,
        ))
    bound = expected_random_bound(n, lam, p, D, C, progress=progress)
    rows.append(ScheduleRow(
        "random", None, p * n, bound, expected_random_bound(n, lam, p, None, C, progress=progress), bound / optimum,
        f"expected over Bernoulli(p={p:.4g}) masks",
    ))
    best = best_integer_split(n, D, lam, maximize=lam <= 1, C=C) if n >= D + 1 else None
    return ScheduleTable(T, n, D, float(lam), float(C), cache_size, rule, tuple(rows), optimum, best,
                         g_lambda(T, D, lam, C))
