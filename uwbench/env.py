"""Process environment hygiene: set once, never override what the user set."""
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


INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def apply() -> None:
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
    # Inductor's compiled code lives under the runs folder, so the workers of a sweep and later runs
    # reuse it instead of compiling again (torch's default is a per-user folder under /tmp)
    os.environ.setdefault(INDUCTOR_CACHE_ENV, inductor_cache_dir())


RUNS_DIR_ENV = "UWBENCH_RUNS_DIR"


def runs_dir() -> str:
    """Where local MLflow data, Optuna journals and checkpoints go (default ./runs)."""
    return os.path.abspath(os.environ.get(RUNS_DIR_ENV, "runs"))


def inductor_cache_dir() -> str:
    """Where torch.compile's Inductor keeps its on-disk cache: <runs dir>/inductor-cache."""
    return os.path.join(runs_dir(), "inductor-cache")


def progress_interval() -> float:
    """Seconds between progress-bar redraws: twice a second on a terminal, every 30 s when stderr goes to a
    file or a CI log (each redraw there is one more line of output)."""
    import sys

    return 0.5 if sys.stderr.isatty() else 30.0
