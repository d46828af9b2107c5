"""Several machines on one study, with real processes and SIGKILL (no mocks).

A "machine" is a `uwbench sweep` process started in its own working folder with its own runs/ (so its
own lock and its own per-machine state), as a second computer would be. The machines share the Optuna
storage (a journal file, or a PostgreSQL server of our own on 127.0.0.1) and the MLflow store (one
SQLite file, or an `mlflow server` on 127.0.0.1 over PostgreSQL). Every case ends with exactly the
planned runs: each FINISHED once, none FAILED, none left RUNNING, no job twice. The faithful cases train
their runs in populations of 2 on each machine (continuous slots), so a killed or frozen machine's
members are taken over together by the other.

The Ray case builds a cluster of two nodes on 127.0.0.1 (`ray start --head`, then a second `ray start`),
kills the second node while it runs a trial (a population of 3 final runs), and expects the sweep to retry
that trial (FailureConfig), each member in its own MLflow run again.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers.processes import RAY_HEAD_ENV, VENV_BIN, free_port, start_mlflow_server, stop_process_group
from tests.sweeps.test_sweeps import ROOT, _wait_for, plugin_env, runs, study_file  # noqa: F401 (plugin_env: a fixture)

# a model that sleeps in every forward (a few seconds a run, little CPU): two tuned cells, or one faithful
SLEEPY = "{model: test_sleepy, name: %s, set: {model: {hidden_size: 8, sleep_s: 0.1}}}"
TASK = "task: {name: copy, seq_len: 4, test_size: 8}\n"
TRAIN = "fixed: {train: {steps: %d, batch_size: 4, eval_every: 10, eval_batches: 1}}\n"
TUNED = ("mode: tuned\n" + TASK + TRAIN % 30 + f"cells: [{SLEEPY % 'a'}, {SLEEPY % 'b'}]\n"
         "search: {train.lr: {type: float, low: 1.0e-3, high: 1.0e-2, log: true}}\n"
         "seeds: [0, 1]\nfinal_seeds: [5, 6]\nbudget: {n_trials: 3}\npruning: {type: none}\n")
FAITHFUL = "mode: faithful\n" + TASK + TRAIN % 40 + f"cells: [{SLEEPY % 'sleepy'}]\nseeds: [0, 1, 2, 3, 4, 5]\n"
FAST_HEARTBEAT = ("--heartbeat-interval", "1", "--grace-period", "5")
# the faithful cell's 6 runs in populations of 2 with refilled slots, so each machine trains some of them (with
# `auto`, the first machine would claim all 6 at once); a killed or frozen machine's members are taken over
POPULATIONS_OF_TWO = ("--population", "2")


def start_machine(tmp_path, name: str, env, study: str, *args):
    """`uwbench sweep` in its own working folder (its own runs/), in its own process group."""
    folder = tmp_path / name
    folder.mkdir()
    log = open(folder / "sweep.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "uwbench", "sweep", study, "--workers", "1", "--no-progress", *args],
                            env=dict(env, UWBENCH_RUNS_DIR=str(folder / "runs")), cwd=str(folder), stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    proc.folder = folder
    return proc


def wait_machine(proc, timeout: float = 420) -> str:
    try:
        proc.wait(timeout=timeout)
    finally:
        stop_process_group(proc.pid, grace_s=1, leader=proc)
    return (proc.folder / "sweep.log").read_text()


def optuna_trials(storage: str):
    """Every trial of every study in the storage (``journal:<path>`` or an RDB URL)."""
    from uwbench.sweeps.storage import make_storage

    store = make_storage(storage)
    return [t for s in store.get_all_studies() for t in store.get_all_trials(s._study_id, deepcopy=False)]


def running_trial_of(storage: str, folder):
    """A RUNNING trial of the machine working in ``folder`` that has started its MLflow run, or None."""
    from optuna.trial import TrialState

    try:
        trials = optuna_trials(storage)
    except Exception:  # noqa: BLE001 - the storage is being created
        return None
    for t in trials:
        if t.state == TrialState.RUNNING and str(folder) in t.user_attrs.get("machine", "") \
                and "mlflow_run_id" in t.user_attrs:
            return t
    return None


def exactly_planned(uri: str, study: str, planned: int):
    """The study's child runs: exactly ``planned``, each job once, all FINISHED (none FAILED or RUNNING)."""
    df = runs(uri, study)
    children = df[df["tags.role"].isin(["trial", "final"])]
    assert len(children) == planned, sorted(children["tags.mlflow.runName"])
    assert children["tags.job_key"].is_unique  # no run repeated
    assert set(children["status"]) == {"FINISHED"} and set(children["tags.status"]) == {"finished"}
    parents = df[df["tags.role"] == "cell"]
    assert set(parents["status"]) == {"FINISHED"}
    return children


def machines_that_ran(storage: str):
    return {t.user_attrs.get("machine", "").rsplit(os.sep, 2)[-2] for t in optuna_trials(storage)
            if t.user_attrs.get("status") == "finished"}


def two_machines(tmp_path, env, study: str, storage: str, uri: str, delay_s: float = 20, extra=()):
    first = start_machine(tmp_path, "machine1", env, study, "--storage", storage, "--tracking-uri", uri,
                          *FAST_HEARTBEAT, *extra)
    time.sleep(delay_s)
    second = start_machine(tmp_path, "machine2", env, study, "--storage", storage, "--tracking-uri", uri,
                           *FAST_HEARTBEAT, *extra)
    return first, second


@pytest.mark.slow
def test_two_machines_on_one_journal_file_share_the_study(plugin_env, tmp_path):  # noqa: F811
    from uwbench.spec import load_plan

    env, uri = plugin_env
    study = study_file(tmp_path, "shared", TUNED)
    storage = "journal:" + str(tmp_path / "shared-disk" / "shared.journal")
    first, second = two_machines(tmp_path, env, study, storage, uri)
    out1, out2 = wait_machine(first), wait_machine(second)
    assert first.returncode == 0, out1[-3000:]
    assert second.returncode == 0, out2[-3000:]
    assert "interrupted" not in out2  # the second machine never touched the first one's live trials
    exactly_planned(uri, "shared", load_plan(study).n_runs())
    assert machines_that_ran(storage) == {"machine1", "machine2"}  # both did some of the work
    from optuna.trial import TrialState

    assert not [t for t in optuna_trials(storage) if t.state == TrialState.RUNNING]


@pytest.mark.slow  # two sweeps, one killed mid-trial; `make test` keeps test_sweeps.py's two-worker sweep and resume
def test_a_machine_killed_mid_trial_its_trial_is_resumed_by_the_other(plugin_env, tmp_path):  # noqa: F811
    from uwbench.spec import load_plan

    env, uri = plugin_env
    study = study_file(tmp_path, "killone", FAITHFUL)
    storage = "journal:" + str(tmp_path / "shared-disk" / "killone.journal")
    checkpoints = tmp_path / "shared-disk" / "checkpoints"  # both machines read and write it
    first, second = two_machines(tmp_path, env, study, storage, uri, delay_s=8,  # populations of 2 on each
                                 extra=("--checkpoint-dir", str(checkpoints), *POPULATIONS_OF_TWO))
    try:
        victim = _wait_for(lambda: running_trial_of(storage, second.folder), timeout=240, what="a trial on machine 2")
        state = checkpoints / victim.user_attrs["mlflow_run_id"] / "state.pt"
        _wait_for(state.exists, timeout=120, what="the trial's first checkpoint")
        os.killpg(second.pid, signal.SIGKILL)  # the whole machine: sweep and worker
        second.wait(timeout=30)
    finally:
        stop_process_group(second.pid, grace_s=1, leader=second)
    out1 = wait_machine(first)
    assert first.returncode == 0, out1[-3000:]
    assert "abandoned" in out1 and "resumes on the next free worker" in out1
    children = exactly_planned(uri, "killone", load_plan(study).n_runs())
    # the killed trial's run was re-opened (same run id), not started again, and ended FINISHED
    resumed = children[children["run_id"] == victim.user_attrs["mlflow_run_id"]]
    assert len(resumed) == 1 and resumed.iloc[0]["tags.retry_of"] == str(victim.number)
    # ... and continued from its checkpoint on machine 1, logging each evaluation once
    assert int(resumed.iloc[0]["tags.resumes"]) >= 1
    from mlflow.tracking import MlflowClient

    steps = [m.step for m in MlflowClient(uri).get_metric_history(victim.user_attrs["mlflow_run_id"], "eval_accuracy")]
    assert sorted(steps) == sorted(set(steps)) == [10, 20, 30, 40]
    assert len(runs(uri, "killone", deleted=True)) == 0
    # the killed machine, started again, finds the study complete
    again = start_machine(tmp_path, "machine2-again", env, study, "--storage", storage, "--tracking-uri", uri)
    assert "nothing to do" in wait_machine(again)


@pytest.mark.slow
def test_a_machine_frozen_past_the_grace_period_gives_its_trial_up(plugin_env, tmp_path):  # noqa: F811
    """Machine 2 stopped (SIGSTOP) longer than the grace period: machine 1 takes its trial over; when
    machine 2 wakes up its worker sees the trial is no longer its own, leaves the run alone, and goes on."""
    from optuna.trial import TrialState

    from uwbench.spec import load_plan

    env, uri = plugin_env
    study = study_file(tmp_path, "frozen", FAITHFUL)
    storage = "journal:" + str(tmp_path / "shared-disk" / "frozen.journal")
    first, second = two_machines(tmp_path, env, study, storage, uri, delay_s=8, extra=POPULATIONS_OF_TWO)
    try:
        victim = _wait_for(lambda: running_trial_of(storage, second.folder), timeout=240, what="a trial on machine 2")
        os.killpg(second.pid, signal.SIGSTOP)

        def taken_over():
            mine = [t for t in optuna_trials(storage) if t.number == victim.number
                    and t.user_attrs.get("job_key") == victim.user_attrs["job_key"]]
            return any(t.state == TrialState.FAIL for t in mine)

        _wait_for(taken_over, timeout=120, what="machine 1 to take the trial over")
        time.sleep(3)
    finally:
        os.killpg(second.pid, signal.SIGCONT)
    out1, out2 = wait_machine(first), wait_machine(second)
    assert first.returncode == 0, out1[-3000:]
    assert second.returncode == 0, out2[-3000:]
    assert "was taken over" in out2
    children = exactly_planned(uri, "frozen", load_plan(study).n_runs())
    resumed = children[children["run_id"] == victim.user_attrs["mlflow_run_id"]]
    assert len(resumed) == 1 and resumed.iloc[0]["tags.status"] == "finished"


def test_stale_heartbeats_are_not_judged_just_after_this_process_was_frozen():
    from uwbench.sweeps.backends.optuna import judging_heartbeats

    state: dict = {}
    interval, grace = 10, 60
    assert all(judging_heartbeats(state, t, interval, grace) for t in (0.0, 0.5, 1.0, 29.0))  # a gap of 28 s: fine
    assert not judging_heartbeats(state, 400.0, interval, grace)  # 371 s without a call: frozen
    assert not judging_heartbeats(state, 419.5, interval, grace)  # its workers are given two heartbeats
    assert judging_heartbeats(state, 420.0, interval, grace)
    assert judging_heartbeats(state, 420.5, interval, grace)


@pytest.mark.slow  # a sweep frozen for 8 s; `make test` keeps the rule's own test just above
def test_a_machine_frozen_whole_past_the_grace_period_goes_on_with_its_own_trials(plugin_env, tmp_path):  # noqa: F811
    """One machine, its sweep and its workers stopped together (SIGSTOP, as a suspended laptop) for longer
    than the grace period: when it wakes, its own workers are alive and beat again, so the sweep takes
    none of their trials away from them: no trial abandoned, no retry spent."""
    from optuna.trial import TrialState

    from uwbench.spec import load_plan

    env, uri = plugin_env
    # one population of two 30-update runs (3 s each), frozen while it trains
    study = study_file(tmp_path, "asleep", ("mode: faithful\n" + TASK + TRAIN % 30
                                            + f"cells: [{SLEEPY % 'sleepy'}]\nseeds: [0, 1]\n"))
    storage = "journal:" + str(tmp_path / "shared-disk" / "asleep.journal")
    only = start_machine(tmp_path, "machine1", env, study, "--storage", storage, "--tracking-uri", uri,
                         *FAST_HEARTBEAT, *POPULATIONS_OF_TWO)
    try:
        _wait_for(lambda: running_trial_of(storage, only.folder), timeout=240, what="a trial on the machine")
        os.killpg(only.pid, signal.SIGSTOP)
        time.sleep(8)  # well past the grace period of FAST_HEARTBEAT (5 s)
    finally:
        os.killpg(only.pid, signal.SIGCONT)
    out = wait_machine(only)
    assert only.returncode == 0, out[-3000:]
    assert "abandoned" not in out and "taken over" not in out, out[-3000:]
    assert not [t for t in optuna_trials(storage) if t.state == TrialState.FAIL]
    exactly_planned(uri, "asleep", load_plan(study).n_runs())


@pytest.mark.slow
def test_two_machines_on_postgresql_and_an_mlflow_server(plugin_env, tmp_path, postgres):  # noqa: F811
    from uwbench.spec import load_plan

    env, _ = plugin_env
    server_dir = tmp_path / "mlflow-server"
    server_dir.mkdir()
    url, server = start_mlflow_server(server_dir, postgres("mlflow"))
    try:
        study = study_file(tmp_path, "pgshared", TUNED)
        storage = postgres("optuna")
        first, second = two_machines(tmp_path, env, study, storage, url)
        out1, out2 = wait_machine(first), wait_machine(second)
        assert first.returncode == 0, out1[-3000:]
        assert second.returncode == 0, out2[-3000:]
        exactly_planned(url, "pgshared", load_plan(study).n_runs())
        assert machines_that_ran(storage) == {"machine1", "machine2"}
    finally:
        stop_process_group(server.pid, grace_s=3, leader=server)


@pytest.mark.slow
def test_a_machine_killed_on_postgresql_its_trial_resumes_after_the_heartbeat_grace(plugin_env, tmp_path,  # noqa: F811
                                                                                     postgres):
    """Optuna's own heartbeat (RDB storages): the killed trial is failed by `fail_stale_trials` on the
    other machine and retried there in the same MLflow run."""
    from uwbench.spec import load_plan

    env, uri = plugin_env
    study = study_file(tmp_path, "pgkill", FAITHFUL)
    storage = postgres("optunakill")
    first, second = two_machines(tmp_path, env, study, storage, uri, delay_s=8)
    try:
        victim = _wait_for(lambda: running_trial_of(storage, second.folder), timeout=240, what="a trial on machine 2")
        os.killpg(second.pid, signal.SIGKILL)
        second.wait(timeout=30)
    finally:
        stop_process_group(second.pid, grace_s=1, leader=second)
    out1 = wait_machine(first)
    assert first.returncode == 0, out1[-3000:]
    children = exactly_planned(uri, "pgkill", load_plan(study).n_runs())
    resumed = children[children["run_id"] == victim.user_attrs["mlflow_run_id"]]
    assert len(resumed) == 1 and resumed.iloc[0]["tags.retry_of"] == str(victim.number)


# ---- Ray: a cluster of two nodes on 127.0.0.1, the second one killed mid-trial ----


# Ray refuses a second node while it binds loopback only (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0), so this
# cluster runs in Ray's ordinary multi-node mode: the nodes register this machine's own address.
RAY_CLUSTER_ENV = {**RAY_HEAD_ENV, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"}


def _ray_node(tmp: str, *args):
    env = dict(os.environ, HOME=tmp, RAY_TMPDIR=tmp, **RAY_CLUSTER_ENV)
    env.pop("RAY_ADDRESS", None)
    ports = [f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
             f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
             f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}"]
    proc = subprocess.Popen([os.path.join(VENV_BIN, "ray"), "start", *args, *ports, "--disable-usage-stats",
                             "--object-store-memory=134217728"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        stop_process_group(proc.pid, grace_s=1)
        pytest.fail(f"ray start {' '.join(args)} did not finish in 120 s")
    if proc.returncode != 0:
        stop_process_group(proc.pid, grace_s=1)
        pytest.fail(f"ray start {' '.join(args)} failed:\n{out[-3000:]}")
    return proc.pid  # the process group of the node's daemons


@pytest.mark.slow
def test_a_ray_node_killed_mid_trial_its_trial_is_retried_in_the_same_run(plugin_env, tmp_path):  # noqa: F811
    import tempfile

    from uwbench.spec import load_plan

    env, uri = plugin_env
    tmp = tempfile.mkdtemp(prefix="uwr2", dir="/tmp")  # short: Ray's socket paths
    port = free_port()
    head = _ray_node(tmp, "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                     f"--temp-dir={tmp}", f"--dashboard-port={free_port()}")
    node2 = None
    try:
        node2 = _ray_node(tmp, f"--address=127.0.0.1:{port}", "--num-cpus=1")
        study = study_file(tmp_path, "raykill", FAITHFUL)
        env = dict(env, HOME=tmp, RAY_TMPDIR=tmp, **RAY_CLUSTER_ENV)
        proc = subprocess.Popen([sys.executable, "-m", "uwbench", "sweep", study, "--backend", "ray", "--ray-address",
                                 f"127.0.0.1:{port}", "--workers", "2", "--tracking-uri", uri, "--no-progress",
                                 "--checkpoint-dir", str(tmp_path / "checkpoints"), "--population", "3"],
                                env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            def two_running():  # one trial per node (one CPU each), each a population of 3 runs
                df = runs(uri, "raykill") if os.path.exists(uri[len("sqlite:///"):]) else None
                return df is not None and "tags.role" in df and \
                    int(((df["tags.role"] == "final") & (df["status"] == "RUNNING")).sum()) >= 6

            _wait_for(two_running, timeout=240, what="a trial on each node")
            stop_process_group(node2, grace_s=0)  # SIGTERM then SIGKILL: the node and its trial are gone
            node2 = None
            out, _ = proc.communicate(timeout=420)
        finally:
            stop_process_group(proc.pid, grace_s=1, leader=proc)
        assert proc.returncode == 0, out[-4000:]
        assert "lost its worker or node; retrying it" in out
        children = exactly_planned(uri, "raykill", load_plan(study).n_runs())
        assert len(runs(uri, "raykill", deleted=True)) == 0  # the lost trial's run was resumed, not replaced
        assert len(children) == 6
    finally:
        if node2 is not None:
            stop_process_group(node2, grace_s=1)
        stop_process_group(head, grace_s=2)
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


# ---- GPUs of one machine: worker i gets GPU i mod G (the count faked with $UWBENCH_GPU_COUNT) ----


def test_worker_devices_spread_workers_over_the_gpus():
    from uwbench.sweeps.common import SweepError
    from uwbench.sweeps.planning import worker_devices

    assert worker_devices(3, []) == [None, None, None]  # no GPU: the study's device as it is
    assert worker_devices(5, ["0", "1"]) == ["0", "1", "0", "1", "0"]  # i mod G
    assert worker_devices(4, ["0", "1"], 0.5) == ["0", "1", "0", "1"]  # two workers per GPU
    assert worker_devices(2, ["0", "1", "2", "3"], 2) == ["0,1", "2,3"]  # two GPUs per worker
    assert worker_devices(2, ["4", "6"]) == ["4", "6"]  # the user's CUDA_VISIBLE_DEVICES is kept
    with pytest.raises(SweepError, match="needs 3 GPUs, this machine has 2"):
        worker_devices(5, ["0", "1"], 0.5)
    with pytest.raises(SweepError, match="asks for GPUs, but this machine has none"):
        worker_devices(1, [], 0.5)


def test_gpu_ids_follow_the_fake_count_or_the_users_visible_devices(monkeypatch):
    from uwbench.sweeps.common import SweepError
    from uwbench.sweeps.planning import GPU_COUNT_ENV, gpu_ids

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.delenv(GPU_COUNT_ENV, raising=False)
    assert gpu_ids() == ["2", "3"]
    monkeypatch.setenv(GPU_COUNT_ENV, "3")
    assert gpu_ids() == ["0", "1", "2"]
    monkeypatch.setenv(GPU_COUNT_ENV, "two")
    with pytest.raises(SweepError, match="must be a whole number"):
        gpu_ids()


@pytest.mark.slow  # a two-worker sweep; the GPU assignment itself is tested without one (worker_devices)
def test_each_worker_process_sees_its_own_gpu(sweep_env, tmp_path):
    """Two workers on a machine that claims two GPUs: each trial ran with CUDA_VISIBLE_DEVICES set to its
    worker's GPU (recorded on the run), the two workers on different GPUs."""
    env, uri = sweep_env
    lstm = "{model: lstm, name: lstm, set: {model: {hidden_size: 8}}}"
    study = study_file(tmp_path, "gpus", f"mode: faithful\n{TASK}{TRAIN % 20}cells: [{lstm}]\nseeds: [0, 1, 2, 3]\n")
    env = dict(env, UWBENCH_GPU_COUNT="2")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, "-m", "uwbench", "sweep", study, "--workers", "2", "--no-progress",
                           "--tracking-uri", uri], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    children = exactly_planned(uri, "gpus", 4)
    trials = optuna_trials("journal:" + os.path.join(env["UWBENCH_RUNS_DIR"], "optuna", "gpus.journal"))
    by_worker = {}
    for t in trials:
        run = children[children["run_id"] == t.user_attrs["mlflow_run_id"]].iloc[0]
        by_worker.setdefault(t.user_attrs["worker"], set()).add(run["tags.cuda_visible_devices"])
    assert all(len(gpus) == 1 for gpus in by_worker.values())  # a worker keeps its GPU
    assert set().union(*by_worker.values()) <= {"0", "1"}
    if len(by_worker) == 2:  # both workers got work: one per GPU
        assert set().union(*by_worker.values()) == {"0", "1"}


def test_a_study_begun_before_job_keys_resumes_without_repeating(sweep_env, tmp_path):
    """A journal written by an older uwbench (trials without job keys: one search trial done, one
    waiting) is resumed: nothing done is planned again."""
    import optuna

    from uwbench.spec import load_plan
    from uwbench.sweeps.storage import make_storage, study_name

    env, uri = sweep_env
    lstm = "{model: lstm, name: lstm, set: {model: {hidden_size: 8}}}"
    study = study_file(tmp_path, "legacy", f"mode: tuned\n{TASK}{TRAIN % 20}cells: [{lstm}]\n"
                       "search: {train.lr: {type: float, low: 1.0e-3, high: 1.0e-2, log: true}}\n"
                       "seeds: [0]\nfinal_seeds: [5]\nbudget: {n_trials: 2}\npruning: {type: none}\n")
    plan = load_plan(study)
    journal = os.path.join(env["UWBENCH_RUNS_DIR"], "optuna", "legacy.journal")
    store = make_storage("journal:" + journal)
    search = optuna.create_study(study_name=study_name(plan, "lstm", "search"), storage=store, direction="maximize")
    optuna.create_study(study_name=study_name(plan, "lstm", "final"), storage=store, direction="maximize")
    search.add_trial(optuna.trial.create_trial(  # as the older code recorded a finished search trial
        params={"train.lr": 0.005}, distributions={"train.lr": optuna.distributions.FloatDistribution(1e-3, 1e-2,
                                                                                                     log=True)},
        value=0.5, user_attrs={"seed": 0, "status": "finished", "test": 0.25}))
    search.enqueue_trial({})  # and one it had planned but not run
    proc = subprocess.run([sys.executable, "-m", "uwbench", "sweep", study, "--workers", "0", "--no-progress",
                           "--tracking-uri", uri], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "3 runs planned, 1 recorded" in proc.stdout
    trials = optuna_trials("journal:" + journal)
    assert len([t for t in trials if t.params.get("seed") is None]) == 2  # the two search trials, no third
    df = runs(uri, "legacy")
    children = df[df["tags.role"].isin(["trial", "final"])]
    assert sorted(children["tags.role"]) == ["final", "trial"]  # trial 1 and the final run: nothing repeated
    assert set(children[children["tags.role"] == "trial"]["tags.trial_number"]) == {"1"}
