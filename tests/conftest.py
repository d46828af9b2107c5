"""Shared fixtures. Expensive things are made once per session and copied (a fresh MLflow SQLite
store costs about 4 s of migrations: stack notes §4)."""
from __future__ import annotations

import os
import shutil

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


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
