"""Process environment hygiene (stack notes §10.3): set once, never override what the user set."""
from __future__ import annotations

import os

DEFAULTS = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MPLBACKEND": "Agg",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/",
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",
}


def apply() -> None:
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)


RUNS_DIR_ENV = "UWBENCH_RUNS_DIR"


def runs_dir() -> str:
    """Where local MLflow data, Optuna journals and checkpoints go (default ./runs)."""
    return os.path.abspath(os.environ.get(RUNS_DIR_ENV, "runs"))


def progress_interval() -> float:
    """Seconds between progress-bar redraws: twice a second on a terminal, every 30 s when stderr goes to a
    file or a CI log (each redraw there is one more line of output)."""
    import sys

    return 0.5 if sys.stderr.isatty() else 30.0
