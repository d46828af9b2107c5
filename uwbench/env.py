"""Process environment: library settings set once (never overriding what the user set), and the
uwbench settings read from the environment (runs folder, checkpoint folder, Inductor cache, native
kernels' cache, system metrics switch, tracebacks on errors, the wait for a server to answer)."""
from __future__ import annotations

import os

from uwbench import errors
from uwbench.errors import UserError

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


CHECKPOINT_DIR_ENV = "UWBENCH_CHECKPOINT_DIR"


def checkpoint_dir() -> str:
    """Where mid-run training checkpoints go (``<dir>/<MLflow run id>/``): ``$UWBENCH_CHECKPOINT_DIR``, else
    ``<runs dir>/checkpoints``. Point it at a folder every machine can read when runs may resume elsewhere."""
    path = os.environ.get(CHECKPOINT_DIR_ENV)
    return os.path.abspath(path) if path else os.path.join(runs_dir(), "checkpoints")


errors.WRITTEN_FOLDERS.extend((runs_dir, checkpoint_dir))  # where a full disk nobody named is looked for


SYSTEM_METRICS_ENV = "UWBENCH_SYSTEM_METRICS"
_SWITCH_VALUES = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False,
                  "off": False}


def system_metrics() -> bool:
    """Whether training runs log system metrics (CPU, memory, GPU) to MLflow: on unless
    ``UWBENCH_SYSTEM_METRICS`` says 0 / false / no / off."""
    return _switch(SYSTEM_METRICS_ENV, "1", "set it to 0 to turn system metrics off")


def _switch(name: str, default: str, fix: str) -> bool:
    raw = os.environ.get(name, default).strip().lower()
    if raw not in _SWITCH_VALUES:
        raise UserError(f"{name} must be one of {sorted(_SWITCH_VALUES)}, got {raw!r}; {fix}")
    return _SWITCH_VALUES[raw]


DEBUG_ENV = "UWBENCH_DEBUG"


def debug() -> bool:
    """Whether a failing command shows its traceback (``UWBENCH_DEBUG=1``, like the ``--debug`` flag) instead
    of the one-line error. An unreadable value counts as off: the switch must never hide the real error."""
    try:
        return _switch(DEBUG_ENV, "0", "set it to 1 for tracebacks")
    except ValueError:
        return False


CONNECT_TIMEOUT_ENV = "UWBENCH_CONNECT_TIMEOUT"
CONNECT_TIMEOUT_S = 5.0  # seconds to wait for an MLflow server or a database server to accept a connection


def connect_timeout() -> float:
    """Seconds to wait for an ``http(s)://`` MLflow tracking server or a PostgreSQL Optuna storage to accept a
    connection before giving up with an error (``UWBENCH_CONNECT_TIMEOUT``, default 5)."""
    raw = os.environ.get(CONNECT_TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return CONNECT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise UserError(f"{CONNECT_TIMEOUT_ENV} must be a number of seconds > 0, got {raw!r}; "
                         f"unset it for the default of {CONNECT_TIMEOUT_S:g} s")
    return value


NATIVE_CACHE_ENV = "UWBENCH_NATIVE_CACHE"


def user_cache_dir() -> str:
    """uwbench's per-user cache: ``$XDG_CACHE_HOME/uwbench`` or ``~/.cache/uwbench`` (what one machine's
    projects share: built kernels, an empty MLflow store to copy)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "uwbench")


def native_cache_dir() -> str:
    """Where the native kernels' compiled library goes: ``$UWBENCH_NATIVE_CACHE``, else
    ``$XDG_CACHE_HOME/uwbench/native`` or ``~/.cache/uwbench/native`` (per user, not per runs folder: one
    build serves every project on the machine)."""
    path = os.environ.get(NATIVE_CACHE_ENV)
    if path:
        return os.path.abspath(path)
    return os.path.join(user_cache_dir(), "native")


def inductor_cache_dir() -> str:
    """Where torch.compile's Inductor keeps its on-disk cache: <runs dir>/inductor-cache."""
    return os.path.join(runs_dir(), "inductor-cache")


def progress_interval() -> float:
    """Seconds between progress-bar redraws: twice a second on a terminal, every 30 s when stderr goes to a
    file or a CI log (each redraw there is one more line of output)."""
    import sys

    return 0.5 if sys.stderr.isatty() else 30.0
