"""Shared fixtures. Expensive things are made once per session and copied (a fresh MLflow SQLite
store costs about 4 s of migrations: stack notes §4)."""
from __future__ import annotations

import os
import shutil

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


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
                "RAY_AUTH_MODE": "disabled",  # same on head and clients (stack notes §6)
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
