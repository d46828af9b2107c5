"""Sweeps with the Optuna backend, end to end into real MLflow stores: the quickstart smoke profile with
worker processes (layout read back with mlflow.search_runs), resuming, a diverging trial, a killed worker
and a killed sweep (exactly the planned runs, none lost, none repeated), a lean `mlflow server` on
127.0.0.1, the study lock, and the trial/tag helpers.

Test-only components (a model that outputs NaN, one that sleeps) live in a plugin module written to a
temporary folder and loaded by the sweep subprocesses through $UWBENCH_PLUGINS, so they never enter
this process's registries."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

from tests.helpers.processes import free_port, stop_process_group

from tests.helpers import ROOT
QUICKSTART = os.path.join(ROOT, "studies", "quickstart.yaml")

PLUGIN = '''
"""Test-only models for tests/test_sweeps.py (loaded through $UWBENCH_PLUGINS)."""
import time
from dataclasses import dataclass

from uwbench.models.lstm import LSTMBaseline, LSTMBaselineConfig
from uwbench.registry import MODELS


@dataclass
class NanConfig(LSTMBaselineConfig):
    diverge: bool = False


class NanModel(LSTMBaseline):
    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        return out * float("nan") if self.cfg.diverge else out


@MODELS.register("test_nan", config=NanConfig, help="test only: NaN outputs when diverge is true")
def build_nan(cfg, input_size, output_size, task=None):
    return NanModel(cfg, input_size, output_size)


@dataclass
class SleepyConfig(LSTMBaselineConfig):
    sleep_s: float = 0.05


class SleepyModel(LSTMBaseline):
    def forward(self, *args, **kwargs):
        time.sleep(self.cfg.sleep_s)  # slow without using the CPU
        return super().forward(*args, **kwargs)


@MODELS.register("test_sleepy", config=SleepyConfig, help="test only: sleeps in every forward")
def build_sleepy(cfg, input_size, output_size, task=None):
    return SleepyModel(cfg, input_size, output_size)
'''

SMALL = dict(hidden_size=8)
TINY_TRAIN = "{steps: 4, batch_size: 4, eval_every: 2, eval_batches: 1}"


def study_file(tmp_path, name: str, body: str) -> str:
    """A study file (named by its id) with the required profiles."""
    text = f"id: {name}\ntitle: test\nquestion: test\nartifact: none\n" + textwrap.dedent(body)
    if "profiles:" not in text:
        text += "profiles: {cpu: {}, smoke: {}}\n"
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


@pytest.fixture
def plugin_env(sweep_env, tmp_path):
    env, uri = sweep_env
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "uwb_test_plugin.py").write_text(PLUGIN)
    env = dict(env, UWBENCH_PLUGINS="uwb_test_plugin",
               PYTHONPATH=os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")])))
    return env, uri


def sweep(env, *args, timeout=300, check=True):
    proc = subprocess.run([sys.executable, "-m", "uwbench", "sweep", *args, "--no-progress"], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if check and proc.returncode != 0:
        pytest.fail(f"uwbench sweep {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n"
                    f"{proc.stderr[-4000:]}")
    return proc


def sweep_here(capsys, *args) -> str:
    """`uwbench sweep` in this process (cheap when there is nothing to run); returns its stdout."""
    from uwbench.cli import main

    saved = dict(os.environ)
    try:
        assert main(["sweep", *args, "--no-progress"]) == 0
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return capsys.readouterr().out


def runs(uri: str, experiment: str, deleted: bool = False):
    import mlflow
    from mlflow.entities import ViewType

    mlflow.set_tracking_uri(uri)
    return mlflow.search_runs(experiment_names=[experiment],
                              run_view_type=ViewType.DELETED_ONLY if deleted else ViewType.ACTIVE_ONLY)


def check_layout(df, study: str, cells: set, backend: str):
    """The MLflow layout the report relies on (studies/README.md)."""
    from uwbench.sweeps.common import CHILD_TAGS

    parents = df[df["tags.role"] == "cell"]
    children = df[df["tags.role"].isin(["trial", "final"])]
    assert len(parents) + len(children) == len(df)
    assert set(parents["tags.mlflow.runName"]) == cells and set(parents["tags.cell"]) == cells
    assert (parents["status"] == "FINISHED").all()
    by_id = dict(zip(parents["run_id"], parents["tags.cell"]))
    for _, row in children.iterrows():
        assert by_id[row["tags.mlflow.parentRunId"]] == row["tags.cell"]  # nested under its cell
        for tag in CHILD_TAGS:
            assert isinstance(row[f"tags.{tag}"], str) and row[f"tags.{tag}"], tag
        assert row["tags.study"] == study and row["tags.backend"] == backend
        assert row["tags.status"] in ("finished", "failed", "pruned")
        assert row["status"] == {"finished": "FINISHED", "failed": "FAILED", "pruned": "KILLED"}[row["tags.status"]]
        assert row["params.model.name"] == row["tags.model"]  # params: the flattened resolved config
        assert float(row["params.train.lr"]) == float(row["tags.lr"])
    return parents, children


@pytest.mark.slow  # minutes on 2 cores: `make test-slow`
def test_quickstart_smoke_with_two_worker_processes_then_resume(sweep_env, capsys):
    from uwbench.spec import load_plan

    env, uri = sweep_env
    plan = load_plan(QUICKSTART, "smoke")
    proc = sweep(env, QUICKSTART, "--backend", "optuna", "--profile", "smoke", "--workers", "2",
                 "--tracking-uri", uri)
    assert "12 runs planned" in proc.stdout and "dnc-uniform" in proc.stdout
    df = runs(uri, "quickstart")
    parents, children = check_layout(df, "quickstart", {c.id for c in plan.cells}, "optuna")
    assert len(children) == plan.n_runs() == 12
    for cell in plan.cells:
        mine = children[children["tags.cell"] == cell.id]
        trials, finals = mine[mine["tags.role"] == "trial"], mine[mine["tags.role"] == "final"]
        assert sorted(trials["tags.trial_number"].astype(int)) == [0, 1]
        assert sorted(finals["tags.seed"].astype(int)) == [1, 2]  # the final seeds, fresh
        assert set(mine["tags.writer"]) == {cell.config["model"]["writer"]}
        assert set(mine["tags.memory_size"]) == {"2"} and set(mine["tags.seq_len"]) == {"4"}
        assert set(mine["tags.compression_ratio"]) == {"0.75"}  # (D+1)/T = 3/4
        assert set(mine["tags.cache_size"]) == ({"2"} if cell.id == "dnc-cached_uniform-D2-L2" else {"none"})
        best = trials[trials["tags.status"] == "finished"]
        # every final run re-uses the best trial's config (ties: the earliest trial)
        top = max((row for _, row in best.iterrows()),
                  key=lambda r: (float(r["metrics.best_eval_accuracy"]), -int(r["tags.trial_number"])))
        assert set(finals["tags.lr"]) == {top["tags.lr"]} and set(finals["tags.best_trial"]) == {top["tags.trial_number"]}
        parent = parents[parents["tags.cell"] == cell.id].iloc[0]
        assert parent["metrics.n_final"] == 2 and "metrics.final_test_accuracy_mean" in parents.columns
    assert set(children["metrics.mean_seconds_per_100"].notna()) == {True}
    # system metrics are on by default in a sweep: every run sampled CPU and memory at least once
    assert set(children["metrics.system/cpu_utilization_percentage"].notna()) == {True}

    # a finished study does nothing when run again
    assert "nothing to do" in sweep_here(capsys, QUICKSTART, "--profile", "smoke", "--tracking-uri", uri)
    assert len(runs(uri, "quickstart")) == len(df)


def test_a_sweep_without_system_metrics_logs_none(sweep_env, capsys, monkeypatch):
    env, uri = sweep_env
    monkeypatch.setenv("UWBENCH_RUNS_DIR", env["UWBENCH_RUNS_DIR"])
    sweep_here(capsys, QUICKSTART, "--profile", "smoke", "--workers", "0", "--tracking-uri", uri,
               "--no-system-metrics")
    children = runs(uri, "quickstart").query("`tags.role` != 'cell'")
    assert len(children) > 0 and set(children["status"]) == {"FINISHED"}
    assert not [c for c in children.columns if c.startswith("metrics.system/")]


@pytest.mark.slow  # minutes on 2 cores: `make test-slow`
def test_diverging_trials_are_recorded_failed_and_the_sweep_finishes(plugin_env, tmp_path):
    env, uri = plugin_env
    path = study_file(tmp_path, "diverge", f"""
        mode: tuned
        task: {{name: copy, seq_len: 4, test_size: 8}}
        fixed: {{train: {TINY_TRAIN}}}
        cells:
          - {{model: test_nan, name: nan, set: {{model: {{hidden_size: 8, diverge: true}}}}}}
          - {{model: test_nan, name: ok, set: {{model: {{hidden_size: 8, diverge: false}}}}}}
        search: {{train.lr: {{type: float, low: 1.0e-3, high: 1.0e-2, log: true}}}}
        seeds: [0]
        final_seeds: [5]
        budget: {{n_trials: 2}}
        pruning: {{type: none}}
    """)
    # an RDB Optuna storage here (the other tests use the default journal file)
    proc = sweep(env, path, "--workers", "0", "--tracking-uri", uri, "--storage", f"sqlite:///{tmp_path}/optuna.db")
    assert "cell nan: no search trial finished, so no final runs" in proc.stdout
    assert "diverged: loss became nan" in proc.stdout
    df = runs(uri, "diverge")
    parents, children = check_layout(df, "diverge", {"nan", "ok"}, "optuna")
    nan = children[children["tags.cell"] == "nan"]
    assert len(nan) == 2 and set(nan["tags.status"]) == {"failed"} and set(nan["status"]) == {"FAILED"}
    assert all("diverged" in e for e in nan["tags.error"])
    ok = children[children["tags.cell"] == "ok"]
    assert sorted(ok["tags.role"]) == ["final", "trial", "trial"] and set(ok["tags.status"]) == {"finished"}


def _running_trial(journal: str, study_prefix: str, exclude_pids=()):
    """(worker pid, trial number) of a RUNNING trial that has started its MLflow run, or None."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from optuna.trial import TrialState

    if not os.path.exists(journal):
        return None
    storage = JournalStorage(JournalFileBackend(journal))
    for s in storage.get_all_studies():
        if not s.study_name.startswith(study_prefix):
            continue
        for t in storage.get_all_trials(s._study_id, deepcopy=False):
            if t.state == TrialState.RUNNING and "mlflow_run_id" in t.user_attrs and "worker" in t.user_attrs:
                pid = int(t.user_attrs["worker"].rsplit(":", 1)[1])
                if pid not in exclude_pids:
                    return pid, t.number
    del optuna
    return None


def _sweep_process(env, path: str, uri: str, *args: str, **popen) -> subprocess.Popen:
    """`uwbench sweep PATH` with one worker, in its own process group, its output captured."""
    return subprocess.Popen([sys.executable, "-m", "uwbench", "sweep", path, "--workers", "1", "--no-progress",
                             "--tracking-uri", uri, *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, **popen)


def _wait_for(fn, timeout=120, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


@pytest.mark.slow  # a multi-process sweep killed twice; `make test` keeps the two-worker sweep and resume
def test_killed_worker_and_killed_sweep_end_with_exactly_the_planned_runs(plugin_env, tmp_path):
    env, uri = plugin_env
    path = study_file(tmp_path, "killme", """
        mode: faithful
        task: {name: copy, seq_len: 4, test_size: 8}
        fixed: {train: {steps: 20, batch_size: 4, eval_every: 10, eval_batches: 1}}
        cells:
          - {model: test_sleepy, name: sleepy, set: {model: {hidden_size: 8, sleep_s: 0.08}}}
        seeds: [0, 1, 2, 3]
    """)
    journal = os.path.join(env["UWBENCH_RUNS_DIR"], "optuna", "killme.journal")
    # runs trained alone: a killed worker interrupts one run (a killed population: test_sweep_population.py)
    proc = _sweep_process(env, path, uri, "--population", "off")
    try:
        # 1. kill the worker mid-trial: the sweep notices, re-runs that trial once, and goes on
        pid, _ = _wait_for(lambda: _running_trial(journal, "killme."), what="a running trial")
        os.kill(pid, signal.SIGKILL)
        # 2. then kill the whole sweep (parent and its new worker) mid-trial, as a power cut would
        _wait_for(lambda: _running_trial(journal, "killme.", exclude_pids=(pid,)), what="the replacement worker")
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
    finally:
        stop_process_group(proc.pid, grace_s=1, leader=proc)
    assert "worker died" in out
    # 3. running it again finishes the study
    done = sweep(env, path, "--workers", "0", "--tracking-uri", uri, "--population", "off")
    assert "interrupted run(s) recovered" in done.stdout
    df = runs(uri, "killme")
    _, children = check_layout(df, "killme", {"sleepy"}, "optuna")
    assert len(children) == 4 and sorted(children["tags.seed"].astype(int)) == [0, 1, 2, 3]  # none lost or repeated
    assert set(children["tags.status"]) == {"finished"} and set(children["status"]) == {"FINISHED"}
    assert len(runs(uri, "killme", deleted=True)) == 0  # an interrupted run is resumed under its own run id
    retried = children[children["tags.retry_of"].notna()] if "tags.retry_of" in children.columns else children[:0]
    # each interrupted run resumed under its own run id: the replacement worker takes the killed trial's retry
    # first when it is already queued (the same run then interrupted twice), else the next seed (two runs)
    assert 1 <= len(retried) <= 2


def test_a_background_sweep_stopped_with_kill_ends_as_interrupted_and_resumes(plugin_env, tmp_path):
    """A shell starts a background job with SIGINT ignored, so Ctrl-C's signal cannot reach it: `kill PID`
    (SIGTERM, to the parent alone) stops it as Ctrl-C would, its workers too, and the same command resumes.
    A stop asked for spends no retry: with none allowed (``--max-retries 0``) the stopped run still resumes."""
    env, uri = plugin_env
    path = study_file(tmp_path, "termme", """
        mode: faithful
        task: {name: copy, seq_len: 4, test_size: 8}
        fixed: {train: {steps: 20, batch_size: 4, eval_every: 10, eval_batches: 1}}
        cells:
          - {model: test_sleepy, name: sleepy, set: {model: {hidden_size: 8, sleep_s: 0.08}}}
        seeds: [0, 1]
    """)
    journal = os.path.join(env["UWBENCH_RUNS_DIR"], "optuna", "termme.journal")
    proc = _sweep_process(env, path, uri, "--max-retries", "0",
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        worker, _ = _wait_for(lambda: _running_trial(journal, "termme."), what="a running trial")
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=90)
    finally:
        stop_process_group(proc.pid, grace_s=1, leader=proc)
    assert proc.returncode == 130 and "interrupted:" in out and "re-run the same command to resume" in out
    def gone() -> bool:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return True
        return False

    _wait_for(gone, timeout=30, what="its worker to end with it")
    df = runs(uri, "termme")
    assert set(df.loc[df["tags.role"] == "cell", "status"]) <= {"KILLED", "FINISHED"}  # no cell run left RUNNING
    sweep(env, path, "--workers", "0", "--max-retries", "0", "--tracking-uri", uri)
    _, children = check_layout(runs(uri, "termme"), "termme", {"sleepy"}, "optuna")
    assert len(children) == 2 and sorted(children["tags.seed"].astype(int)) == [0, 1]  # none lost or repeated
    assert set(children["status"]) == {"FINISHED"} and set(children["tags.status"]) == {"finished"}
    assert "tags.retry_of" not in children or children["tags.retry_of"].isna().all()  # resumed, not retried


@pytest.fixture
def mlflow_server(tmp_path):
    """A lean `mlflow server` on 127.0.0.1 (2 processes, docs/design.md §13.1), stopped by its PID group."""
    port = free_port()
    store = tmp_path / "server"
    store.mkdir()
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false", MLFLOW_DISABLE_TELEMETRY="true",
               HOME=str(tmp_path))
    cmd = [os.path.join(os.path.dirname(sys.executable), "mlflow"), "server", "--host", "127.0.0.1", "--port",
           str(port), "--workers", "1", "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}",
           "--artifacts-destination", str(store / "artifacts")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"mlflow server did not come up (exit {proc.poll()})")
            time.sleep(0.5)
        yield url
    finally:
        stop_process_group(proc.pid, grace_s=3, leader=proc)


@pytest.mark.slow  # an `mlflow server` and a multi-process sweep into it
def test_sweep_into_a_real_mlflow_server(sweep_env, tmp_path, mlflow_server):
    env, _ = sweep_env
    path = study_file(tmp_path, "served", f"""
        mode: faithful
        task: {{name: copy, seq_len: 4, test_size: 8}}
        fixed: {{train: {TINY_TRAIN}}}
        cells:
          - {{model: lstm, name: lstm, set: {{model: {{hidden_size: 8}}}}, grid: {{task.name: [copy, reverse]}}}}
        search: {{train.clip: {{type: choice, values: [1, 10]}}}}
        seeds: [0]
    """)
    proc = sweep(env, path, "--workers", "0", "--tracking-uri", mlflow_server)
    assert "4 runs planned" in proc.stdout
    df = runs(mlflow_server, "served")
    _, children = check_layout(df, "served", {"lstm-copy", "lstm-reverse"}, "optuna")
    assert len(children) == 4 and sorted(children["tags.clip"].astype(float)) == [1.0, 1.0, 10.0, 10.0]
    assert set(children["tags.role"]) == {"final"}  # faithful: every grid point x seed is a final run


def test_a_second_sweep_of_the_same_study_is_refused(tracking_uri):
    from uwbench.spec import load_plan
    from uwbench.sweeps.common import SweepError
    from uwbench.sweeps.locks import study_lock

    plan = load_plan(QUICKSTART, "smoke")
    with study_lock(plan):
        with pytest.raises(SweepError, match="another `uwbench sweep` of study 'quickstart'"):
            with study_lock(plan):
                pass
    with study_lock(plan):  # released
        pass


def test_two_machines_creating_the_cell_runs_at_once_keep_one_parent_per_cell(tracking_uri, monkeypatch):
    from uwbench.spec import load_plan
    from uwbench.sweeps import common
    from uwbench.tracking import mlflow as tracking

    plan = load_plan(QUICKSTART, "smoke")
    experiment_id = tracking.ensure_experiment(plan.id, tracking_uri)
    theirs = common.ensure_cell_runs(plan, experiment_id, tracking_uri, "optuna")  # the other machine, first
    real_find = tracking.find_runs
    calls = []

    def racing_find(*args, **kwargs):  # our first look comes before the other machine's runs are visible
        calls.append(1)
        return [] if len(calls) == 1 else real_find(*args, **kwargs)

    monkeypatch.setattr(tracking, "find_runs", racing_find)
    ours = common.ensure_cell_runs(plan, experiment_id, tracking_uri, "optuna")
    assert ours == theirs  # both machines settle on the earliest parent of each cell
    left = real_find(experiment_id, common.cell_filter(plan, "optuna"), tracking_uri)
    assert sorted(r["run_id"] for r in left) == sorted(theirs.values())  # our duplicates were deleted
    monkeypatch.setattr(tracking, "find_runs", real_find)
    assert common.ensure_cell_runs(plan, experiment_id, tracking_uri, "optuna") == theirs  # a resume re-uses them


def test_job_keys_tags_and_objective(tracking_uri):
    from uwbench.spec import load_plan
    from uwbench.sweeps import common
    from uwbench.training.config import resolve_run
    from uwbench.training.loop import RunResult

    plan = load_plan(QUICKSTART, "smoke")
    cell = plan.cell("dnc-cached_uniform-D2-L2")
    job = common.Job(study="quickstart", profile="smoke", mode="tuned", spec_hash=plan.spec_hash, backend="optuna",
                     cell=cell, role="final", params={"train.lr": 0.002, "train.clip": 5, "seed": 9}, seed=9,
                     trial_number=1, objective_metric="eval_accuracy", experiment_id="1", parent_run_id="p",
                     uri=tracking_uri)
    config = job.config()
    assert config["train"]["lr"] == 0.002 and config["train"]["seed"] == 9 and config["train"]["threads"] == 1
    tags = common.child_tags(job, resolve_run(config).as_dict())
    assert set(common.CHILD_TAGS) <= set(tags)
    assert tags["compression_ratio"] == 0.75 and tags["cache_size"] == 2 and tags["writer"] == "cached_uniform"
    assert json.loads(tags["search_params"]) == {"train.clip": 5, "train.lr": 0.002}
    # a final run is identified by its params and seed, not its number
    assert job.key == common.job_key(cell.id, "final", {"train.lr": 0.002, "train.clip": 5}, 9, 7)
    assert job.key != common.job_key(cell.id, "final", {"train.lr": 0.002, "train.clip": 5}, 8, 1)
    result = RunResult(status="finished", metric="accuracy", test=0.5, best_eval=0.75)
    assert common.objective_value(result, "eval_accuracy") == 0.75
    assert common.objective_value(result, "test_accuracy") == 0.5
    with pytest.raises(common.SweepError, match="does not match the task's metric 'accuracy'"):
        common.objective_value(result, "eval_mse")


STUDY_FILES = sorted(f for f in os.listdir(os.path.join(ROOT, "studies")) if f.endswith(".yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("name", STUDY_FILES)
def test_every_study_runs_its_smoke_profile(name, sweep_env):
    """Every study's smoke profile runs to the end (runs of tasks whose data is missing end failed,
    with the data error; the sweep still finishes, and exits 2 when every one of its runs failed)."""
    env, uri = sweep_env
    path = os.path.join(ROOT, "studies", name)
    proc = sweep(env, path, "--profile", "smoke", "--workers", "0", "--tracking-uri", uri, check=False)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0 or (proc.returncode == 2 and "every one of" in said and "data not found" in said), \
        said[-6000:]
    from uwbench.spec import load_plan

    plan = load_plan(path, "smoke")
    df = runs(uri, plan.id)
    children = df[df["tags.role"].isin(["trial", "final"])]
    assert len(children) <= plan.n_runs() and "runs planned" in proc.stdout
    if not (children["tags.status"] == "failed").any():
        assert len(children) == plan.n_runs()


@pytest.mark.slow  # minutes on 2 cores: `make test-slow`
def test_memory_size_and_cache_size_are_searched_and_the_final_runs_use_the_best(sweep_env, tmp_path):
    """The mission's sweep space: memory size D and cache size L (with lr and clip) searched on a CUW cell;
    each trial's run really uses its sampled D and L, and the final runs re-use the best trial's."""
    env, uri = sweep_env
    path = study_file(tmp_path, "memsearch", f"""
        mode: tuned
        task: {{name: copy, seq_len: 6, test_size: 8}}
        fixed: {{model: {{hidden_size: 8, word_size: 4}}, train: {TINY_TRAIN}}}
        cells:
          - {{model: dnc, name: cuw, set: {{model: {{writer: cached_uniform}}}}}}
        search:
          model.memory_size: {{type: int, low: 1, high: 3}}
          model.cache_size: {{type: choice, values: [2, 3]}}
          train.lr: {{type: float, low: 1.0e-3, high: 1.0e-2, log: true}}
          train.clip: {{type: choice, values: [1, 10]}}
        objective: {{metric: eval_accuracy, direction: maximize}}
        seeds: [0]
        final_seeds: [7]
        budget: {{n_trials: 4}}
        pruning: {{type: none}}
    """)
    sweep(env, path, "--workers", "0", "--tracking-uri", uri)
    df = runs(uri, "memsearch")
    _, children = check_layout(df, "memsearch", {"cuw"}, "optuna")
    trials = children[children["tags.role"] == "trial"]
    final = children[children["tags.role"] == "final"]
    assert len(trials) == 4 and len(final) == 1
    for _, row in children.iterrows():  # the run's resolved config holds what the search chose
        chosen = json.loads(row["tags.search_params"])
        assert int(row["params.model.memory_size"]) == chosen["model.memory_size"] == int(row["tags.memory_size"])
        assert int(row["params.model.cache_size"]) == chosen["model.cache_size"] == int(row["tags.cache_size"])
        assert float(row["params.train.lr"]) == pytest.approx(chosen["train.lr"])
    trials = trials.assign(number=trials["tags.trial_number"].astype(int))
    best = trials.sort_values(["metrics.best_eval_accuracy", "number"], ascending=[False, True]).iloc[0]
    assert int(final.iloc[0]["tags.best_trial"]) == best["number"]  # ties: the earliest trial
    assert json.loads(final.iloc[0]["tags.search_params"]) == json.loads(best["tags.search_params"])


def test_one_worker_runs_the_cells_round_robin_so_a_cut_off_study_is_even(sweep_env, tmp_path):
    """Every cell's first seed before any cell's second: a study stopped part-way has every cell. (Runs
    trained alone; a population takes a cell's seeds together, tests/test_sweep_population.py.)"""
    env, uri = sweep_env
    path = study_file(tmp_path, "robin", f"""
        mode: faithful
        task: {{name: copy, seq_len: 4, test_size: 8}}
        fixed: {{train: {TINY_TRAIN}}}
        cells:
          - {{model: lstm, name: a, set: {{model: {{hidden_size: 8}}}}}}
          - {{model: lstm, name: b, set: {{model: {{hidden_size: 8}}}}}}
        seeds: [0, 1]
        profiles: {{cpu: {{cell_seeds: {{"b": [0, 1, 2]}}}}, smoke: {{}}}}
    """)
    sweep(env, path, "--profile", "cpu", "--workers", "0", "--population", "off", "--tracking-uri", uri)
    children = runs(uri, "robin").query("`tags.role` == 'final'").sort_values("start_time")
    order = list(zip(children["tags.cell"], children["tags.seed"].astype(int)))
    assert order == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("b", 2)]


def test_a_sweeps_environment_settings_end_with_it(tmp_path, monkeypatch):
    """--no-system-metrics and --checkpoint-dir reach the workers through the environment, for that sweep
    only: a later run in the same process records system metrics again."""
    from uwbench import env
    from uwbench.cli import main
    from uwbench.sweeps.driver import CHECKPOINT_DIR_ENV

    monkeypatch.delenv(env.SYSTEM_METRICS_ENV, raising=False)
    monkeypatch.delenv(CHECKPOINT_DIR_ENV, raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main(["sweep", os.path.join(ROOT, "studies", "quickstart.yaml"), "--profile", "smoke", "--tracking-uri", uri,
                 "--workers", "0", "--no-progress", "--no-system-metrics", "--cells", "dnc-regular-*",
                 "--checkpoint-dir", str(tmp_path / "ck"), "--storage", str(tmp_path / "j.journal")]) == 0
    assert env.SYSTEM_METRICS_ENV not in os.environ and CHECKPOINT_DIR_ENV not in os.environ
    assert env.system_metrics()


def test_a_sweep_warns_when_its_workers_and_the_load_outnumber_the_cores():
    """Runs that share a core spend more CPU time, and reports leave their times out: the sweep says so
    before it starts them, and stays quiet where its workers fit."""
    from uwbench.sweeps.driver import crowding_note, machine_load

    assert crowding_note(2, 2, 0.6) is None  # 2 workers on 2 idle cores (the load: this process starting up)
    assert crowding_note(0, 1, 0.9) is None  # trained in this process on one core
    assert crowding_note(None, 1, 9.0) is None  # not a local pool (Ray places its own trials)
    note = crowding_note(2, 2, 2.1)  # another sweep's 2 workers already run
    assert note and "2 training process(es) on 2 core(s)" in note and "2.1" in note and "speed.md" in note
    assert crowding_note(4, 2, 0.0)
    cores, load = machine_load()
    assert cores >= 1 and load >= 0.0
