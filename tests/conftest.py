"""Shared fixtures. Expensive things are made once per session and copied (a fresh MLflow SQLite
store costs about 4 s of migrations: docs/design.md §13.1)."""
from __future__ import annotations

import os
import shutil

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(autouse=True)
def _own_runs_dir(tmp_path, monkeypatch):
    """Every test's runs folder (study locks, Optuna journals, checkpoints, the Inductor cache) is its own:
    `make test` runs tests in parallel processes, and two tests sweeping the same study into the repository's
    `runs/` would meet its study lock. Fixtures such as ``tracking_uri`` point it elsewhere again."""
    monkeypatch.setenv("UWBENCH_RUNS_DIR", str(tmp_path / "runs"))


def fit_and_score(model, task, updates: int, lr: float = 1e-2, batch_size: int = 32) -> float:
    """Train ``model`` on ``task`` with Adam for ``updates`` steps (seeded batches), then its per-token
    accuracy on 256 fresh sequences: the "it learns" checks of the model and writer tests."""
    import torch

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(0)
    for _ in range(updates):
        batch = task.sample(batch_size, gen)
        loss = task.loss(model(batch.inputs, batch.decoder_inputs), batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    batch = task.sample(256, torch.Generator().manual_seed(99))
    with torch.no_grad():
        pred = model(batch.inputs, batch.decoder_inputs).argmax(-1)
    return (pred == batch.targets).float().mean().item()


def assert_passes_match(task, eager, other, call=None, seeds=(0, 1, 2), lr=None, device="cuda") -> None:
    """Forward + loss + backward of ``eager`` and of ``other`` (called through ``call``, default the model
    itself) on the same fresh batches: outputs and every parameter's gradient match (float32
    tolerances). ``lr``: after each batch, an SGD step of that size on both, so the next passes run on
    weights changed in place."""
    import torch

    for seed in seeds:
        batch = task.sample(4, torch.Generator().manual_seed(seed)).to(device)
        results = []
        for model, fn in ((eager, eager), (other, call or other)):
            model.zero_grad(set_to_none=True)
            out = fn(batch.inputs, batch.decoder_inputs)
            task.loss(out, batch).backward()
            results.append((out.detach().clone(), {n: p.grad.clone() for n, p in model.named_parameters()}))
        (out_e, g_e), (out_o, g_o) = results
        torch.testing.assert_close(out_o, out_e, rtol=1e-4, atol=1e-5)
        for name, g in g_e.items():
            torch.testing.assert_close(g_o[name], g, rtol=1e-3, atol=1e-5, msg=name)
        if lr is not None:
            with torch.no_grad():
                for a, b in zip(eager.parameters(), other.parameters()):
                    a.sub_(lr * a.grad)
                    b.sub_(lr * b.grad)


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


# ---- sweeps (tests/test_sweeps*.py): subprocess environment, a Ray head on loopback ----

import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

VENV_BIN = os.path.dirname(sys.executable)


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stop_process_group(pgid: int, grace_s: float = 5.0, leader=None) -> None:
    """SIGTERM then SIGKILL one process group we started (never `ray stop`: it kills other users' Ray).
    ``leader``: the Popen of the group's first process, if it is our child (reaped here)."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait
        while time.time() < deadline:
            if leader is not None:
                leader.poll()  # a zombie leader would keep the group alive
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


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


RAY_HEAD_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # bind GCS and raylet to 127.0.0.1 only
                "RAY_AUTH_MODE": "disabled",  # same on head and clients (docs/design.md §13.3)
                "RAY_USAGE_STATS_ENABLED": "0", "RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/"}


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


# ---- several machines on one study (tests/test_multimachine.py): PostgreSQL, an MLflow server ----

import glob  # noqa: E402
import pwd  # noqa: E402
import urllib.request  # noqa: E402


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


def start_mlflow_server(folder, backend_store_uri: str):
    """A lean `mlflow server` on 127.0.0.1 over ``backend_store_uri`` (artifacts under ``folder``), in its
    own process group. Returns (url, Popen) once /health answers; stop it with ``stop_process_group``."""
    port = free_port()
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false", MLFLOW_DISABLE_TELEMETRY="true",
               HOME=str(folder))
    cmd = [os.path.join(VENV_BIN, "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--backend-store-uri", backend_store_uri, "--artifacts-destination", os.path.join(str(folder), "artifacts")]
    log = open(os.path.join(str(folder), "mlflow-server.log"), "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_until_answering(proc, url + "/health", 180, f"mlflow server (see {folder}/mlflow-server.log)")
    return url, proc


def wait_until_answering(proc, url: str, timeout_s: float, what: str) -> None:
    """Wait until ``url`` answers 200; stop ``proc``'s process group and fail the test if it exits first or
    ``timeout_s`` passes."""
    deadline = time.time() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            stop_process_group(proc.pid, grace_s=1, leader=proc)
            pytest.fail(f"{what} did not answer at {url} (exit {proc.poll()})")
        time.sleep(0.5)


# Debian's chromium, where installed (.ci/run installs it): the tests that look at pages as a person would
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


def run_chromium(tmp_path, *args: str, timeout_s: float = 60, what: str = "the page"):
    """Headless chromium with its own profile and HOME under ``tmp_path`` and ``args`` (e.g. ``--dump-dom``
    and a URL); returns (stdout, stderr) as bytes, or fails the test naming ``what`` if it does not end in
    ``timeout_s``."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "HOME": str(tmp_path)}, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_process_group(proc.pid, grace_s=1, leader=proc)
        pytest.fail(f"chromium did not finish {what} in {timeout_s:g} s")
    return out, err, proc.returncode
