"""Faults of the machine are not results: a sweep that meets one stops with one line naming it and the fix,
leaves the runs it touched unfinished (no Optuna FAIL, no MLflow run failed for it, none RUNNING where the
store can still be written), and the same command after the fix runs them: every planned run finished
exactly once.

The faults are injected into a real ``uwbench sweep`` subprocess by a ``sitecustomize`` module this file
writes and puts on its ``PYTHONPATH`` (``HOOK``): a disk that fills up at the first checkpoint write (every
later write under the full folder, Python's and SQLite's, fails with ENOSPC or "database or disk is full"
until the test frees the space by removing a flag file), or an MLflow server that stops at that moment (the
test starts it again on the same port). Also here: a sweep whose every run failed exits non-zero, and a
restore killed half-way is cleaned up by the next one.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from typing import Dict, List, Tuple

import pytest

from tests.helpers.processes import VENV_BIN, free_port, stop_process_group, wait_until_answering

from tests.helpers import ROOT

QUICKSTART = os.path.join(ROOT, "studies", "quickstart.yaml")
SMOKE = ["--profile", "smoke", "--workers", "0", "--no-progress", "--no-system-metrics", "--cells", "dnc-uniform-*"]
PLANNED = 4  # the one cell's 2 search trials and 2 final runs

HOOK = textwrap.dedent('''
    """Injected faults (tests/sweeps/test_faults.py). FAULT_TRIGGER: the fault happens at the first file opened for
    writing under this folder (once: FAULT_FLAG.done remembers it). FAULT_FULL: the folder whose disk is then
    full, while FAULT_FLAG exists. FAULT_SERVER_PGID: the process group of an MLflow server stopped then."""
    import builtins, errno, os, signal, sqlite3, time

    TRIGGER, FULL, FLAG = (os.environ.get(k) for k in ("FAULT_TRIGGER", "FAULT_FULL", "FAULT_FLAG"))
    SERVER = os.environ.get("FAULT_SERVER_PGID")
    _open = builtins.open


    def _under(path, folder):
        return bool(folder) and os.path.abspath(path).startswith(os.path.abspath(folder) + os.sep)


    def _happen():
        _open(FLAG + ".done", "w").close()
        if FULL:
            _open(FLAG, "w").close()
        if SERVER:
            try:
                os.killpg(int(SERVER), signal.SIGKILL)
            except ProcessLookupError:
                pass
            time.sleep(1)


    def full(path):
        return bool(FULL) and os.path.exists(FLAG) and _under(path, FULL)


    def hooked_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+"):
            path = os.fsdecode(file)
            if _under(path, TRIGGER) and not os.path.exists(FLAG + ".done"):
                _happen()
            if full(path):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return _open(file, mode, *args, **kwargs)


    builtins.open = hooked_open


    class Cursor(sqlite3.Cursor):
        def _check(self, sql):
            if full(self.connection.path) and sql.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE",
                                                                                           "DELETE", "REPLACE"):
                raise sqlite3.OperationalError("database or disk is full")

        def execute(self, sql, *args):
            self._check(sql)
            return super().execute(sql, *args)

        def executemany(self, sql, *args):
            self._check(sql)
            return super().executemany(sql, *args)


    class Connection(sqlite3.Connection):
        path = ""

        def cursor(self, factory=Cursor):
            return super().cursor(factory)


    _connect = sqlite3.connect


    def hooked_connect(database, *args, **kwargs):
        kwargs.setdefault("factory", Connection)
        conn = _connect(database, *args, **kwargs)
        conn.path = os.fsdecode(database) if not isinstance(database, int) else ""
        return conn


    if FULL:
        sqlite3.connect = sqlite3.dbapi2.connect = hooked_connect
''')


def hooked_env(sweep_env, tmp_path, **faults) -> Dict[str, str]:
    env, _ = sweep_env
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    env = dict(env, PYTHONPATH=os.pathsep.join([str(hook), ROOT]), FAULT_FLAG=str(tmp_path / "full"),
               MLFLOW_HTTP_REQUEST_MAX_RETRIES="1", MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR="0",
               MLFLOW_HTTP_REQUEST_TIMEOUT="10")
    env.update({k: str(v) for k, v in faults.items()})
    return env


def sweep(env: Dict[str, str], uri: str, *extra: str) -> Tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "uwbench", "sweep", QUICKSTART, *SMOKE, "--tracking-uri", uri,
                           *extra], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def store_rows(db: str) -> List[Tuple[str, str, str, str, str]]:
    """(role, job_key, MLflow status, status tag, error tag) of every active run of an MLflow SQLite store."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("select run_uuid, status from runs where lifecycle_stage = 'active'").fetchall()
        out = []
        for run_id, status in rows:
            tags = dict(con.execute("select key, value from tags where run_uuid = ?", (run_id,)).fetchall())
            out.append((tags.get("role"), tags.get("job_key"), status, tags.get("status"), tags.get("error")))
        return out
    finally:
        con.close()


def assert_stopped_on(code: int, out: str, expect: List[str]) -> None:
    errors = [line for line in out.splitlines() if ": error: " in line]
    assert code == 2 and len(errors) == 1 and "Traceback" not in out, out[-4000:]
    for text in expect:
        assert text in errors[0], errors[0]


def assert_each_run_finished_once(db: str) -> None:
    rows = store_rows(db)
    jobs = [(k, s) for role, k, s, _, _ in rows if role in ("trial", "final")]
    assert len(jobs) == PLANNED and len({k for k, _ in jobs}) == PLANNED, rows
    assert {s for _, s in jobs} == {"FINISHED"}, rows
    assert {s for role, _, s, _, _ in rows if role == "cell"} == {"FINISHED"}, rows


def no_run_failed_for_the_fault(db: str) -> None:
    rows = store_rows(db)
    assert not [r for r in rows if r[2] == "FAILED" or r[3] == "failed"], rows


@pytest.mark.parametrize("where", [pytest.param("checkpoints", marks=pytest.mark.slow), "runs"])  # one in make test
def test_a_full_disk_stops_the_sweep_and_the_same_command_then_finishes_it(where, sweep_env, tmp_path):
    """``checkpoints``: a checkpoint folder on its own disk fills (the MLflow store can still be written, so
    nothing is left RUNNING); ``runs``: the whole runs folder, the MLflow store and the Optuna journal in it."""
    _, uri = sweep_env
    db = uri[len("sqlite:///"):]
    runs = os.path.dirname(db)
    scratch = str(tmp_path / "scratch") if where == "checkpoints" else os.path.join(runs, "checkpoints")
    full = scratch if where == "checkpoints" else runs
    env = hooked_env(sweep_env, tmp_path, FAULT_TRIGGER=scratch, FAULT_FULL=full)
    argv = ["--checkpoint-dir", scratch]
    code, out = sweep(env, uri, *argv)
    assert_stopped_on(code, out, [f"the disk is full at {full}", "free space, then run the same command"])
    assert os.path.exists(tmp_path / "full")  # the fault did happen
    if where == "checkpoints":
        rows = store_rows(db)
        assert not [r for r in rows if r[2] == "RUNNING"], rows
        assert {s for role, _, s, _, _ in rows if role == "cell"} == {"KILLED"}, rows
        stopped = [(s, t) for role, _, s, t, _ in rows if role != "cell"]  # the run(s) training then: one run, or
        assert stopped and set(stopped) == {("KILLED", "interrupted")}, rows  # the members of one population
    no_run_failed_for_the_fault(db)
    os.remove(tmp_path / "full")  # space freed
    code, out = sweep(env, uri, *argv)
    assert code == 0, out[-4000:]
    assert "nothing to do" not in out
    assert_each_run_finished_once(db)


def _start_server(folder: str, db: str, port: int):
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false", MLFLOW_DISABLE_TELEMETRY="true",
               HOME=folder)
    cmd = [os.path.join(VENV_BIN, "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--backend-store-uri", f"sqlite:///{db}", "--artifacts-destination", os.path.join(folder, "artifacts")]
    log = open(os.path.join(folder, "mlflow-server.log"), "a")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    wait_until_answering(proc, f"http://127.0.0.1:{port}/health", 180, f"mlflow server (see {folder})")
    return proc


def test_a_tracking_server_that_stops_stops_the_sweep_and_once_restarted_the_same_command_finishes_it(
        sweep_env, tmp_path, _migrated_mlflow_db):
    import shutil

    folder = str(tmp_path / "server")
    os.makedirs(folder)
    db = os.path.join(folder, "mlflow.db")
    shutil.copy(_migrated_mlflow_db, db)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _start_server(folder, db, port)
    try:
        runs = sweep_env[0]["UWBENCH_RUNS_DIR"]
        env = hooked_env(sweep_env, tmp_path, FAULT_TRIGGER=os.path.join(runs, "checkpoints"),
                         FAULT_SERVER_PGID=proc.pid)
        code, out = sweep(env, url)
        assert_stopped_on(code, out, [f"the MLflow server {url} does not answer", "then run the same command"])
        assert proc.poll() is not None  # the fault did happen
        no_run_failed_for_the_fault(db)
        proc = _start_server(folder, db, port)
        code, out = sweep(env, url)
        assert code == 0, out[-4000:]
        assert_each_run_finished_once(db)
    finally:
        stop_process_group(proc.pid, grace_s=2, leader=proc)


def test_a_sweep_whose_every_run_failed_exits_non_zero_and_so_does_its_rerun(tracking_uri, monkeypatch, capsys):
    """Every run's own failure (here the model crashes at its first update) is recorded, not retried; the
    sweep then says so as its one error, and the same command, with nothing to do, says it again."""
    from tests.helpers.cli import run
    from uwbench.training import loop, population

    def crash(self, *args, **kwargs):
        raise RuntimeError("the model broke")

    monkeypatch.setattr(loop._Trainer, "_updates", crash)  # a run trained alone
    monkeypatch.setattr(population.Population, "_update", crash)  # the members of a population
    argv = ["sweep", QUICKSTART, *SMOKE, "--tracking-uri", tracking_uri]
    for again in (False, True):
        capsys.readouterr()
        assert run(argv) == 2
        captured = capsys.readouterr()
        errors = [line for line in captured.err.splitlines() if ": error: " in line]
        assert len(errors) == 1 and "every one of the 2 runs failed (the first: RuntimeError: the model broke)" \
            in errors[0], captured.err
        assert ("nothing to do" in captured.out) == again
    rows = store_rows(tracking_uri[len("sqlite:///"):])
    assert sorted(s for role, _, s, _, _ in rows if role != "cell") == ["FAILED", "FAILED"], rows
    assert {s for role, _, s, _, _ in rows if role == "cell"} == {"FINISHED"}, rows



@pytest.mark.parametrize("population", [False, True])
def test_an_error_raised_while_stopping_is_the_interruption_not_the_runs_result(tracking_uri, population):
    """A storage write that fails as the process stops (a journal's lock file gone under SIGTERM) carries the
    interruption as its context: the run is left unfinished (KILLED, interrupted) to be run again, and the
    interruption goes on up, where recording it failed would have lost the run for good."""
    from mlflow.tracking import MlflowClient

    from uwbench.spec import load_plan
    from uwbench.sweeps import common

    plan = load_plan(QUICKSTART, "smoke")
    client = MlflowClient(tracking_uri)
    experiment_id = client.create_experiment("stopping")
    parent = client.create_run(experiment_id).info.run_id
    job = common.Job(study="quickstart", profile="smoke", mode="tuned", spec_hash=plan.spec_hash, backend="optuna",
                     cell=plan.cells[0], role="final", params={"train.lr": 0.002, "train.clip": 5, "seed": 9}, seed=9,
                     trial_number=1, objective_metric="eval_accuracy", experiment_id=experiment_id,
                     parent_run_id=parent, uri=tracking_uri)
    seen = []

    def remember(run_id):  # the trial's storage write, as SIGTERM lands in it
        seen.append(run_id)
        try:
            raise KeyboardInterrupt("signal 15")
        except KeyboardInterrupt:
            raise FileNotFoundError("the journal's lock file is gone")

    with pytest.raises(KeyboardInterrupt, match="FileNotFoundError while stopping"):
        if population:
            common.execute_population([common.Member(job, on_run=remember)])
        else:
            common.execute(job, on_run=remember)
    run = client.get_run(seen[0])
    assert run.info.status == "KILLED" and run.data.tags["status"] == "interrupted"
    assert not common.raised_while_interrupted(FileNotFoundError("a plain missing file"))
