"""Tests for uwbench.theory (paper Theorems 1-3, Eq. 7, appendix) and the `uwbench theory bound/plot`
commands. Exact small cases are worked by hand in the comments."""
from __future__ import annotations

import argparse
import itertools
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uwbench import theory as th
from uwbench import writer_bounds as wb
from uwbench.commands import theory as cmd

FAST = settings(max_examples=60, deadline=None)
lam_below = st.floats(0.05, 0.99)
lam_above = st.floats(1.01, 1.6)


def compositions(T, parts):
    """Every split of T into `parts` positive integers (brute force for small T)."""
    for cuts in itertools.combinations(range(1, T), parts - 1):
        bounds = (0,) + cuts + (T,)
        yield [b - a for a, b in zip(bounds, bounds[1:])]


def bound_of(intervals, lam, C=1.0):
    return th.contribution_bound(intervals, sum(intervals), lam, C, given="intervals")


# ---------------------------------------------------------------------------------------------- f_lambda


def test_f_lambda_exact_values():
    assert th.f_lambda(3, 0.5) == pytest.approx(1.75)  # 1 + 1/2 + 1/4
    assert th.f_lambda(4, 2.0) == pytest.approx(15.0)  # 1 + 2 + 4 + 8
    assert th.f_lambda(0, 0.7) == 0.0
    assert th.f_lambda(1, 0.3) == pytest.approx(1.0)
    assert th.f_lambda(2.5, 1.0) == 2.5  # lambda = 1: f(x) = x, real x allowed
    np.testing.assert_allclose(th.f_lambda([0, 1, 2, 3], 0.5), [0, 1, 1.5, 1.75])
    assert isinstance(th.f_lambda(3, 0.5), float)


@FAST
@given(x=st.integers(0, 60), lam=st.floats(0.05, 1.8))
def test_f_lambda_is_the_geometric_sum(x, lam):
    direct = sum(lam**j for j in range(x))
    assert th.f_lambda(x, lam) == pytest.approx(direct, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("eps", [1e-6, 1e-9, 1e-12, 1e-15])
@pytest.mark.parametrize("x", [1, 7, 50, 200.5])
def test_f_lambda_is_continuous_through_one(eps, x):
    # ((1+e)^x - 1)/e = x + C(x,2) e + C(x,3) e^2 + O(e^3): the naive (1 - lam^x)/(1 - lam) loses most
    # digits here (e is taken as the float lam - 1, which is exact)
    for sign in (1, -1):
        lam = 1 + sign * eps
        e = lam - 1
        expected = x + x * (x - 1) / 2 * e + x * (x - 1) * (x - 2) / 6 * e**2
        assert th.f_lambda(x, lam) == pytest.approx(expected, rel=1e-12)


def test_f_lambda_rejects_bad_values():
    with pytest.raises(ValueError, match=r"`lam > 0` must hold .*got 0"):
        th.f_lambda(3, 0.0)
    with pytest.raises(ValueError, match=r"`x >= 0` must hold .*got -1"):
        th.f_lambda(-1, 0.5)


# ------------------------------------------------------------------------------- intervals and I_lambda


def test_intervals_of_the_code_schedule_t50_d4():
    # 0-indexed writes 10..50 over 51 encoder steps -> K = 11, 21, .., 51 -> l = 11, 10, 10, 10, 10, 0
    schedule = th.uniform_positions(51, 4)
    assert th.intervals_from_positions(schedule, 51, base=0) == [11, 10, 10, 10, 10, 0]
    assert th.intervals_from_positions([p + 1 for p in schedule], 51) == [11, 10, 10, 10, 10, 0]


def test_intervals_by_hand():
    assert th.intervals_from_positions([2], 5) == [2, 3]
    assert th.intervals_from_positions([1, 2, 4], 6) == [1, 1, 2, 2]
    assert th.intervals_from_positions([], 7) == [7]  # Theorem 1: no writes
    assert th.intervals_from_positions([0, 3], 4, base=0) == [1, 3, 0]


@pytest.mark.parametrize(
    "positions, T, base, match",
    [
        ([3, 2], 5, 1, "strictly increasing"),
        ([2, 2], 5, 1, "strictly increasing"),
        ([0, 2], 5, 1, r"`1 <= position <= 5` must hold"),
        ([6], 5, 1, r"`1 <= position <= 5` must hold"),
        ([5], 5, 0, r"`0 <= position <= 4` must hold"),
        ([1.5], 5, 1, "integers"),
    ],
)
def test_intervals_reject_bad_positions(positions, T, base, match):
    with pytest.raises(ValueError, match=match):
        th.intervals_from_positions(positions, T, base=base)


def test_contribution_bound_by_hand():
    # K = [2], T = 5, lambda = 1/2: l = (2, 3), f = 1.5 + 1.75 = 3.25, I = 3.25 / 5
    assert th.contribution_bound([2], 5, 0.5) == pytest.approx(0.65)
    assert th.contribution_bound([2], 5, 0.5, C=2.0) == pytest.approx(1.3)
    assert th.contribution_bound([2, 3], None, 0.5, given="intervals") == pytest.approx(0.65)
    # Theorem 1 (D = 0): f(4)/4 with lambda = 1/2 -> 1.875 / 4
    assert th.contribution_bound([], 4, 0.5) == pytest.approx(0.46875)
    # a write at the last step adds nothing: f(0) = 0
    assert th.contribution_bound([2, 5], 5, 0.5) == pytest.approx(th.contribution_bound([2], 5, 0.5))


def test_contribution_bound_keeps_the_last_d_writes():
    # writes at 2, 4, 6 over T = 8 with one slot: only K = 6 stays -> l = (6, 2)
    assert th.kept_writes([2, 4, 6], 1) == [6]
    assert th.kept_writes([2, 4, 6], 5) == [2, 4, 6]
    assert th.kept_writes([2, 4, 6], None) == [2, 4, 6]
    kept = th.contribution_bound([2, 4, 6], 8, 0.5, memory_size=1)
    assert kept == pytest.approx((th.f_lambda(6, 0.5) + th.f_lambda(2, 0.5)) / 8)
    assert kept < th.contribution_bound([2, 4, 6], 8, 0.5)


def test_contribution_bound_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"`sum\(intervals\) == T` must hold"):
        th.contribution_bound([2, 2], 5, 0.5, given="intervals")
    with pytest.raises(ValueError, match=r"`given in"):
        th.contribution_bound([2], 5, 0.5, given="steps")
    with pytest.raises(ValueError, match=r"`C > 0` must hold, got 0"):
        th.contribution_bound([2], 5, 0.5, C=0)
    with pytest.raises(ValueError, match=r"`T >= 1` must hold, got 0"):
        th.contribution_bound([], 0, 0.5)


@FAST
@given(data=st.data(), T=st.integers(1, 120), C=st.floats(0.1, 10.0))
def test_lambda_one_gives_C_for_every_schedule(data, T, C):
    positions = sorted(data.draw(st.sets(st.integers(1, T), max_size=T)))
    assert th.contribution_bound(positions, T, 1.0, C) == pytest.approx(C, rel=1e-12)
    # and the bound is continuous there
    assert th.contribution_bound(positions, T, 1.0 + 1e-10, C) == pytest.approx(C, rel=1e-6)


# ---------------------------------------------------------------------------------- g_lambda, Theorem 3


def test_g_lambda_by_hand():
    # T = 4, D = 1, lambda = 1/2: 2/4 * f(2) = 0.5 * 1.5
    assert th.g_lambda(4, 1, 0.5) == pytest.approx(0.75)
    assert th.g_lambda(4, 1, 0.5) == pytest.approx(th.contribution_bound([2], 4, 0.5))
    assert th.g_lambda(4, 1, 1.0, C=3.0) == pytest.approx(3.0)
    # D = 0 is Theorem 1's average contribution f(T)/T
    assert th.g_lambda(10, 0, 0.8) == pytest.approx(th.f_lambda(10, 0.8) / 10)


@FAST
@given(T=st.integers(2, 400), D=st.integers(0, 50), lam=st.floats(0.05, 1.5))
def test_g_lambda_depends_only_on_the_compression_ratio(T, D, lam):
    # g = C x f(1/x) with x = (D+1)/T: doubling T and D+1 keeps it
    assert th.g_lambda(2 * T, 2 * D + 1, lam) == pytest.approx(th.g_lambda(T, D, lam), rel=1e-9)


@FAST
@given(T=st.integers(2, 300), data=st.data(), lam=lam_below)
def test_g_lambda_increases_with_d_for_lambda_below_one(T, data, lam):
    D = data.draw(st.integers(0, T - 2))
    assert th.g_lambda(T, D + 1, lam) > th.g_lambda(T, D, lam)


@FAST
@given(T=st.integers(2, 300), data=st.data())
def test_g_lambda_is_constant_in_d_for_lambda_one(T, data):
    D = data.draw(st.integers(0, T - 2))
    assert th.g_lambda(T, D + 1, 1.0) == pytest.approx(th.g_lambda(T, D, 1.0), rel=1e-12) == pytest.approx(1.0)


def test_g_lambda_vectorises_and_validates():
    d = np.arange(5)
    np.testing.assert_allclose(th.g_lambda(10, d, 0.9), [th.g_lambda(10, int(k), 0.9) for k in d])
    with pytest.raises(ValueError, match=r"`D >= 0` must hold"):
        th.g_lambda(10, -1, 0.9)
    with pytest.raises(ValueError, match=r"`T > 0` must hold"):
        th.g_lambda(0, 1, 0.9)


def test_optimal_intervals_are_uniform():
    intervals = th.optimal_intervals(51, 4)
    np.testing.assert_allclose(intervals, [10.2] * 5)
    assert th.contribution_bound(intervals, 51, 0.9, given="intervals") == pytest.approx(th.g_lambda(51, 4, 0.9))
    assert th.optimal_interval(51, 4) == pytest.approx(10.2)
    assert th.compression_ratio(50, 4) == pytest.approx(0.1)
    with pytest.raises(ValueError, match=r"`D >= 0` must hold"):
        th.optimal_intervals(10, -1)


@FAST
@given(data=st.data(), lam=st.floats(0.05, 1.6))
def test_no_real_split_beats_the_optimal_intervals(data, lam):
    # Theorem 3 over reals: Jensen on the concave (lambda < 1) / convex (lambda > 1) f_lambda
    weights = np.array(data.draw(st.lists(st.floats(0.01, 1.0), min_size=1, max_size=8)))
    T = data.draw(st.floats(1.0, 100.0))
    intervals = weights / weights.sum() * T
    bound = th.contribution_bound(intervals, T, lam, given="intervals")
    best = th.g_lambda(T, len(intervals) - 1, lam)
    assert (bound <= best * (1 + 1e-9)) if lam <= 1 else (bound >= best * (1 - 1e-9))


# ---------------------------------------------------------------------------------------- integer splits


def test_best_integer_split_by_hand():
    # T = 5, D = 1: splits (1,4), (2,3). lambda = 1/2: 1 + 1.875 = 2.875 vs 1.5 + 1.75 = 3.25
    best = th.best_integer_split(5, 1, 0.5)
    assert best.intervals == (3, 2) and best.positions == (3,) and best.value == pytest.approx(0.65)
    # lambda = 2: f = 2^l - 1 -> (1,4): 1 + 15 = 16, (2,3): 3 + 7 = 10
    assert th.best_integer_split(5, 1, 2.0, maximize=False).value == pytest.approx(10 / 5)
    assert th.best_integer_split(5, 1, 2.0, maximize=True).intervals == (4, 1)
    assert th.best_integer_split(5, 1, 2.0, maximize=True).value == pytest.approx(16 / 5)
    # D + 1 = T: every interval is one step
    assert th.best_integer_split(4, 3, 0.5).intervals == (1, 1, 1, 1)
    with pytest.raises(ValueError, match=r"`T >= D \+ 1` must hold"):
        th.best_integer_split(3, 3, 0.5)


@FAST
@given(T=st.integers(1, 12), data=st.data(), lam=st.floats(0.1, 1.8), maximize=st.booleans())
def test_best_integer_split_matches_brute_force(T, data, lam, maximize):
    D = data.draw(st.integers(0, min(T - 1, 4)))
    values = [bound_of(intervals, lam) for intervals in compositions(T, D + 1)]
    best = th.best_integer_split(T, D, lam, maximize=maximize)
    assert best.value == pytest.approx(max(values) if maximize else min(values), rel=1e-12)
    assert sum(best.intervals) == T and len(best.intervals) == D + 1 and min(best.intervals) >= 1
    assert best.value == pytest.approx(th.contribution_bound(list(best.positions), T, lam), rel=1e-12)


@FAST
@given(q=st.integers(1, 12), D=st.integers(0, 8), data=st.data(), lam=lam_below)
def test_no_integer_split_beats_uniform_when_d_plus_one_divides_t(q, D, data, lam):
    T = q * (D + 1)
    cuts = sorted(data.draw(st.sets(st.integers(1, T - 1), min_size=D, max_size=D))) if D else []
    uniform = th.contribution_bound(list(range(q, T, q)), T, lam)
    assert uniform == pytest.approx(th.g_lambda(T, D, lam), rel=1e-12)
    assert th.contribution_bound(cuts, T, lam) <= uniform * (1 + 1e-12)


@FAST
@given(q=st.integers(1, 12), D=st.integers(0, 8), data=st.data(), lam=lam_above)
def test_no_integer_split_is_below_uniform_for_lambda_above_one(q, D, data, lam):
    T = q * (D + 1)
    cuts = sorted(data.draw(st.sets(st.integers(1, T - 1), min_size=D, max_size=D))) if D else []
    uniform = th.contribution_bound(list(range(q, T, q)), T, lam)
    assert th.contribution_bound(cuts, T, lam) >= uniform * (1 - 1e-12)


@FAST
@given(T=st.integers(1, 60), data=st.data(), lam=st.one_of(lam_below, lam_above))
def test_the_most_even_split_is_the_integer_optimum(T, data, lam):
    # For any T (D+1 dividing it or not), the most even split is majorised by every other split:
    # it is the maximum for lambda < 1 and the minimum for lambda > 1 (exact, via the DP).
    D = data.draw(st.integers(0, min(T - 1, 10)))
    even = th.most_even_split(T, D)
    assert sum(even) == T and max(even) - min(even) <= 1 and len(even) == D + 1
    best = th.best_integer_split(T, D, lam, maximize=lam < 1)
    assert bound_of(even, lam) == pytest.approx(best.value, rel=1e-12)
    # (the optimum is unique in exact arithmetic, but for small lambda f(18) and f(20) can tie in floats,
    # so the intervals themselves are compared in test_most_even_split_by_hand only)
    cuts = sorted(data.draw(st.sets(st.integers(1, T - 1), min_size=D, max_size=D))) if D else []
    other = th.contribution_bound(cuts, T, lam)
    assert (other <= bound_of(even, lam) * (1 + 1e-12)) if lam < 1 else (other >= bound_of(even, lam) * (1 - 1e-12))


def test_most_even_split_by_hand():
    assert th.most_even_split(51, 4) == [11, 10, 10, 10, 10]
    assert th.most_even_split(7, 2) == [3, 2, 2]
    assert th.most_even_split(6, 2) == [2, 2, 2]
    assert th.best_integer_split(51, 4, 0.9).intervals == (11, 10, 10, 10, 10)
    assert th.best_integer_split(23, 3, 0.7).intervals == (6, 6, 6, 5)
    assert th.best_integer_split(23, 3, 1.3, maximize=False).intervals == (6, 6, 6, 5)
    assert th.best_integer_split(23, 3, 1.3, maximize=True).intervals == (20, 1, 1, 1)
    # and lambda = 1 makes every split equal
    assert all(bound_of(intervals, 1.0) == pytest.approx(1.0) for intervals in compositions(7, 3))


# ------------------------------------------------------------------------------------ write schedules


@pytest.mark.parametrize(
    "T, D, interval, writes",
    [(50, 2, 17, 2), (50, 4, 10, 5), (50, 9, 5, 10), (50, 24, 2, 25),
     (30, 2, 10, 3), (30, 4, 6, 5), (30, 9, 3, 10), (30, 14, 2, 15),
     (100, 4, 20, 5)],
)
def test_reference_schedule_table(T, D, interval, writes):
    # docs/reference.md §5.1: the code's rule over the T+1 encoder steps
    positions = th.uniform_positions(T + 1, D)
    assert th.uniform_interval(T + 1, D) == interval
    assert len(positions) == writes
    assert positions == list(range(interval, T + 1, interval))


def test_reference_schedules_written_out():
    assert th.uniform_positions(51, 4) == [10, 20, 30, 40, 50]
    assert th.uniform_positions(51, 4, cache_size=5) == list(range(5, 51, 5))
    assert th.uniform_positions(51, 4, cache_size=10) == [10, 20, 30, 40, 50]
    assert th.uniform_positions(101, 4, cache_size=5) == list(range(5, 101, 5))
    # the paper's Eq. 7: 1-indexed t = 10, 20, .., 50 over T = 50 tokens -> 0-indexed 9, .., 49
    assert th.uniform_positions(51, 4, rule="paper") == [9, 19, 29, 39, 49]


@FAST
@given(
    n=st.integers(2, 300), D=st.integers(1, 60), rule=st.sampled_from(th.SCHEDULE_RULES),
    cache=st.one_of(st.none(), st.integers(1, 40)),
)
def test_uniform_schedule_invariants(n, D, rule, cache):
    positions = th.uniform_positions(n, D, cache_size=cache, rule=rule)
    s = th.uniform_interval(n, D, rule)
    if cache is not None and s > 0:
        s = min(s, cache)
    assert positions == sorted(set(positions)) and positions  # sorted, no repeats, at least one write
    assert all(0 <= p < n for p in positions)
    gaps = {b - a for a, b in zip(positions, positions[1:])}
    tokens = n - 1
    if s == 0:  # D+1 exceeds the steps: one middle write (code) or every token (paper)
        assert positions == ([n // 2] if rule == "code" else list(range(max(tokens, 1))))
        return
    assert gaps <= {s}  # consecutive gaps all equal the interval
    if rule == "code":  # 0-indexed s, 2s, .. <= n-1: floor((n-1)/s) writes, step 0 never
        assert positions[0] == s and len(positions) == (n - 1) // s
    else:  # 1-indexed s, 2s, .. <= T tokens: floor(T/s) writes, the end marker never
        assert positions[0] == s - 1 and len(positions) == tokens // s and positions[-1] < tokens
    # the theorem's intervals: the first is the interval (+1 for the code's 0-indexing), the last shorter
    intervals = th.intervals_from_positions(positions, n, base=0)
    assert sum(intervals) == n and set(intervals[1:-1]) <= {s} and intervals[-1] < s + 2


def test_random_positions():
    a = th.random_positions(51, 4, 7)
    assert a == th.random_positions(51, 4, np.random.default_rng(7))  # a seed or a Generator
    assert a == sorted(set(a)) and all(0 <= p < 51 for p in a)
    assert th.random_positions(51, 4, 0, p=0.0) == []
    assert th.random_positions(51, 4, 0, p=1.0) == list(range(51))
    assert th.random_write_prob(51, 4) == pytest.approx(0.1)  # (D+1)/T with T = 50 tokens
    assert th.random_write_prob(5, 9) == 1.0  # clipped
    counts = [len(th.random_positions(51, 4, seed)) for seed in range(400)]
    assert np.mean(counts) == pytest.approx(5.1, abs=0.5)  # E = p n = 5.1, sd of the mean ~0.1
    with pytest.raises(ValueError, match=r"`0 <= p <= 1` must hold, got 1.5"):
        th.random_positions(10, 2, 0, p=1.5)


@pytest.mark.parametrize("n, p, lam, D", [(6, 0.3, 0.7, 2), (7, 0.5, 1.3, 1), (5, 0.9, 0.5, None),
                                          (8, 0.2, 0.95, 3), (4, 1.0, 0.8, 2), (4, 0.0, 0.8, 2)])
def test_expected_random_bound_equals_enumeration(n, p, lam, D):
    total = 0.0
    for mask in itertools.product([0, 1], repeat=n):
        prob = math.prod(p if m else 1 - p for m in mask)
        total += prob * th.contribution_bound([i for i in range(n) if mask[i]], n, lam, base=0, memory_size=D)
    assert th.expected_random_bound(n, lam, p, D) == pytest.approx(total, rel=1e-12, abs=1e-15)


# ----------------------------------------------------------------------------------------- the table


def test_schedule_table_t50_d4():
    f = lambda x: th.f_lambda(x, 0.9)  # noqa: E731
    table = wb.schedule_table(50, 4, 0.9, cache_size=5)
    assert [r.writer for r in table.rows] == ["regular", "uniform", "cached_uniform", "random"]
    assert table.n_steps == 51 and table.optimum == pytest.approx(th.g_lambda(51, 4, 0.9))
    uw = table.row("uniform")
    assert uw.positions == (10, 20, 30, 40, 50) and uw.writes == 5
    assert uw.bound_all_writes == pytest.approx((f(11) + 4 * f(10)) / 51)  # K = 11, 21, .., 51
    assert uw.bound == pytest.approx((f(21) + 3 * f(10)) / 51)  # the first write overwritten
    assert uw.of_optimum == pytest.approx(uw.bound / table.optimum)
    assert table.row("cached_uniform").positions == tuple(range(5, 51, 5))
    assert table.row("cached_uniform").bound == pytest.approx((f(36) + 3 * f(5)) / 51)  # K = 36, 41, 46, 51
    reg = table.row("regular")
    assert reg.writes == 51 and reg.bound == pytest.approx((f(48) + 3) / 51)  # K = 48..51 kept
    assert reg.bound_all_writes == pytest.approx(1.0)  # every interval one step
    rnd = table.row("random")
    assert rnd.positions is None and rnd.writes == pytest.approx(5.1)
    assert rnd.bound == pytest.approx(th.expected_random_bound(51, 0.9, 0.1, 4))
    assert table.best_integer.intervals == (11, 10, 10, 10, 10)
    # the paper's g_lambda(T, D) with T the input length, beside the value over the T+1 encoder steps
    assert table.paper_optimum == pytest.approx(th.g_lambda(50, 4, 0.9))
    assert table.paper_optimum == pytest.approx(0.6513215599)
    assert table.paper_optimum != pytest.approx(table.optimum)
    assert "cached_uniform" not in [r.writer for r in wb.schedule_table(50, 4, 0.9).rows]
    with pytest.raises(ValueError, match=r"`memory_size >= 1` must hold, got 0"):
        wb.schedule_table(50, 0, 0.9)


@FAST
@given(T=st.integers(2, 80), data=st.data(), lam=st.one_of(lam_below, lam_above, st.just(1.0)),
       cache=st.one_of(st.none(), st.integers(1, 12)), rule=st.sampled_from(th.SCHEDULE_RULES))
def test_no_writer_beats_the_optimum(T, data, lam, cache, rule):
    # each writer's memory keeps at most D writes, so Theorem 3 bounds it (and g grows with D)
    D = data.draw(st.integers(1, T))
    table = wb.schedule_table(T, D, lam, cache, rule=rule)
    for r in table.rows:
        if lam <= 1:
            assert r.bound <= table.optimum * (1 + 1e-9)
        else:
            assert r.bound >= table.optimum * (1 - 1e-9)
    assert table.paper_optimum == pytest.approx(th.g_lambda(T, D, lam))
    if lam <= 1:  # fewer steps per slot: the paper's T-step optimum is at least the (T+1)-step one
        assert table.paper_optimum >= table.optimum * (1 - 1e-9)
    if table.best_integer is not None:
        assert (table.best_integer.value <= table.optimum * (1 + 1e-9)) if lam <= 1 else (
            table.best_integer.value >= table.optimum * (1 - 1e-9))


# ---------------------------------------------------------------------------------------- the commands


def parse(argv):
    parser = argparse.ArgumentParser(prog="uwbench theory")
    cmd.add_arguments(parser)
    return parser.parse_args(argv)


def test_module_keeps_heavy_imports_inside_functions():
    import ast

    tree = ast.parse(open(cmd.__file__).read())
    light = {"uwbench.errors"}  # imports no other module (tests/repo/test_import_graph.py checks it)
    top = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import)
           for alias in node.names} | {node.module.split(".")[0] for node in tree.body
                                       if isinstance(node, ast.ImportFrom) and node.module and node.module not in light}
    assert not top & {"numpy", "matplotlib", "torch", "uwbench"}
    assert cmd.HELP and callable(cmd.run)


def test_bound_command_prints_every_writer(capsys):
    args = parse(["bound", "--seq-len", "50", "--memory-size", "4", "--lam", "0.9", "--cache-size", "5"])
    assert cmd.run(args) == 0
    out = capsys.readouterr().out
    for text in ("regular", "uniform", "cached_uniform", "random", "10,20,...,50", "5,10,...,50",
                 "g_lambda(51, 4) = 0.6457", "11,10,10,10,10"):
        assert text in out
    assert "maximum" in out
    lines = out.splitlines()
    model = next(line for line in lines if "g_lambda(51, 4)" in line)
    paper = next(line for line in lines if "g_lambda(50, 4)" in line)
    assert "51 encoder steps the model runs" in model and "'/ optimum' divides by this" in model
    assert "paper's optimum over the T=50 input tokens" in paper and "g_lambda(50, 4) = 0.6513" in paper
    assert "best integer split of the 51 steps" in out
    assert cmd.run(parse(["bound", "--lam", "1.2"])) == 0
    out = capsys.readouterr().out
    assert "minimum" in out
    # without --cache-size the cached_uniform row is there at the writer's default L
    from uwbench.writing.cached_uniform import CachedUniformConfig
    assert f"L={CachedUniformConfig.cache_size}, interval" in out


def test_bound_command_reports_the_rule_and_value():
    with pytest.raises(ValueError, match=r"`memory_size >= 1` must hold, got 0"):
        cmd.run(parse(["bound", "--memory-size", "0"]))
    with pytest.raises(ValueError, match=r"`lam > 0` must hold"):
        cmd.run(parse(["bound", "--lam", "-0.5"]))


def test_format_positions():
    assert cmd.format_positions(list(range(51))) == "0..50"
    assert cmd.format_positions([10, 20, 30, 40, 50]) == "10,20,...,50"
    assert cmd.format_positions([1, 2, 4]) == "1,2,4"
    assert cmd.format_positions([1, 2, 4, 8, 16]) == "1,2,4,...,16"
    assert cmd.format_positions([]) == "none"
    assert cmd.format_positions(None) == "random mask"


def test_g_lambda_figure():
    lams = [0.5, 0.9, 1.0]
    fig = cmd.figure_g_lambda(20, lams)
    (ax,) = fig.axes
    assert "g_\\lambda" in ax.get_title() and "T = 20" in ax.get_title()
    assert "compression ratio" in ax.get_xlabel() and "g_\\lambda" in ax.get_ylabel()
    lines = ax.get_lines()
    assert len(lines) == len(lams)
    x, y = lines[1].get_data()
    np.testing.assert_allclose(x, np.arange(1, 21) / 20)  # (D+1)/T for D = 0..T-1
    np.testing.assert_allclose(y, [th.g_lambda(20, d, 0.9) for d in range(20)])
    np.testing.assert_allclose(lines[2].get_ydata(), 1.0)  # lambda = 1: C everywhere
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [r"$\lambda$ = 0.5", r"$\lambda$ = 0.9", r"$\lambda$ = 1"]


def test_plot_command_writes_a_png(tmp_path, capsys):
    out = tmp_path / "theory"
    assert cmd.run(parse(["plot", "--out", str(out), "--seq-len", "30", "--lams", "0.8", "0.95"])) == 0
    path = capsys.readouterr().out.strip()
    assert path == os.path.join(str(out), "g_lambda_T30.png")
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert parse(["plot"]).out == os.path.join("runs", "theory")
