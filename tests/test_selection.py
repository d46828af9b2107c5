"""The selection rule (``uwbench.selection``): a faithful grid point is chosen by the evaluation metric,
never the test metric, and the sweep's summary, the MLflow parent run and the report name the same one."""
from __future__ import annotations

import json
import textwrap

import pytest

from uwbench import metrics, selection
from uwbench.sweeps.common import Record

STUDY = """
id: pick_by_eval
title: t
question: q
artifact: "Figure 0"
mode: faithful
task: {name: copy, seq_len: 4}
fixed:
  train: {steps: 2}
cells:
  - {model: lstm, label: LSTM, set: {model: {hidden_size: 8}}}
search:
  train.lr: {type: choice, values: [1.0e-3, 1.0e-4]}
seeds: [0, 1]
objective: {metric: eval_accuracy, direction: maximize}
profiles:
  cpu: {}
  smoke: {}
"""

# lr 1e-3: the better evaluation metric; lr 1e-4: the better test metric (it must never be chosen)
RUNS = [  # (lr, seed, best eval accuracy, test accuracy)
    (1e-3, 0, 0.90, 0.50), (1e-3, 1, 0.88, 0.52),
    (1e-4, 0, 0.60, 0.95), (1e-4, 1, 0.62, 0.97),
]
EVAL_BEST = {"train.lr": 1e-3}


def _records(cell_id, with_eval: bool):
    # a faithful final's ``value`` is its objective (here the evaluation metric): what the backends record
    return [Record(cell=cell_id, role="final", status="finished", value=ev, test=te, params={"train.lr": lr},
                   seed=seed, number=i, eval=ev if with_eval else None)
            for i, (lr, seed, ev, te) in enumerate(RUNS)]


def test_summary_parent_run_and_report_name_the_best_eval_point(tmp_path, tracking_uri):
    from uwbench.config import flatten
    from uwbench import snapshot
    from uwbench.report.data import study
    from uwbench.report.analysis.summary import summarize
    from uwbench.spec import load_plan
    from uwbench.sweeps import common, display
    from uwbench.tracking.mlflow import Run, client
    from uwbench.training.config import resolve_run

    path = tmp_path / "pick_by_eval.yaml"
    path.write_text(textwrap.dedent(STUDY))
    plan = load_plan(str(path), "cpu")
    cell = plan.cells[0]
    uri, experiment_id, cell_runs = common.setup_tracking(plan, tracking_uri, None, "optuna")
    for i, (lr, seed, ev, te) in enumerate(RUNS):
        job = common.Job(study=plan.id, profile=plan.profile, mode=plan.mode, spec_hash=plan.spec_hash,
                         backend="optuna", cell=cell, role="final", params={"train.lr": lr, "seed": seed}, seed=seed,
                         trial_number=i, objective_metric="eval_accuracy", experiment_id=experiment_id,
                         parent_run_id=cell_runs[cell.id], uri=uri)
        resolved = resolve_run(job.config()).as_dict()
        run = Run(plan.id, run_name=job.run_name, tags={**common.child_tags(job, resolved), "status": "finished"},
                  parent_run_id=cell_runs[cell.id], uri=uri, experiment_id=experiment_id)
        run.log_params(flatten(resolved))
        run.log_metrics({"best_eval_accuracy": ev, "test_accuracy": te}, 0)
        run.end()
    records = _records(cell.id, with_eval=False)

    # the sweep's printed summary
    text = display.summary(plan, records)
    row = next(line for line in text.splitlines() if line.startswith(cell.id))
    assert "lr=0.001" in row and "51.00 +- 1.41 (n=2)" in row, text
    assert "0.0001" not in row

    # the MLflow parent run
    common.close_cell_runs(plan, experiment_id, cell_runs, records, uri, [cell.id])
    parent = client(uri).get_run(cell_runs[cell.id]).data
    assert json.loads(parent.tags["best_params"]) == EVAL_BEST
    assert parent.metrics["final_test_accuracy_mean"] == pytest.approx(0.51)
    assert parent.metrics["n_final"] == 2

    # the report, from the same MLflow runs
    snap = snapshot.from_mlflow(plan.id, uri, with_curves=False)
    view = study.load(str(path), snap.runs)
    summary = summarize(view, snap.runs)
    assert summary.loc[0, "lr"] == pytest.approx(1e-3)
    assert summary.loc[0, "mean"] == pytest.approx(51.0) and summary.loc[0, "grid_points"] == 2


def test_a_recorded_eval_value_decides_even_when_the_objective_is_the_test_metric():
    records = [Record(cell="c", role="final", status="finished", value=te, test=te, params={"train.lr": lr},
                      seed=seed, number=i, eval=ev) for i, (lr, seed, ev, te) in enumerate(RUNS)]
    choice = selection.choose("faithful", "test_accuracy", records)
    assert choice.params == EVAL_BEST and choice.tests == [0.50, 0.52] and choice.n_points == 2
    # without an evaluation metric there is nothing to choose by: an error, not the test metric
    for r in records:
        r.eval = None
    with pytest.raises(ValueError, match="evaluation metric"):
        selection.choose("faithful", "test_accuracy", records)


def test_the_report_frame_rule_agrees_with_the_sweep_rule():
    import pandas as pd

    frame = pd.DataFrame([{"search_params": json.dumps({"train.lr": lr}), "lr": lr, "clip": 10.0,
                           "best_eval_accuracy": ev, "test_accuracy": te} for lr, _, ev, te in RUNS])
    kept, n = selection.choose_rows(frame, metrics.measure("accuracy"))
    assert n == 2 and sorted(kept["test_accuracy"]) == [0.50, 0.52]
    mse = frame.rename(columns={"best_eval_accuracy": "best_eval_mse"})
    kept, _ = selection.choose_rows(mse, metrics.measure("mse"))  # lower is better
    assert sorted(kept["lr"]) == [1e-4, 1e-4]


def test_best_trial_ties_go_to_the_earliest_and_finals_never_count():
    rows = [Record("c", "trial", "finished", 0.8, 0.1, {"a": 1}, 0, 3),
            Record("c", "trial", "finished", 0.8, 0.9, {"a": 2}, 0, 1),
            Record("c", "trial", "pruned", None, None, {"a": 3}, 0, 0),
            Record("c", "final", "finished", 0.99, 0.99, {"a": 4}, 1, 0)]
    assert selection.best_trial(rows, "maximize").number == 1
    assert selection.best_trial(rows, "minimize").number == 1
    choice = selection.choose("tuned", "eval_accuracy", rows)
    assert choice.params == {"a": 2} and choice.tests == [0.99]
    assert selection.best_so_far(rows, "maximize").role == "final"


def test_best_point_ties_go_to_the_first_point_in_sorted_order():
    acc = metrics.measure("accuracy")
    assert selection.best_point({"b": [0.5], "a": [0.5], "c": [None]}, acc) == "a"
    assert selection.best_point({"a": [None]}, acc) is None


def test_curves_and_traces_show_the_runs_that_count():
    import pandas as pd

    from uwbench import snapshot
    from uwbench.report.rendering import figures
    from uwbench.report.data import traces

    rows = [{"study": "s", "cell": "dnc-uniform", "role": "final", "status": "finished", "seed": seed,
             "run_id": f"r{len(RUNS) - 1 - i}", "task": "copy", "model": "dnc", "controller": "ln_lstm", "writer": "uniform",
             "seq_len": 8, "memory_size": 2, "lr": lr, "clip": 10.0,
             "search_params": json.dumps({"train.lr": lr}), "best_eval_accuracy": ev, "test_accuracy": te}
            for i, (lr, seed, ev, te) in enumerate(RUNS)]
    frame = snapshot.Snapshot(snapshot.runs_text(rows)).runs
    assert sorted(selection.counted_runs(frame)["run_id"]) == ["r2", "r3"]  # the best-eval point
    curves = pd.DataFrame([{"run_id": f"r{i}", "metric": "eval_accuracy", "step": 1, "value": 0.5}
                           for i in range(len(RUNS))])
    assert sorted(set(figures.curve_frame(curves, frame, "eval_accuracy")["run_id"])) == ["r2", "r3"]
    assert traces.trace_targets(frame, ["dnc-uniform"]) == {"dnc-uniform": "r3"}  # its seed 0


def test_finished_finals_leave_out_trials_and_runs_still_going_or_failed():
    import pandas as pd

    runs = pd.DataFrame({"run_id": list("abcd"), "role": ["final", "trial", "final", "final"],
                         "status": ["finished", "finished", "running", "failed"]})
    assert list(selection.finished_finals(runs)["run_id"]) == ["a"]
    empty = pd.DataFrame()
    assert selection.finished_finals(empty) is empty
