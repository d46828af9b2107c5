"""The paper's theory (Le, Tran & Venkatesh, ICLR 2019, §2.1-2.2 and appendix): write schedules, the
memorisation bound and its optimum.

Pure Python / numpy, no torch: the writers in ``uwbench.writing`` and the sweep/report code build on
these functions, so the schedule a model uses and the schedule the theory scores are the same code.

Conventions. A sequence has ``n_steps`` encoder steps, 0-indexed ``0 .. n_steps-1`` (for the synthetic
tasks ``n_steps = T + 1``: T tokens and the end marker). A *schedule* is the sorted list of 0-indexed
positions at which memory is written.

The theorems use 1-indexed write steps ``1 <= K_1 < ... < K_D < T`` over a horizon of T steps. A
0-indexed schedule over ``n_steps`` steps is scored with ``K_j = position_j + 1`` and ``T = n_steps``
(every step the encoder reads is an input whose contribution counts, the end marker included);
``intervals_from_positions(schedule, n_steps, base=0)`` does this conversion.

What is implemented, by the paper's numbering:
- f_lambda(x) = sum_{j<x} lambda^j = (1 - lambda^x) / (1 - lambda), x if lambda = 1 (Theorem 2).
- I_lambda = C/T sum_i f_lambda(l_i), the lower bound on the average contribution of a MANN whose D
  slots hold the writes K_1..K_D (Theorem 2; Theorem 1 is the case D = 0).
- The real intervals l_i = T/(D+1) that maximise I_lambda for lambda <= 1 (Theorem 3) and minimise it
  for lambda > 1 (appendix), and the value there g_lambda(T, D) (appendix, proof of Theorem 3).
- The integer version: the best split of T steps into D+1 positive intervals, found exactly.
- The writers' schedules (Eq. 7, §2.3.1, the random writer) scored side by side: ``uwbench.writer_bounds``.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from uwbench.errors import UserError

SCHEDULE_RULES = ("code", "paper")


def uniform_interval(n_steps: int, memory_size: int, rule: str = "code") -> int:
    """The UW write interval.

    ``code`` (the authors' released code, docs/reference.md §5.1): s = floor(n_steps / (D+1)) over all encoder
    steps (the end marker included). ``paper`` (Eq. 7): s = floor(T / (D+1)) with T = n_steps - 1
    tokens (the end marker is not counted).
    """
    _check_positive("n_steps", n_steps)
    _check_positive("memory_size", memory_size)
    if rule == "code":
        return n_steps // (memory_size + 1)
    if rule == "paper":
        return max(n_steps - 1, 1) // (memory_size + 1)
    raise UserError(f"schedule rule must be one of {', '.join(SCHEDULE_RULES)}, got {rule!r}")


def uniform_positions(
    n_steps: int, memory_size: int, cache_size: Optional[int] = None, rule: str = "code"
) -> List[int]:
    """0-indexed write positions of Uniform Writing (Eq. 7) or, with ``cache_size`` L, of Cached
    Uniform Writing (§2.3.1: interval min(s, L)).

    ``code`` rule (docs/reference.md §5.1): positions s, 2s, ... <= n_steps-1; step 0 is never a write; if
    s == 0 (D+1 > n_steps) there is one write at floor(n_steps/2).
    ``paper`` rule (Eq. 7): 1-indexed t = k*s for t <= T (T = n_steps - 1 tokens), i.e. 0-indexed t-1;
    if s == 0 every token step is a write.
    """
    s = uniform_interval(n_steps, memory_size, rule)
    if cache_size is not None:
        _check_positive("cache_size", cache_size)
        s = min(s, cache_size) if s > 0 else s
    if rule == "code":
        if s == 0:
            return [n_steps // 2]
        return list(range(s, n_steps, s))
    tokens = max(n_steps - 1, 1)
    if s == 0:
        return list(range(tokens))
    return [t - 1 for t in range(s, tokens + 1, s)]


def positions_to_mask(positions: List[int], n_steps: int) -> List[bool]:
    """Schedule -> per-step boolean mask (True = write)."""
    mask = [False] * n_steps
    for p in positions:
        if not 0 <= p < n_steps:
            raise UserError(f"write position must be in [0, {n_steps - 1}], got {p}")
        mask[p] = True
    return mask


def compression_ratio(seq_len: int, memory_size: int) -> float:
    """(D+1)/T: the paper's compression ratio (§2.2, after Theorem 3)."""
    _check_positive("seq_len", seq_len)
    return (memory_size + 1) / seq_len


def optimal_interval(seq_len: int, memory_size: int) -> float:
    """T/(D+1): the optimal (real) write interval of Theorem 3."""
    _check_positive("seq_len", seq_len)
    return seq_len / (memory_size + 1)


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, (int,)) or isinstance(value, bool) or value < 1:
        raise UserError(f"`{name} >= 1` must hold, got {value!r}")


# --------------------------------------------------------------------------------------------------
# The memorisation bound (Theorems 1-3 and the appendix proofs)
# --------------------------------------------------------------------------------------------------

ArrayLike = Union[float, Sequence[float], np.ndarray]


def f_lambda(x: ArrayLike, lam: ArrayLike):
    """f_lambda(x) = (1 - lambda^x) / (1 - lambda) for lambda != 1 and x for lambda = 1 (Theorem 2).

    For integer x it is the geometric sum sum_{j=0}^{x-1} lambda^j: the total contribution of an
    interval of x steps to the state that ends it. Concave in x for lambda < 1, linear for lambda = 1,
    convex for lambda > 1 (appendix, proof of Theorem 3). Broadcasts over arrays; a float for scalars.

    Computed as expm1(x log1p(lambda - 1)) / (lambda - 1): ``lambda - 1`` is exact in floating point
    near 1 and expm1/log1p keep full precision there, so the value is continuous through lambda = 1.
    """
    xs = np.asarray(x, dtype=float)
    lams = np.asarray(lam, dtype=float)
    if not np.all(lams > 0) or not np.all(np.isfinite(lams)):
        raise UserError(f"`lam > 0` must hold (finite), got {lam}")
    if not np.all(xs >= 0) or not np.all(np.isfinite(xs)):
        raise UserError(f"`x >= 0` must hold (finite), got {x}")
    d = lams - 1.0  # exact for lam in [0.5, 2] (Sterbenz), so no cancellation near lam = 1
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        geometric = np.expm1(xs * np.log1p(d)) / np.where(d == 0, 1.0, d)
    out = np.where(d == 0, xs, geometric)
    return float(out) if out.ndim == 0 else out


def intervals_from_positions(positions: Sequence[int], T: int, *, base: int = 1) -> List[int]:
    """The interval lengths l_1..l_{D+1} of Theorem 2 for write steps K_1 < ... < K_D:

        l_1 = K_1,  l_i = K_i - K_{i-1} (1 < i <= D),  l_{D+1} = T - K_D;   sum_i l_i = T.

    ``positions`` are 1-indexed write steps (``base=1``, the paper's K_j, 1 <= K_j <= T) or 0-indexed
    schedule positions (``base=0``, the rest of uwbench, 0 <= p < T, converted by K = p + 1). For a
    schedule over ``n_steps`` encoder steps pass ``T = n_steps``: e.g. the code's UW schedule for
    T = 50 tokens, D = 4, is positions 10, 20, .., 50 over 51 steps, i.e. K = 11, 21, .., 51 and
    l = [11, 10, 10, 10, 10, 0].

    Theorem 2 asks K_D < T. A write at the last step (K_D = T) is allowed here: it gives l_{D+1} = 0
    and f_lambda(0) = 0, consistent with the theorem because such a write stores what the final state
    h_T holds anyway. No writes gives [T] (Theorem 1).
    """
    if base not in (0, 1):
        raise UserError(f"`base in (0, 1)` must hold, got {base!r}")
    _check_positive("T", T)
    steps = []
    for p in positions:
        if not isinstance(p, Integral) or isinstance(p, bool):
            raise UserError(f"write positions must be integers, got {p!r}")
        steps.append(int(p) + 1 - base)
    if steps and (steps[0] < 1 or steps[-1] > T):
        low, high = (1, T) if base == 1 else (0, T - 1)
        raise UserError(f"`{low} <= position <= {high}` must hold (base {base}), got {list(positions)}")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise UserError(f"write positions must be strictly increasing (K_1 < ... < K_D), got {list(positions)}")
    bounds = [0] + steps + [T]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def kept_writes(positions: Sequence[int], memory_size: Optional[int]) -> List[int]:
    """The writes still in a memory of ``memory_size`` slots at the end: the most recent D of them.

    Theorem 2 scores the D writes the D slots hold. A schedule with more writes than slots must
    overwrite; scoring it assumes first-in-first-out overwriting (the first slot is reused first, as
    the paper's appendix says of UW's extra write at the end marker, docs/reference.md §5.1). ``None``
    keeps every write.
    """
    positions = list(positions)
    if memory_size is None:
        return positions
    _check_positive("memory_size", memory_size)
    return positions[-memory_size:] if len(positions) > memory_size else positions


def contribution_bound(
    writes: Sequence[float],
    T: Optional[int],
    lam: float,
    C: float = 1.0,
    *,
    given: str = "positions",
    base: int = 1,
    memory_size: Optional[int] = None,
) -> float:
    """I_lambda = C/T sum_{i=1}^{D+1} f_lambda(l_i), Theorem 2's lower bound on the average contribution
    of the T inputs to a MANN whose memory holds the writes (Theorem 1 when there are none).

    ``writes`` are write positions (``given="positions"``; ``base`` and the conventions as in
    ``intervals_from_positions``; with ``memory_size`` only the most recent D writes count, see
    ``kept_writes``) or the intervals l_i themselves (``given="intervals"``: non-negative reals that
    sum to T; T may be None then). Any lambda > 0: for lambda = 1 the bound is C for every schedule
    (appendix, proof of Theorem 3), and it is continuous there.
    """
    _check_positive_real("C", C)
    if given == "positions":
        _check_positive("T", T)
        intervals = np.asarray(intervals_from_positions(kept_writes(writes, memory_size), T, base=base), float)
    elif given == "intervals":
        if memory_size is not None:
            raise UserError(f"`memory_size` applies to positions only, got given={given!r}")
        intervals = np.asarray(list(writes), dtype=float)
        if intervals.size == 0 or not np.all(intervals >= 0) or not np.all(np.isfinite(intervals)):
            raise UserError(f"intervals must be non-negative and at least one, got {list(writes)}")
        total = float(intervals.sum())
        if T is None:
            T = total
        if not math.isclose(total, T, rel_tol=1e-9, abs_tol=1e-9):
            raise UserError(f"`sum(intervals) == T` must hold, got sum {total} and T {T}")
    else:
        raise UserError(f"`given in ('positions', 'intervals')` must hold, got {given!r}")
    _check_positive_real("T", T)
    return float(C * np.sum(f_lambda(intervals, lam)) / T)


def g_lambda(T: ArrayLike, D: ArrayLike, lam: ArrayLike, C: float = 1.0):
    """g_lambda(T, D) = C (D+1)/T (1 - lambda^{T/(D+1)}) / (1 - lambda): the bound at the optimal real
    intervals T/(D+1) (appendix, proof of Theorem 3): the maximum of I_lambda for lambda <= 1 and its
    minimum for lambda > 1. It depends on T and D only through the compression ratio x = (D+1)/T
    (g = C x f_lambda(1/x)), increases with D for lambda < 1, is C for lambda = 1, and D = 0 gives
    Theorem 1's average contribution of a plain RNN. Broadcasts over arrays.
    """
    Ts = np.asarray(T, dtype=float)
    Ds = np.asarray(D, dtype=float)
    if not np.all(Ts > 0):
        raise UserError(f"`T > 0` must hold, got {T}")
    if not np.all(Ds >= 0):
        raise UserError(f"`D >= 0` must hold, got {D}")
    _check_positive_real("C", C)
    out = C * (Ds + 1) / Ts * f_lambda(Ts / (Ds + 1), lam)
    return float(out) if np.ndim(out) == 0 else out


def optimal_intervals(T: float, D: int) -> np.ndarray:
    """The optimal real intervals of Theorem 3: l_1 = ... = l_{D+1} = T/(D+1) (Uniform Writing).

    Optimal for every 0 < lambda <= 1 (maximum; Jensen on the concave f_lambda) and for lambda > 1
    (minimum; f_lambda convex), appendix.
    """
    _check_positive_real("T", T)
    if not isinstance(D, Integral) or isinstance(D, bool) or D < 0:
        raise UserError(f"`D >= 0` must hold (an integer), got {D!r}")
    return np.full(int(D) + 1, T / (int(D) + 1))


class IntegerSplit(NamedTuple):
    """A split of T steps into D+1 positive integer intervals (largest first), its write steps
    (1-indexed K_1..K_D, the running sums) and its bound I_lambda."""

    intervals: Tuple[int, ...]
    positions: Tuple[int, ...]
    value: float


def most_even_split(T: int, D: int) -> List[int]:
    """T steps in D+1 integer intervals as equal as integers allow: T mod (D+1) intervals of
    floor(T/(D+1)) + 1, the rest floor(T/(D+1)) (largest first). Every other split majorises it, so it
    maximises I_lambda for lambda < 1 (f_lambda strictly concave: Karamata) and minimises it for
    lambda > 1, whether or not D+1 divides T; it is Theorem 3's optimum when D+1 divides T.
    """
    _check_positive("T", T)
    _check_non_negative("D", D)
    if T < D + 1:
        raise UserError(f"`T >= D + 1` must hold (one step per interval), got T={T}, D={D}")
    q, r = divmod(T, D + 1)
    return [q + 1] * r + [q] * (D + 1 - r)


def best_integer_split(T: int, D: int, lam: float, maximize: bool = True, C: float = 1.0) -> IntegerSplit:
    """The exact optimum of I_lambda over integer write steps 1 <= K_1 < ... < K_D < T (Theorem 2), i.e.
    over the splits of T into D+1 positive integer intervals.

    Dynamic programming over (intervals used, steps covered): O(D T^2) time, exact up to float
    rounding. Use it for small T and D to see Theorem 3 in integers: for lambda < 1 the maximum is the
    most even split (``most_even_split``), for lambda > 1 the most even split is the minimum
    (``maximize=False``), and for lambda = 1 every split gives C. Ties go to the shortest interval
    found first; the returned intervals are sorted largest first.
    """
    _check_positive("T", T)
    _check_non_negative("D", D)
    if T < D + 1:
        raise UserError(f"`T >= D + 1` must hold (one step per interval), got T={T}, D={D}")
    sign = 1.0 if maximize else -1.0
    gain = sign * f_lambda(np.arange(T + 1), lam)  # (T+1,) gain[l] = +-f(l); maximise the sum
    gain[0] = -np.inf  # intervals are positive
    best = gain.copy()  # best[s]: best sum of one interval covering s steps
    choices = []  # choices[k][s]: the last interval's length in the best k+2-interval split of s
    for _ in range(D):
        nxt = np.full(T + 1, -np.inf)
        choice = np.zeros(T + 1, dtype=int)
        for s in range(2, T + 1):
            cand = best[s - 1 : 0 : -1] + gain[1:s]  # last interval l = 1..s-1, the rest covers s-l
            j = int(np.argmax(cand))
            nxt[s], choice[s] = cand[j], j + 1
        best = nxt
        choices.append(choice)
    parts, s = [], T
    for choice in reversed(choices):
        parts.append(int(choice[s]))
        s -= parts[-1]
    parts.append(s)
    parts.sort(reverse=True)
    positions = tuple(int(k) for k in np.cumsum(parts)[:-1])
    return IntegerSplit(tuple(parts), positions, contribution_bound(parts, T, lam, C, given="intervals"))


# --------------------------------------------------------------------------------------------------
# The random writer
# --------------------------------------------------------------------------------------------------


def random_write_prob(n_steps: int, memory_size: int) -> float:
    """The random writer's Bernoulli p = (D+1)/T (paper §3.1, docs/reference.md §5.3), T = n_steps - 1 tokens
    (the end marker is not counted, as in Eq. 7), clipped to 1."""
    _check_positive("n_steps", n_steps)
    _check_positive("memory_size", memory_size)
    return min(1.0, (memory_size + 1) / max(n_steps - 1, 1))


def random_positions(
    n_steps: int,
    memory_size: int,
    rng: Union[None, int, np.random.Generator] = None,
    p: Optional[float] = None,
) -> List[int]:
    """0-indexed write positions of the random writer: each of the ``n_steps`` steps is a write
    independently with probability p (default ``random_write_prob``: (D+1)/T), one mask per run.

    ``rng`` is a numpy Generator or an integer seed (the same seed gives the same schedule); None draws
    fresh entropy.
    """
    _check_positive("n_steps", n_steps)
    _check_positive("memory_size", memory_size)
    p = random_write_prob(n_steps, memory_size) if p is None else p
    if not 0.0 <= p <= 1.0:
        raise UserError(f"`0 <= p <= 1` must hold, got {p}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    mask = gen.random(n_steps) < p  # (n_steps,) True = write
    return [int(i) for i in np.flatnonzero(mask)]


def expected_random_bound(
    n_steps: int, lam: float, p: float, memory_size: Optional[int] = None, C: float = 1.0,
    progress: Optional[Callable[[int], None]] = None,
) -> float:
    """E[I_lambda] over the random writer's mask (each of the n_steps steps a write with probability p),
    exactly; ``memory_size`` D keeps only the most recent D writes (``kept_writes``), None keeps all.

    I_lambda = C/n sum_t lambda^{b_t - t}, with b_t the first kept write at or after step t (n if none):
    each step's contribution decays with its distance to the write that stores it (Theorem 2). For a
    step t (1-indexed, horizon n) exactly one of these holds:
      - no write in [t, n]: b_t = n, probability (1-p)^{n-t+1};
      - the first write at or after t is j = t+a and at most D-1 writes follow it (it is kept):
        b_t = j, probability (1-p)^a p P[Bin(n-j, p) <= D-1];
      - more than D writes in [t, n]: b_t = k, the D-th write from the end, with probability
        p P[Bin(n-k, p) = D-1] (1 - (1-p)^{k-t}) (at least one write in [t, k-1]).

    The work grows as n^2 (n vector operations of length n); ``progress(k)`` is called as the steps t are
    done (k: how many more since the last call), for a caller that shows progress on a long horizon.
    """
    _check_positive("n_steps", n_steps)
    if not 0.0 <= p <= 1.0:
        raise UserError(f"`0 <= p <= 1` must hold, got {p}")
    _check_positive_real("C", C)
    f_lambda(0.0, lam)  # validates lam
    n = n_steps
    cap = n + 1 if memory_size is None else memory_size  # more than n writes never happen
    _check_positive("memory_size", cap)
    q = 1.0 - p
    kept_prob, at_last = _binomial_columns(n, p, cap)  # (n+1,) P[Bin(m, p) <= D-1], P[Bin(m, p) = D-1]
    dth_last = p * at_last  # (n+1,) [m]: P[a write at n-m with exactly D-1 writes after it]
    steps = np.arange(n + 1)
    q_pow, lam_pow = q**steps, lam ** steps.astype(float)  # (n+1,) q^a, lambda^a
    total = 0.0
    for t in range(1, n + 1):
        span = n - t + 1  # a = 0 .. n-t: distance from t to the first write j = t + a
        term = q_pow[n - t + 1] * lam_pow[n - t]
        term += np.sum(q_pow[:span] * p * kept_prob[n - t :: -1][:span] * lam_pow[:span])
        if memory_size is not None:
            d = steps[1:span]  # k - t for the D-th write from the end at k = t+1 .. n
            term += np.sum(dth_last[n - t - d] * (1.0 - q_pow[d]) * lam_pow[d])
        total += term
        if progress is not None and (t % PROGRESS_EVERY == 0 or t == n):
            progress(t - (t - 1) // PROGRESS_EVERY * PROGRESS_EVERY)
    return float(C * total / n)


PROGRESS_EVERY = 1000  # steps t between calls of expected_random_bound's progress


def _binomial_columns(n: int, p: float, cap: int) -> Tuple[np.ndarray, np.ndarray]:
    """For m = 0..n: P[Bin(m, p) <= cap-1] and P[Bin(m, p) = cap-1], by the recurrence
    P[Bin(m+1) = k] = (1-p) P[Bin(m) = k] + p P[Bin(m) = k-1], keeping one row of cap values at a time
    (exact for p in {0, 1}; the whole table would take n x cap floats)."""
    row = np.zeros(cap)  # P[Bin(m, p) = k] for k = 0 .. cap-1
    row[0] = 1.0
    kept, last = np.empty(n + 1), np.empty(n + 1)
    for m in range(n + 1):
        kept[m], last[m] = row.sum(), row[cap - 1]
        row[1:] = (1.0 - p) * row[1:] + p * row[:-1]
        row[0] *= 1.0 - p
    return kept, last


def _check_non_negative(name: str, value: int) -> None:
    if not isinstance(value, Integral) or isinstance(value, bool) or value < 0:
        raise UserError(f"`{name} >= 0` must hold, got {value!r}")


def _check_positive_real(name: str, value: float) -> None:
    if not isinstance(value, Real) or isinstance(value, bool) or not value > 0 or not math.isfinite(value):
        raise UserError(f"`{name} > 0` must hold, got {value!r}")
