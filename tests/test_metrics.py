"""Metrics as data (``uwbench.metrics``): keys are built and looked up, never parsed; directions, display
scales and the run metric of an objective come from one table."""
from __future__ import annotations

import pytest

from uwbench import metrics


def test_keys_round_trip_through_the_table():
    for split in metrics.SPLITS:
        for name in metrics.MEASURES:
            m = metrics.metric(split, name)
            assert metrics.get(m.key) == m and m.split == split and m.measure.name == name
    assert metrics.get("best_eval_accuracy").split == "best_eval"  # an underscore in the split
    with pytest.raises(ValueError, match="unknown metric 'eval_loss'; metrics: best_eval_accuracy"):
        metrics.get("eval_loss")


def test_objectives_directions_and_run_metrics():
    assert metrics.objective_keys() == ("eval_accuracy", "test_accuracy", "eval_mse", "test_mse")
    assert metrics.get("eval_accuracy").direction == "maximize"
    assert metrics.get("test_mse").direction == "minimize"
    assert metrics.get("eval_mse").run_metric.key == "best_eval_mse"
    assert metrics.get("test_accuracy").run_metric.key == "test_accuracy"
    assert metrics.get("eval_accuracy").is_eval and not metrics.get("test_accuracy").is_eval
    assert metrics.get("eval_accuracy").at("final_test").key == "final_test_accuracy"


def test_display_scale_and_comparison():
    acc, mse = metrics.measure("accuracy"), metrics.measure("mse")
    assert (acc.scale, acc.unit) == (100.0, "%") and (mse.scale, mse.unit) == (1.0, "")
    assert acc.better(0.9, 0.8) and mse.better(0.1, 0.2) and not mse.better(0.2, 0.2)


def test_value_of_a_run_result():
    from uwbench.training.loop import RunResult

    result = RunResult(status="finished", metric="accuracy", test=0.5, best_eval=0.75)
    assert metrics.value_of(result, "eval_accuracy") == 0.75
    assert metrics.value_of(result, "test_accuracy") == 0.5
    with pytest.raises(ValueError, match="use eval_accuracy or test_accuracy"):
        metrics.value_of(result, "eval_mse")
    assert metrics.value_of(RunResult(status="finished", metric="mse", test=float("nan"), best_eval=1.0),
                            "test_mse") is None


def test_the_spec_objective_uses_the_table():
    from uwbench.spec import Objective

    assert Objective(metric="eval_mse", direction="minimize").run_metric == "best_eval_mse"
    with pytest.raises(ValueError, match="must be paired with direction: minimize"):
        Objective(metric="test_mse", direction="maximize")
