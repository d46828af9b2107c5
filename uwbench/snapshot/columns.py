"""The columns of a snapshot's files, in order, and the tags that tie a restored run to its snapshot.

``runs.csv`` has ``columns()``, then those of ``OPTIONAL_COLUMNS`` that some run has: each is read from a run's tag first, then from its flattened config params
(the axis's config path, ``uwbench.axes.param_paths``), then from its metrics. ``curves.csv`` has
``CURVE_COLUMNS`` (the learning curves ``CURVE_METRICS`` of the final runs), ``traces.csv`` ``TRACE_COLUMNS``.
"""
from __future__ import annotations

from typing import Tuple

from uwbench import axes, metrics

RESTORED_RUN_ID = "restored_run_id"  # the tag (and Optuna user attr) of a restored run: the run id its snapshot names
RESTORED_TRACE = "restored/trace.csv"  # a run restored from a snapshot (``uwbench restore``): its traces.csv rows

ID_COLUMNS = ("study", "cell", "role", "status", "seed", "trial_number", "run_id")
INTERRUPTED = ("running", "killed")  # MLflow statuses of a run that is not over: it resumes
META_COLUMNS = ("search_params", "device", "num_parameters", "spec_hash", "git_sha", "profile", "backend",
                "overrides")  # overrides: a --set sweep's values, JSON {section: {key: value}}
# Times: wall seconds per 100 updates and the run's own CPU seconds per 100 (it leaves out the waiting for a core;
# the reports compare it, over the runs that had a core to themselves: report.analysis.cores); torch_threads:
# the run's intra-op threads.
METRIC_COLUMNS = metrics.keys("test", "best_eval") + ("mean_seconds_per_100", "mean_cpu_seconds_per_100",
                                                      "train_seconds", "eval_seconds", "torch_threads")
# steps: the updates a run made (the last step of its learning curve; the configured budget for a run without
# one), so a reader sees each run's budget
BUDGET_COLUMNS = ("steps",)
STEPS_PARAM = "params.train.steps"
# Columns written only where a run has a value, so the snapshots of runs without one keep their bytes.
# population_size: the members of the population the run trained in (``uwbench.training.population``); a
# run trained alone has none.
OPTIONAL_COLUMNS = ("population_size",)
ID_INT_COLUMNS = ("trial_number", "num_parameters", "steps", "population_size")  # integer columns, not axes


def axis_columns() -> Tuple[str, ...]:
    """The run axes (``uwbench.axes``) that are not identity columns: task, model, ..., lr, clip."""
    return axes.csv_columns(exclude=ID_COLUMNS)


def columns() -> Tuple[str, ...]:
    return ID_COLUMNS + axis_columns() + BUDGET_COLUMNS + META_COLUMNS + METRIC_COLUMNS


def all_columns() -> Tuple[str, ...]:
    """``columns()`` and the optional ones (``OPTIONAL_COLUMNS``): what a run may carry."""
    return columns() + OPTIONAL_COLUMNS


def int_columns() -> Tuple[str, ...]:
    return axes.int_columns() + ID_INT_COLUMNS


def float_columns() -> Tuple[str, ...]:
    return axes.float_columns() + METRIC_COLUMNS


def numeric_columns() -> Tuple[str, ...]:
    return int_columns() + float_columns()


CURVE_METRICS = metrics.keys("eval") + ("train_loss", metrics.GRAD_NORM)
CURVE_COLUMNS = ("run_id", "metric", "step", "value")
TRACE_COLUMNS = ("cell", "run_id", "array", "row", "col", "value")
