"""Processes the tests start and stop: free ports, process groups, servers on 127.0.0.1, headless
chromium."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

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


RAY_HEAD_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # bind GCS and raylet to 127.0.0.1 only
                "RAY_AUTH_MODE": "disabled",  # same on head and clients (docs/design.md §13.3)
                "RAY_USAGE_STATS_ENABLED": "0", "RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/"}


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
