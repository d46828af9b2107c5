"""Multi-objective studies: the objective list in the spec (pruning off, costs after the task's
measure), the Pareto rule of ``uwbench.selection`` on a fixture whose front is known, and the costs of
``uwbench.metrics``."""
from __future__ import annotations

import math
import os
import textwrap
from types import SimpleNamespace

import pytest

from uwbench import metrics, selection
from uwbench.spec import SpecError, expand, load_plan, parse
from uwbench.sweeps.common import Record

from tests.helpers import ROOT

PARETO_STUDY = os.path.join(ROOT, "studies", "pareto_copy.yaml")

BASE = """
id: mo
title: t
question: q
artifact: "none"
mode: tuned
task: {name: copy, seq_len: 4}
fixed: {train: {steps: 2}}
cells:
  - {model: dnc, grid: {model.writer: [regular, uniform]}}
search:
  train.lr: {type: float, low: 1.0e-3, high: 1.0e-2, log: true}
seeds: [0]
final_seeds: [1]
budget: {n_trials: 2}
profiles: {cpu: {}, smoke: {}}
"""

TWO = """
objective:
  - {metric: eval_accuracy, direction: maximize}
  - {metric: seconds_per_100, direction: minimize}
"""


def _spec(extra: str, profiles: str = ""):
    import yaml

    from uwbench.spec.load import _Loader

    base = textwrap.dedent(BASE)
    if profiles:  # the study's own profiles replaced, not given twice
        base = base.replace("profiles: {cpu: {}, smoke: {}}\n", profiles)
    return parse(yaml.load(base + textwrap.dedent(extra), Loader=_Loader), "mo.yaml")


# --------------------------------------------------------------------------------------------------
# The spec
# --------------------------------------------------------------------------------------------------


def test_an_objective_list_makes_a_multi_objective_plan():
    plan = expand(_spec(TWO + "pruning: {type: none}\n"), "cpu", "mo.yaml")
    assert plan.multi_objective
    assert [o.metric for o in plan.objectives] == ["eval_accuracy", "seconds_per_100"]
    assert plan.directions == ["maximize", "minimize"]
    assert plan.objective.metric == "eval_accuracy"  # the task's measure stays the first objective
    single = expand(_spec("pruning: {type: none}\n"), "cpu", "mo.yaml")
    assert not single.multi_objective and single.objectives == [single.objective]
    assert plan.spec_hash != single.spec_hash


def test_pruning_must_be_off_for_a_multi_objective_study():
    with pytest.raises(SpecError, match=r"pruning.type is 'median'.*cannot be pruned.*pruning: \{type: none\}"):
        _spec(TWO)  # the default pruning is median: never switched off silently
    with pytest.raises(SpecError, match=r"profiles.smoke.pruning.type is 'asha'"):
        _spec(TWO + "pruning: {type: none}\n").model_copy()  # the study alone is fine
        _spec(TWO + "pruning: {type: none}\n", profiles="profiles: {cpu: {}, smoke: {pruning: {type: asha}}}\n")


@pytest.mark.parametrize("extra, message", [
    ("objective: {metric: seconds_per_100, direction: minimize}\n", r"is a cost: a single objective is the task"),
    ("objective: [{metric: eval_accuracy, direction: maximize}]\npruning: {type: none}\n", r"at least two entries"),
    ("objective: [{metric: seconds_per_100, direction: minimize}, {metric: eval_accuracy, direction: maximize}]\n"
     "pruning: {type: none}\n", r"objective\[0\] must be the task's measure"),
    ("objective: [{metric: eval_accuracy, direction: maximize}, {metric: test_accuracy, direction: maximize}]\n"
     "pruning: {type: none}\n", r"objective\[1\] test_accuracy: only the first"),
    ("objective: [{metric: eval_accuracy, direction: maximize}, {metric: seconds_per_100, direction: maximize}]\n"
     "pruning: {type: none}\n", r"seconds_per_100 must be paired with direction: minimize"),
    ("objective: [{metric: eval_accuracy, direction: maximize}, {metric: seconds_per_100, direction: minimize}, "
     "{metric: seconds_per_100, direction: minimize}]\npruning: {type: none}\n", r"repeated metric"),
])
def test_bad_objective_lists_are_refused_with_the_fix(extra, message):
    with pytest.raises(SpecError, match=message):
        _spec(extra)


def test_the_pareto_study_validates_on_every_profile():
    for profile in ("paper", "cpu", "smoke"):
        plan = load_plan(PARETO_STUDY, profile)
        assert plan.multi_objective and plan.pruning.type == "none"
        assert {c.config["model"]["writer"] for c in plan.cells} >= {"regular", "uniform"}
        assert len({c.config["model"]["memory_size"] for c in plan.cells}) >= 2


# --------------------------------------------------------------------------------------------------
# Costs
# --------------------------------------------------------------------------------------------------


def test_costs_are_read_from_the_run_result_and_its_config():
    result = SimpleNamespace(metric="accuracy", best_eval=0.8, test=0.7, seconds_per_100=2.5)
    config = {"task": {"name": "copy", "seq_len": 9}, "model": {"name": "dnc", "memory_size": 2, "writer": "uniform"},
              "train": {}}
    assert metrics.value_of(result, "seconds_per_100") == 2.5
    assert metrics.value_of(result, "compression_ratio", config) == pytest.approx(3 / 9)
    assert metrics.value_of(result, "eval_accuracy") == 0.8
    assert metrics.value_of(SimpleNamespace(seconds_per_100=float("nan")), "seconds_per_100") is None
    assert metrics.run_key_of("seconds_per_100") == "mean_seconds_per_100"
    assert metrics.run_key_of("eval_accuracy") == "best_eval_accuracy"
    assert metrics.direction_of("compression_ratio") == "minimize"
    assert "seconds_per_100" in metrics.objective_keys(costs=True)
    assert "seconds_per_100" not in metrics.objective_keys()


# --------------------------------------------------------------------------------------------------
# The Pareto rule on a known front
# --------------------------------------------------------------------------------------------------

# (number, status, accuracy up, seconds per 100 down)
TRIALS = [
    (0, "finished", 0.90, 10.0),  # front
    (1, "finished", 0.80, 5.0),  # front
    (2, "finished", 0.70, 6.0),  # dominated by 1
    (3, "finished", 0.90, 12.0),  # dominated by 0
    (4, "finished", 0.50, 2.0),  # front
    (5, "finished", 0.90, 10.0),  # equal to 0: 0 stands for both
    (6, "failed", None, None),
    (7, "pruned", 0.99, 0.1),  # would dominate everything, but it did not finish
    (8, "finished", float("nan"), 1.0),  # no value: takes no part
    (9, "finished", 0.50, 2.5),  # dominated by 4
]
FRONT = [0, 1, 4]
DIRECTIONS = ["maximize", "minimize"]


def _trial_records():
    return [Record(cell="c", role="trial", status=st, value=acc, test=None, params={"train.lr": 0.001 * (n + 1)},
                   seed=0, number=n, values=None if acc is None else (acc, sec))
            for n, st, acc, sec in TRIALS]


def test_pareto_front_of_points():
    points = [(acc, sec) if acc is not None else None for _, _, acc, sec in TRIALS]
    # every point: the pruned trial 7 dominates all others
    assert selection.pareto_front(points, DIRECTIONS) == [7]
    finished = [p if st == "finished" else None for p, (_, st, _, _) in zip(points, TRIALS)]
    assert selection.pareto_front(finished, DIRECTIONS) == FRONT
    assert selection.pareto_front([(1.0, 1.0), (2.0, 2.0)], ["maximize", "maximize"]) == [1]
    assert selection.pareto_front([(1.0, 1.0), (2.0, 2.0)], ["minimize", "minimize"]) == [0]
    assert selection.pareto_front([], DIRECTIONS) == []
    assert selection.dominates((0.9, 1.0), (0.8, 1.0), DIRECTIONS)
    assert not selection.dominates((0.9, 1.0), (0.9, 1.0), DIRECTIONS)
    with pytest.raises(ValueError, match="must each have 2 values"):
        selection.dominates((0.9,), (0.8,), DIRECTIONS)


def test_pareto_trials_and_the_runs_that_count():
    records = _trial_records()
    assert [r.number for r in selection.pareto_trials(records, DIRECTIONS)] == FRONT
    # final runs: each Pareto trial's params on the final seeds
    finals = [Record(cell="c", role="final", status="finished", value=acc, test=acc - 0.01, params=r.params,
                     seed=s, number=100 + 10 * r.number + s, values=(acc, sec))
              for r, (_, _, acc, sec) in ((r, TRIALS[r.number]) for r in selection.pareto_trials(records, DIRECTIONS))
              for s in (1, 2)]
    choice = selection.choose("tuned", "eval_accuracy", records + finals, DIRECTIONS)
    # the Pareto trial best in the first objective (ties: the earliest) is the cell's headline
    assert choice.params == records[0].params
    assert {r.seed for r in choice.runs} == {1, 2} and all(r.params == records[0].params for r in choice.runs)
    assert choice.n_points == 3


def test_pareto_points_over_the_cells_of_a_runs_frame():
    import pandas as pd

    rows = []
    # cell, (accuracy, seconds) of its two final seeds
    for cell, vals in {"a": [(0.9, 10.0), (0.8, 10.0)], "b": [(0.7, 4.0), (0.7, 6.0)],
                       "c": [(0.6, 6.0), (0.6, 6.0)], "d": [(0.95, 20.0), (None, 20.0)]}.items():
        for seed, (acc, sec) in enumerate(vals):
            rows.append({"cell": cell, "role": "final", "status": "finished", "search_params": '{"train.lr": 0.01}',
                         "lr": 0.01, "clip": 1.0, "test_accuracy": acc, "mean_seconds_per_100": sec, "seed": seed})
    rows.append({"cell": "e", "role": "trial", "status": "finished", "search_params": "{}", "lr": 0.1, "clip": 1.0,
                 "test_accuracy": 1.0, "mean_seconds_per_100": 0.1, "seed": 0})  # a search trial never counts
    frame = selection.pareto_points(pd.DataFrame(rows), ["test_accuracy", "mean_seconds_per_100"], DIRECTIONS)
    got = dict(zip(frame["cell"], frame["pareto"]))
    # means: a (0.85, 10), b (0.70, 5), c (0.60, 6) dominated by b, d (0.95, 20): the NaN is left out
    assert got == {"a": True, "b": True, "c": False, "d": True}
    assert math.isclose(frame.set_index("cell").loc["d", "test_accuracy"], 0.95)


# --------------------------------------------------------------------------------------------------
# The report of a multi-objective study, from a snapshot whose front is known
# --------------------------------------------------------------------------------------------------

# cell -> (test accuracy, seconds per 100) of its two final seeds, lr: the configuration
REPORT_RUNS = {
    "dnc-regular-D1": (0.1e-2, [(0.60, 3.0), (0.62, 3.2)]),  # dominated by dnc-uniform-D1
    "dnc-uniform-D1": (0.2e-2, [(0.70, 2.0), (0.72, 2.2)]),  # front: fastest
    "dnc-regular-D2": (0.3e-2, [(0.90, 5.0), (0.92, 5.0)]),  # front: most accurate
    "dnc-uniform-D2": (0.4e-2, [(0.80, 3.0), (0.82, 3.0)]),  # front: between
}


def _report_rows():
    from uwbench.spec import load_plan

    plan = load_plan(PARETO_STUDY, "smoke")
    rows = []
    for cell in plan.cells:
        lr, finals = REPORT_RUNS[cell.id]
        writer, d = cell.config["model"]["writer"], cell.config["model"]["memory_size"]
        for seed, (acc, sec) in enumerate(finals, start=1):
            rows.append({"study": "pareto_copy", "cell": cell.id, "role": "final", "status": "finished", "seed": seed,
                         "trial_number": seed, "run_id": f"{cell.id}-{seed}", "task": "copy", "model": "dnc",
                         "writer": writer, "seq_len": 4, "memory_size": d, "compression_ratio": (d + 1) / 4,
                         "lr": lr, "clip": 5.0, "search_params": f'{{"train.clip": 5, "train.lr": {lr}}}',
                         "spec_hash": plan.spec_hash, "profile": "smoke", "backend": "optuna",
                         "test_accuracy": acc, "best_eval_accuracy": acc, "mean_seconds_per_100": sec})
    return rows


def test_the_report_draws_the_pareto_front_and_lists_the_pareto_optimal_cells(tmp_path):
    from uwbench import snapshot
    from uwbench.report.rendering import render
    from uwbench.report.data import study as study_mod

    snap = snapshot.Snapshot(snapshot.runs_text(_report_rows()))
    view = study_mod.load(PARETO_STUDY, snap.runs)
    assert view.objectives == [("eval_accuracy", "maximize"), ("seconds_per_100", "minimize")]
    report = render.build_report(view, snap, str(tmp_path / "pareto_copy"), keep_figures=True)
    fig = report.figures["pareto_front"]
    ax = fig.axes[0]
    assert ax.get_xlabel() == "seconds per 100 updates (s)"
    assert "(D+1)/T" in ax.get_title()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["DNC", "DNC+UW", "Pareto front"]  # one colour per writer, then the front
    front = [line for line in ax.get_lines() if line.get_label() == "Pareto front"][0]
    assert list(front.get_xdata()) == [2.1, 3.0, 5.0]  # the three Pareto-optimal means, by time
    assert sorted(t.get_text() for t in ax.texts) == ["0.50", "0.50", "0.75", "0.75"]  # (D+1)/T labels
    assert os.path.exists(tmp_path / "pareto_copy" / "pareto_front.png")
    table = open(tmp_path / "pareto_copy" / "pareto.md", encoding="utf-8").read()
    listed = [line.split("|")[1].strip() for line in table.splitlines()[2:] if line.startswith("|")]
    assert listed == ["dnc-regular-D2", "dnc-uniform-D2", "dnc-uniform-D1"]  # best accuracy first
    readme = open(tmp_path / "pareto_copy" / "README.md", encoding="utf-8").read()
    assert "## Pareto front" in readme and "3 of 4 configurations" in readme
    assert "pareto_front.png" in readme


def test_a_single_objective_report_has_no_pareto_section(tmp_path):
    from uwbench import snapshot
    from uwbench.report.rendering import render
    from uwbench.report.data import study as study_mod

    snap = snapshot.Snapshot.from_dir(os.path.join(ROOT, "reports", "quickstart"))
    view = study_mod.load(os.path.join(ROOT, "studies", "quickstart.yaml"), snap.runs)
    assert view.objectives == []
    report = render.build_report(view, snap, str(tmp_path / "quickstart"))
    assert not os.path.exists(tmp_path / "quickstart" / "pareto.md")
    assert "pareto_front" not in report.figures


# --------------------------------------------------------------------------------------------------
# Multi-objective smoke sweeps on both backends, into a real MLflow store, then the report
# --------------------------------------------------------------------------------------------------


def _check_pareto_sweep(uri: str, backend: str, out_dir: str):
    import json as json_

    from tests.sweeps.test_sweeps import check_layout, runs

    from uwbench.report import report_study

    plan = load_plan(PARETO_STUDY, "smoke")
    df = runs(uri, "pareto_copy")
    parents, children = check_layout(df, "pareto_copy", {c.id for c in plan.cells}, backend)
    assert set(parents["tags.objectives"]) == {'[["eval_accuracy", "maximize"], ["seconds_per_100", "minimize"]]'}
    for cell in plan.cells:
        mine = children[children["tags.cell"] == cell.id]
        trials = mine[(mine["tags.role"] == "trial") & (mine["tags.status"] == "finished")].sort_values(
            "tags.trial_number", key=lambda s: s.astype(int))
        finals = mine[mine["tags.role"] == "final"]
        assert len(trials) == plan.budget.n_trials  # no pruning: every trial runs to the end
        # the Pareto rule on what MLflow recorded for the trials names the trials the sweep re-ran
        vectors = list(zip(trials["metrics.best_eval_accuracy"], trials["metrics.mean_seconds_per_100"]))
        front = [int(trials["tags.trial_number"].iloc[i]) for i in selection.pareto_front(vectors, DIRECTIONS)]
        parent = parents[parents["tags.cell"] == cell.id].iloc[0]
        assert json_.loads(parent["tags.pareto_trials"]) == front and front
        assert len(finals) == len(front) * len(plan.final_seeds)
        by_number = dict(zip(trials["tags.trial_number"].astype(int), trials["tags.search_params"]))
        assert sorted(finals["tags.search_params"]) == sorted(by_number[n] for n in front for _ in plan.final_seeds)
        assert set(finals["tags.status"]) == {"finished"}
    report = report_study(PARETO_STUDY, tracking_uri=uri, out=out_dir, traces=False, index=False, profile="smoke",
                          log=lambda _: None)
    assert os.path.exists(os.path.join(report.folder, "pareto_front.png"))
    table = open(os.path.join(report.folder, "pareto.md"), encoding="utf-8").read()
    assert any(f"| {c.id} " in table for c in plan.cells)
    return df


def test_multi_objective_smoke_sweep_optuna(sweep_env, tmp_path):
    from tests.sweeps.test_sweeps import sweep

    env, uri = sweep_env
    sweep(env, PARETO_STUDY, "--profile", "smoke", "--workers", "1", "--tracking-uri", uri)
    _check_pareto_sweep(uri, "optuna", str(tmp_path / "reports"))


@pytest.mark.slow  # a Ray sweep; `make test` keeps the Optuna one and the Ray quickstart
def test_multi_objective_smoke_sweep_ray(sweep_env, ray_head, tmp_path):
    from tests.sweeps.test_sweeps import sweep

    address, head_env = ray_head
    env, uri = sweep_env
    sweep(dict(env, **head_env), PARETO_STUDY, "--backend", "ray", "--profile", "smoke", "--ray-address", address,
          "--workers", "2", "--tracking-uri", uri)
    _check_pareto_sweep(uri, "ray", str(tmp_path / "reports"))


def test_a_resumed_sweep_reads_the_objective_vector_back_from_mlflow_and_summarises_the_front():
    from uwbench.sweeps import common, display

    plan = load_plan(PARETO_STUDY, "smoke")
    got = common.recorded_values(plan, {"best_eval_accuracy": 0.75, "mean_seconds_per_100": 2.5}, {})
    assert got == (0.75, 2.5)
    assert common.recorded_values(plan, {"best_eval_accuracy": 0.75}, {}) is None  # a cost missing: no vector
    assert common.recorded_values(load_plan(os.path.join(ROOT, "studies", "quickstart.yaml"), "smoke"),
                                  {"best_eval_accuracy": 0.75}, {}) is None  # one objective: no vector
    cell = plan.cells[0].id
    records = [Record(cell=cell, role=r.role, status=r.status, value=r.value, test=r.test, params=r.params,
                      seed=r.seed, number=r.number, values=r.values) for r in _trial_records()]
    text = display.summary(plan, records)
    assert f"{cell}: Pareto-optimal trials #0 (0.9, 10), #1 (0.8, 5), #4 (0.5, 2)" in text
    assert "eval_accuracy (maximize), seconds_per_100 (minimize)" in text
