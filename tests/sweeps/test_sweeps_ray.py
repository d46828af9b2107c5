"""Sweeps with the Ray Tune backend: the quickstart smoke profile against a Ray head started with
`ray start` on 127.0.0.1 (session fixture `ray_head`), read back from MLflow; GPUs asked of a cluster
without any are a clear error; the GPU share per trial. A cell's final seeds train as one population in one
Ray trial; search trials one per Ray trial (the scheduler prunes each)."""
from __future__ import annotations

import os

import pytest

from tests.sweeps.test_sweeps import QUICKSTART, check_layout, runs, sweep, sweep_here


def test_quickstart_smoke_on_a_ray_cluster_at_an_address(sweep_env, ray_head, capsys):
    from uwbench.spec import load_plan

    address, head_env = ray_head
    env, uri = sweep_env
    env = dict(env, **head_env)
    plan = load_plan(QUICKSTART, "smoke")
    proc = sweep(env, QUICKSTART, "--backend", "ray", "--profile", "smoke", "--ray-address", address,
                 "--workers", "2", "--tracking-uri", uri)
    assert f"Ray {address}" in proc.stdout
    assert "recovered" not in proc.stdout  # a fresh study: its cells' parent runs are not interrupted runs
    df = runs(uri, "quickstart")
    parents, children = check_layout(df, "quickstart", {c.id for c in plan.cells}, "ray")
    assert len(children) == plan.n_runs() == 12
    for cell in plan.cells:
        mine = children[children["tags.cell"] == cell.id]
        trials, finals = mine[mine["tags.role"] == "trial"], mine[mine["tags.role"] == "final"]
        assert sorted(trials["tags.trial_number"].astype(int)) == [0, 1]  # the Optuna trial numbers
        assert sorted(finals["tags.seed"].astype(int)) == [1, 2]
        assert len(set(finals["tags.lr"])) == 1 and set(finals["tags.lr"]) <= set(trials["tags.lr"])
        assert finals["tags.population"].nunique() == 1  # one Ray trial trains the cell's final seeds together
        assert set(finals["tags.population_size"]) == {"2"} and trials["tags.population"].isna().all()
    assert set(children["tags.device"]) == {"cpu"}
    # resuming a finished study does nothing (MLflow is the record)
    again = sweep_here(capsys, QUICKSTART, "--backend", "ray", "--profile", "smoke", "--ray-address", address,
                       "--tracking-uri", uri)
    assert "nothing to do" in again and len(runs(uri, "quickstart")) == len(df)


@pytest.mark.slow  # a sweep against the Ray head; `make test` keeps the quickstart sweep on it
def test_gpus_asked_of_a_cluster_without_gpus_is_a_clear_error(sweep_env, ray_head):
    address, head_env = ray_head
    env, uri = sweep_env
    proc = sweep(dict(env, **head_env), QUICKSTART, "--backend", "ray", "--profile", "smoke", "--ray-address",
                 address, "--gpus-per-trial", "0.5", "--tracking-uri", uri, check=False)
    assert proc.returncode == 2
    assert "--gpus-per-trial 0.5 asks for GPUs, but the Ray cluster has none" in proc.stderr
    df = runs(uri, "quickstart")
    assert set(df["tags.role"]) == {"cell"}  # no run started; the cells ended FAILED with the error, none RUNNING
    assert set(df["status"]) == {"FAILED"} and df["tags.error"].str.contains("asks for GPUs").all()


def test_gpu_fraction_per_trial():
    from uwbench.sweeps.common import SweepError
    from uwbench.sweeps.backends.ray import gpu_fraction

    assert gpu_fraction(None, 0, {"CPU": 2}) == 0.0  # CPU-only cluster: no GPU request (it would hang)
    assert gpu_fraction(None, 2, {"CPU": 8, "GPU": 2}) == 0.25  # several trials share a GPU
    assert gpu_fraction(0.5, 1, {"GPU": 1}) == 0.5
    assert gpu_fraction(0, 0, {}) == 0.0
    with pytest.raises(SweepError, match="has none"):
        gpu_fraction(1, 0, {"CPU": 2})


@pytest.mark.slow
def test_quickstart_smoke_on_a_local_ray(sweep_env):
    """`ray.init()` of our own (the README's command); slow: a fresh local cluster per sweep."""
    env, uri = sweep_env
    sweep(env, QUICKSTART, "--backend", "ray", "--profile", "smoke", "--workers", "2", "--tracking-uri", uri)
    df = runs(uri, "quickstart")
    check_layout(df, "quickstart", {"dnc-regular-D2", "dnc-uniform-D2", "dnc-cached_uniform-D2-L2"}, "ray")
    assert os.path.isdir(os.path.join(env["UWBENCH_RUNS_DIR"], "ray"))
