"""Shared fixtures. Expensive things are made once per session and copied (a fresh MLflow SQLite
store costs about 4 s of migrations: docs/design.md §13.1). Helpers that are not fixtures live in
tests/helpers/ (tests/README.md)."""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from tests.helpers.processes import RAY_HEAD_ENV, VENV_BIN, free_port, stop_process_group

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(autouse=True)
def _own_runs_dir(tmp_path, monkeypatch):
    """Every test's runs folder (study locks, Optuna journals, checkpoints, the Inductor cache) is its own:
    `make test` runs tests in parallel processes, and two tests sweeping the same study into the repository's
    `runs/` would meet its study lock. Fixtures such as ``tracking_uri`` point it elsewhere again."""
    monkeypatch.setenv("UWBENCH_RUNS_DIR", str(tmp_path / "runs"))


@pytest.fixture(scope="session")
def _migrated_mlflow_db(tmp_path_factory) -> str:
    from uwbench.tracking.mlflow import ensure_experiment

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    ensure_experiment("warmup", f"sqlite:///{path}")
    return str(path)


@pytest.fixture
def tracking_uri(tmp_path, _migrated_mlflow_db, monkeypatch) -> str:
    """A private, already-migrated MLflow SQLite store for one test (artifacts beside it)."""
    path = tmp_path / "mlruns" / "mlflow.db"
    path.parent.mkdir()
    shutil.copy(_migrated_mlflow_db, path)
    monkeypatch.setenv("UWBENCH_RUNS_DIR", str(tmp_path / "mlruns"))
    return f"sqlite:///{path}"


# ---- sweeps (tests/sweeps/): subprocess environment, a Ray head on loopback ----


@pytest.fixture
def sweep_env(tmp_path, tracking_uri):
    """Environment for a `uwbench sweep` subprocess: runs/, HOME (Ray's ~/.ray token, MLflow telemetry) and
    Ray's temp dir all under this test's tmp_path; returns (env, tracking_uri)."""
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ)
    for key in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "RAY_ADDRESS"):
        env.pop(key, None)
    ray_tmp = tempfile.mkdtemp(prefix="uwrt", dir="/tmp")  # short: Ray's socket paths must stay < 108 chars
    env.update(UWBENCH_RUNS_DIR=str(tmp_path / "mlruns"), HOME=str(home), RAY_TMPDIR=ray_tmp,
               MLFLOW_DISABLE_TELEMETRY="true", RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1")
    yield env, tracking_uri
    shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_head():
    """One Ray head per session, started with `ray start` on 127.0.0.1 with its own ports, HOME and temp dir;
    stopped by its process group (the processes `ray start` launched). Yields (address, client env)."""
    tmp = tempfile.mkdtemp(prefix="uwray", dir="/tmp")  # short: Ray's unix socket paths must stay < 108 chars
    env = dict(os.environ, HOME=tmp, RAY_TMPDIR=tmp, **RAY_HEAD_ENV)
    env.pop("RAY_ADDRESS", None)
    port = free_port()
    cmd = [os.path.join(VENV_BIN, "ray"), "start", "--head", f"--port={port}", "--num-cpus=2",
           "--include-dashboard=false", "--object-store-memory=268435456", f"--temp-dir={tmp}",
           "--disable-usage-stats", f"--dashboard-port={free_port()}", f"--node-manager-port={free_port()}",
           f"--object-manager-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
           f"--dashboard-agent-grpc-port={free_port()}", f"--metrics-export-port={free_port()}",
           f"--runtime-env-agent-port={free_port()}"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # its daemons stay in this new process group
    pgid = proc.pid
    try:
        out, _ = proc.communicate(timeout=120)
        if proc.returncode != 0:
            pytest.fail(f"ray start failed ({proc.returncode}):\n{out[-3000:]}")
        yield f"127.0.0.1:{port}", {**RAY_HEAD_ENV}
    finally:
        stop_process_group(pgid, grace_s=2)
        shutil.rmtree(tmp, ignore_errors=True)


# ---- several machines on one study (tests/sweeps/test_multimachine.py): PostgreSQL ----


def _postgres_bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else ""


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server of our own (Debian's `postgresql` package), initialised in a temporary folder,
    listening on 127.0.0.1 only, trust auth for the user ``uw``; stopped by its PID. It refuses to run as
    root, so as root it runs as the ``postgres`` user. Yields ``make_db(name) -> SQLAlchemy URL``."""
    bindir = _postgres_bin()
    if not bindir:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql; .ci/run does it)")
    try:
        import psycopg
    except ImportError:
        pytest.skip("the psycopg driver is not installed (pip install 'psycopg[binary]')")
    as_user: list = []
    folder = tempfile.mkdtemp(prefix="uwpg", dir="/tmp")  # short: the server's unix socket lives here
    if os.geteuid() == 0:
        try:
            pg = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder, ignore_errors=True)
            pytest.skip("running as root and there is no `postgres` user to run PostgreSQL as")
        os.chown(folder, pg.pw_uid, pg.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(folder, "data"), free_port()

    def run(*cmd):
        return subprocess.run([*as_user, *cmd], check=True, capture_output=True, text=True, timeout=120)

    pid = None
    try:
        run(os.path.join(bindir, "initdb"), "-D", data, "-A", "trust", "-U", "uw")
        run(os.path.join(bindir, "pg_ctl"), "-D", data, "-o", f"-p {port} -k {folder} -c listen_addresses=127.0.0.1",
            "-l", os.path.join(folder, "log"), "-w", "start")
        with open(os.path.join(data, "postmaster.pid")) as fh:
            pid = int(fh.readline())
        admin = f"postgresql://uw@127.0.0.1:{port}/postgres"

        def make_db(name: str) -> str:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
                conn.execute(f'CREATE DATABASE "{name}"')
            return f"postgresql+psycopg://uw@127.0.0.1:{port}/{name}"

        yield make_db
    finally:
        if pid is not None:
            try:
                os.kill(pid, signal.SIGINT)  # "fast" shutdown
                deadline = time.time() + 30
                while time.time() < deadline:
                    os.kill(pid, 0)
                    time.sleep(0.2)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(folder, ignore_errors=True)
