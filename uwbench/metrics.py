"""Metrics as data: what a task measures (accuracy or MSE: its direction and display scale) and where a
value was measured (the split: an evaluation, the test set, the best evaluation of a run, the final
re-runs of a cell). A metric's MLflow key is built from the two (``eval_accuracy``, ``best_eval_mse``)
and read back by lookup, never by splitting the string.

The trainer logs ``eval_<measure>`` at every evaluation and ``best_eval_<measure>`` / ``test_<measure>``
at the end; a study's objective is ``eval_<measure>`` or ``test_<measure>``, and the value of a finished
run for it is held by ``best_eval_<measure>`` or ``test_<measure>`` (``Metric.run_metric``).

A multi-objective study also trades the task's measure against a *cost* (``Cost``): what a run spends
rather than how well it scores, always minimised. ``seconds_per_100`` (seconds per 100 updates, the
trainer's steady-state timing, held by ``mean_seconds_per_100``) and ``compression_ratio`` ((D+1)/T of
paper Section 2.2, derived from the run's config). Peak memory is not recorded per run, so it is no
objective. ``objective_keys(costs=True)`` lists every key an objective list may use.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from uwbench.errors import UserError


@dataclass(frozen=True)
class Measure:
    """What a task scores: its name (the task's ``metric``), direction and how a report shows it."""

    name: str  # accuracy | mse
    higher_is_better: bool
    scale: float = 1.0  # display scale: accuracy in percent, as the paper reports it
    unit: str = ""  # display unit after scaling
    decimals: int = 3  # display decimals after scaling
    title: str = ""  # display name ("accuracy", "MSE")
    relative: bool = False  # differences read as a share of the value (an MSE), not in its units (accuracy)

    @property
    def direction(self) -> str:
        return "maximize" if self.higher_is_better else "minimize"

    def better(self, a: float, b: float) -> bool:
        """Is ``a`` strictly better than ``b``?"""
        return a > b if self.higher_is_better else a < b

    def sign(self) -> float:
        """+1 or -1: ``max(values, key=lambda v: sign * v)`` is the best."""
        return 1.0 if self.higher_is_better else -1.0


MEASURES: Dict[str, Measure] = {
    "accuracy": Measure("accuracy", True, scale=100.0, unit="%", decimals=1, title="accuracy"),
    "mse": Measure("mse", False, scale=1.0, unit="", decimals=3, title="MSE", relative=True),
}

# Where a value was measured. ``eval``: one evaluation during training (a learning curve); ``best_eval``:
# the best evaluation of a run; ``test``: the test set at the end of a run; ``final_test``: a cell's
# summary over its final runs (``_mean`` / ``_std`` suffixes on the parent run).
SPLITS = ("eval", "best_eval", "test", "final_test")
OBJECTIVE_SPLITS = ("eval", "test")  # what a study may optimise
RUN_SPLIT = {"eval": "best_eval", "test": "test"}  # objective split -> the finished run's metric
# the largest gradient before clipping over an evaluation window (the largest tensor's L2 norm under
# per-tensor clipping, the global norm under global clipping): where a loss spike or a collapse shows first
GRAD_NORM = "grad_norm_max"


@dataclass(frozen=True)
class Metric:
    split: str
    measure: Measure

    @property
    def key(self) -> str:
        """The MLflow / runs.csv name: ``<split>_<measure>``."""
        return f"{self.split}_{self.measure.name}"

    @property
    def direction(self) -> str:
        return self.measure.direction

    @property
    def is_eval(self) -> bool:
        """Measured on evaluation data (never the test set): what a configuration may be chosen by."""
        return self.split in ("eval", "best_eval")

    def at(self, split: str) -> "Metric":
        """The same measure at another split (``eval_accuracy`` -> ``test_accuracy``)."""
        return metric(split, self.measure.name)

    @property
    def run_metric(self) -> "Metric":
        """The metric of a finished run that holds this objective's value (``eval`` -> ``best_eval``)."""
        return self.at(RUN_SPLIT[self.split])

    def __str__(self) -> str:
        return self.key


def metric(split: str, measure: str) -> Metric:
    if split not in SPLITS:
        raise UserError(f"unknown metric split {split!r}; splits: {', '.join(SPLITS)}")
    if measure not in MEASURES:
        raise UserError(f"unknown measure {measure!r}; measures: {', '.join(MEASURES)}")
    return Metric(split, MEASURES[measure])


def _table() -> Dict[str, Metric]:
    return {m.key: m for m in (metric(s, n) for s in SPLITS for n in MEASURES)}


def get(key: str) -> Metric:
    """The metric named ``key`` (``eval_accuracy``, ``best_eval_mse``, ...): a lookup, not a parse."""
    table = _table()
    if key not in table:
        raise UserError(f"unknown metric {key!r}; metrics: {', '.join(sorted(table))}")
    return table[key]


def objective_keys(costs: bool = False) -> Tuple[str, ...]:
    """The metrics a study's objective may name (``eval_accuracy``, ``test_accuracy``, ...); with
    ``costs``, also the costs an objective list may trade them against (``seconds_per_100``, ...)."""
    keys_ = tuple(metric(s, n).key for n in MEASURES for s in OBJECTIVE_SPLITS)
    return keys_ + tuple(COSTS) if costs else keys_


def keys(*splits: str) -> Tuple[str, ...]:
    """The metric keys at these splits, split by split (``keys("test", "best_eval")`` for runs.csv)."""
    return tuple(metric(s, n).key for s in splits for n in MEASURES)


def measure(name: str) -> Measure:
    if name not in MEASURES:
        raise UserError(f"unknown measure {name!r}; measures: {', '.join(MEASURES)}")
    return MEASURES[name]


def value_of(result, key: str, config: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Optional[float]:
    """The value of objective ``key`` in a finished ``RunResult`` (its best evaluation or its test value,
    or a cost: ``Cost.value``; ``config`` is the run's resolved config, for derived costs); None when
    missing or not finite. A measure the task does not score is a ValueError."""
    if key in COSTS:
        return COSTS[key].value(result, config)
    m = get(key)
    if m.measure.name != result.metric:
        raise UserError(f"objective {key} does not match the task's metric {result.metric!r}; "
                         f"use {' or '.join(metric(s, result.metric).key for s in OBJECTIVE_SPLITS)}")
    value = result.best_eval if m.run_metric.split == "best_eval" else result.test
    return None if value is None or not math.isfinite(value) else float(value)


# --------------------------------------------------------------------------------------------------
# Costs: what a run spends (a multi-objective study's other objectives)
# --------------------------------------------------------------------------------------------------


def _finite_or_none(value) -> Optional[float]:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _config_ratio(result, config) -> Optional[float]:
    from uwbench import axes

    return axes.values(config).get("compression_ratio") if config else None


@dataclass(frozen=True)
class Cost:
    """A cost objective: its key in a study's objective list, the finished run's metric (MLflow and
    runs.csv) that holds it, and how its value is read from a ``RunResult`` (and the run's config)."""

    key: str
    run_key: str  # the finished run's metric / runs.csv column
    read: Callable[[Any, Optional[Mapping[str, Mapping[str, Any]]]], Optional[float]]
    title: str
    unit: str = ""
    decimals: int = 3
    direction: str = "minimize"  # a cost is always minimised

    def value(self, result, config=None) -> Optional[float]:
        return _finite_or_none(self.read(result, config))


COSTS: Dict[str, Cost] = {
    "seconds_per_100": Cost("seconds_per_100", "mean_seconds_per_100",
                            lambda result, _config: result.seconds_per_100, "seconds per 100 updates", "s", 3),
    "compression_ratio": Cost("compression_ratio", "compression_ratio", _config_ratio, "compression ratio (D+1)/T",
                              "", 3),
}


def is_cost(key: str) -> bool:
    return key in COSTS


def direction_of(key: str) -> str:
    """The direction of an objective key: a measure's (``eval_accuracy``: maximize) or a cost's (minimize)."""
    return COSTS[key].direction if key in COSTS else get(key).direction


def run_key_of(key: str) -> str:
    """The finished run's metric that holds objective ``key`` (``eval_accuracy`` -> ``best_eval_accuracy``,
    ``seconds_per_100`` -> ``mean_seconds_per_100``)."""
    return COSTS[key].run_key if key in COSTS else get(key).run_metric.key


def title_of(key: str) -> str:
    """A display name for an objective key (``test accuracy``, ``seconds per 100 updates``)."""
    if key in COSTS:
        return COSTS[key].title
    m = get(key)
    return f"{m.split.replace('_', ' ')} {m.measure.title}"
