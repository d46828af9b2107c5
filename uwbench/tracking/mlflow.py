"""MLflow, the system of record (docs/design.md §1, §9). The only module that imports mlflow.

Uses ``MlflowClient`` with explicit experiment and run ids (no global active run, no
``MLFLOW_EXPERIMENT_ID`` in the environment), so the same code works in the CLI, in Optuna worker
processes and in Ray trial actors. Default store: ``sqlite:///<runs>/mlflow.db`` with artifacts under
``<runs>/artifacts``; any URI (an ``mlflow server``) works the same.

A training run also records its provenance (``provenance.py``: commit, dirty flag and diff, versions,
machine, packages) and, unless switched off, system metrics (``SystemMetrics``: MLflow's own monitor).

A store is opened once per process (``resolve_uri``) and checked then, so that what cannot work is one line
naming it (``TrackingError``) before any run exists: an ``http(s)://`` server, and the database server of a
``postgresql://`` (MySQL, SQL Server) URI, must accept a connection within ``UWBENCH_CONNECT_TIMEOUT`` seconds
(a "connecting to ..." line says so while it waits for an MLflow server); a local SQLite file must be
creatable and readable as an MLflow database; any other URI must answer one query. A store that stops
answering, or whose disk fills, later is a fault of the machine (``errors.fault``: ``_server_down``,
``_store_full``), not a run's result.
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any, Dict, Mapping, Optional
from urllib.parse import urlsplit

from uwbench import atomic, env, errors
from uwbench.errors import UserError

env.apply()
warnings.filterwarnings("ignore", message=".*noload.*")  # SQLAlchemy 2.1 deprecation noise

import mlflow  # noqa: E402
from mlflow.entities import Metric, Param, RunTag  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

MAX_PARAM_LENGTH = 6000


def default_tracking_uri() -> str:
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{os.path.join(env.runs_dir(), 'mlflow.db')}"


class TrackingError(errors.UserError):
    """The MLflow store cannot be used; the message names it and says what to do."""


_READY_STORES = set()  # the stores this process has opened and checked (``resolve_uri``)
DAMAGED = ("database disk image is malformed", "file is not a database", "malformed database schema")
STORE_FIX = "point --tracking-uri at another store (a new sqlite:///PATH.db starts an empty one)"


def resolve_uri(uri: Optional[str]) -> str:
    """The tracking URI made absolute, its store opened and checked once per process (``_open_store``): a
    local sqlite store is created (or migrated) on first use, under a file lock, so that processes starting
    at once on a fresh file do not race on the schema; a server must answer."""
    uri = uri or default_tracking_uri()
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///") :]
        if path and not path.startswith("/"):  # make relative sqlite paths absolute (cwd-independent)
            path = os.path.abspath(path)
            uri = f"sqlite:///{path}"
    if uri not in _READY_STORES:
        _open_store(uri)
        _READY_STORES.add(uri)
    return uri


def _open_store(uri: str) -> None:
    """Check that the store at ``uri`` can be used, or raise a ``TrackingError`` that says why and what to do."""
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///") :]
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            _prepare_sqlite_store(uri, path)
        except Exception as exc:  # noqa: BLE001 - an OS error, MLflow's, SQLAlchemy's: all mean this file
            if isinstance(exc, OSError) and exc.errno in errors.FULL or "database or disk is full" in str(exc):
                raise errors.MachineFault(errors.disk_full(getattr(exc, "filename", None) or path)) from None
            raise TrackingError(f"cannot use the MLflow store {path}: {_reason(exc)}; {_sqlite_fix(exc, path)}") from None
        return
    if urlsplit(uri).scheme in ("http", "https"):
        _reach_server(uri)
        return
    if _database_server(uri) is not None:
        _reach_database(uri)
    try:
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    except Exception as exc:  # noqa: BLE001 - an unknown scheme, a store MLflow refuses
        raise TrackingError(f"cannot use the MLflow tracking URI {uri!r}: {_reason(exc)}; give --tracking-uri "
                            "sqlite:///PATH.db (a local file) or http://HOST:PORT (an `mlflow server`)") from None


def _reason(exc: BaseException) -> str:
    """The first line of an error's message (its cause's, for SQLAlchemy's wrapped driver errors)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return errors.first_sentence(str(getattr(exc, "orig", None) or exc)) or type(exc).__name__


# MLflow's schema migrations meeting what an earlier, stopped migration already made (SQLite runs each step
# outside a transaction, so a first command killed while creating a store leaves it half-made)
HALF_MADE = ("duplicate column name", "already exists")
OUT_OF_DATE = "out-of-date database schema"


def _sqlite_fix(exc: BaseException, path: str) -> str:
    text = str(exc)
    if any(d in text for d in DAMAGED):
        return f"the file is damaged or is not an MLflow database: restore it from a backup, or {STORE_FIX}"
    if any(h in text for h in HALF_MADE):
        runs = _count_runs(path)
        held = ("it holds no run, so nothing is lost by deleting it" if runs == 0 else
                f"it holds {runs} run(s): copy it aside first" if runs else "copy it aside first if it holds runs")
        return (f"its tables were left half-made (an earlier command was stopped while it created them); {held}: "
                f"delete {path} and run the command again, or {STORE_FIX}")
    if OUT_OF_DATE in text:
        return (f"the store was made by another MLflow version: copy it aside, then upgrade it with `mlflow db upgrade "
                f"sqlite:///{path}`, or {STORE_FIX}")
    return f"check that its folder exists and that this user may write there, or {STORE_FIX}"


def _count_runs(path: str) -> Optional[int]:
    """How many runs a (half-made) sqlite store holds, read without MLflow; None when it cannot be read."""
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return int(db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    except sqlite3.Error:
        return None


def _reach_server(uri: str) -> None:
    """Wait at most ``UWBENCH_CONNECT_TIMEOUT`` seconds for the server at ``uri`` to accept a connection (MLflow's
    own client retries for minutes, silently), saying so on stderr while it waits."""
    parts = urlsplit(uri)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    timeout = env.connect_timeout()
    print(f"connecting to the MLflow server {uri} (at most {timeout:g} s; {env.CONNECT_TIMEOUT_ENV} sets it)",
          file=sys.stderr, flush=True)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout).close()
    except OSError as exc:
        why = "no answer" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
        raise TrackingError(f"cannot reach the MLflow server {uri} ({why} within {timeout:g} s): start it "
                            "(`mlflow server --host 127.0.0.1 --port PORT`), fix --tracking-uri, or wait longer with "
                            f"{env.CONNECT_TIMEOUT_ENV}=SECONDS") from None


class _QuietFaults(logging.Filter):
    """Drops MLflow's own log record of a database error that is a fault of the machine (a full disk: its
    traceback, logged before the error is raised to us); the fault reaches the user as one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return exc is None or errors.fault(exc) is None


logging.getLogger("mlflow.store.db.utils").addFilter(_QuietFaults())

DB_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}  # the default port of each database server scheme


def _database_server(uri: str) -> Optional[tuple]:
    """(host, port) of a database-server URI (``postgresql+psycopg://user@host:port/db``), None for others or
    one that names no host (a local socket)."""
    parts = urlsplit(uri)
    kind = parts.scheme.split("+")[0]
    if kind not in DB_PORTS or not parts.hostname:
        return None
    try:
        return parts.hostname, parts.port or DB_PORTS[kind]
    except ValueError:  # a port that is not a number: MLflow's own error names it
        return None


def _reach_database(uri: str) -> None:
    """Like ``_reach_server`` for a database server: MLflow's own engine retries a refused connection for
    minutes, behind a warning per attempt."""
    host, port = _database_server(uri)
    timeout = env.connect_timeout()
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        why = "no answer" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
        password = urlsplit(uri).password
        shown = uri.replace(f":{password}@", ":***@") if password else uri
        raise TrackingError(f"cannot reach the database server of the MLflow store {shown} ({why} within "
                            f"{timeout:g} s at {host}:{port}): start it, fix --tracking-uri, or wait longer with "
                            f"{env.CONNECT_TIMEOUT_ENV}=SECONDS") from None


def _server_of(text: str) -> Optional[str]:
    """The server (scheme://host:port) an MLflow REST error names: "API request to URL failed ..."."""
    import re

    found = re.search(r"API request to (https?://[^/\s]+)", text)
    return found.group(1) if found else None


@errors.fault_kind
def _server_down(exc: BaseException) -> Optional[str]:
    """An MLflow tracking server that stopped answering (MLflow's client retried, then gave up)."""
    import requests

    text = str(exc)
    server = _server_of(text)
    lost = isinstance(exc, requests.exceptions.ConnectionError) or (
        server is not None and any(s in text for s in ("Max retries exceeded", "Connection refused",
                                                        "timeout exception", "Connection aborted",
                                                        "RemoteDisconnected")))
    if not lost:
        return None
    where = server or next((u for u in sorted(_READY_STORES) if urlsplit(u).scheme in ("http", "https")),
                           "the MLflow server")
    return (f"the MLflow server {where} does not answer: start it again (`mlflow server --host HOST --port PORT` "
            f"on the same store), {errors.AGAIN}")


@errors.fault_kind
def _store_full(exc: BaseException) -> Optional[str]:
    """SQLite's "database or disk is full" (the MLflow store's disk, or a server's): SQLite names no file."""
    text = str(exc)
    if "database or disk is full" not in text:
        return None
    server = _server_of(text)
    if server is not None:
        return f"the disk of the MLflow server {server} is full (its store cannot grow): free space there, {errors.AGAIN}"
    stores = sorted(u[len("sqlite:///") :] for u in _READY_STORES if u.startswith("sqlite:///"))
    return errors.disk_full(stores[0] if len(stores) == 1 else None)


# What SQLite says of a file it cannot use after it was opened, and the fix (``_store_condition``).
STORE_CONDITIONS = (
    (DAMAGED, "a database file is damaged", f"restore it from a backup, or {STORE_FIX}"),
    (("attempt to write a readonly database",), "a database file cannot be written",
     f"give this user write access to it and its folder, or {STORE_FIX}"),
)


@errors.known
def _store_condition(exc: BaseException) -> Optional[str]:
    """A store found damaged or read-only after it was opened (a page no earlier query read, the first
    write): SQLite's error names no file, so the message names the SQLite stores this process uses."""
    text = str(exc)
    for signs, what, fix in STORE_CONDITIONS:
        if any(s in text for s in signs):
            stores = sorted(u[len("sqlite:///") :] for u in _READY_STORES if u.startswith("sqlite:///"))
            where = f"; the MLflow store of this command is {', '.join(stores)}" if stores else ""
            return f"{what} ({errors.first_sentence(text)}){where}: {fix}"
    return None


def _prepare_sqlite_store(uri: str, path: str) -> None:
    """Create the schema of a local sqlite store while holding ``<db>.lock``. Two ``uwbench train`` runs
    started together on a fresh file otherwise fail with ``duplicate column name`` or ``table ... already
    exists`` from MLflow's migrations (docs/design.md §13.1)."""
    try:
        import fcntl
    except ImportError:  # no POSIX locks (Windows): create without the lock
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
        return
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not os.path.exists(path) or os.path.getsize(path) == 0:
                _copy_empty_store(path)
            MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _empty_store_template() -> Optional[str]:
    """An MLflow store with this MLflow's whole schema and no experiment, made once per user and MLflow
    version under ``env.user_cache_dir()`` (its migrations take about a second; a copy, milliseconds). It
    holds no "Default" experiment: MLflow adds that one when it opens a copy, with the copy's own artifact
    folder. None where it cannot be made (a cache that cannot be written, its disk full: the store is then
    migrated in place, as MLflow does, and a fault is reported for the store's own disk)."""
    template = os.path.join(env.user_cache_dir(), "mlflow-stores", f"empty-mlflow-{mlflow.__version__}.db")
    if os.path.exists(template):
        return template
    try:
        with atomic.replacing(template) as part:  # a process starting meanwhile sees no template or a whole one
            os.remove(part)  # MLflow migrates a file it creates itself
            try:
                MlflowClient(tracking_uri=f"sqlite:///{part}").search_experiments(max_results=1)
                _drop_default_experiment(part)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(part + "-journal")  # SQLite's, left only by a migration that failed
    except Exception:  # noqa: BLE001 - the template only saves time: any failure falls back to MLflow's own way
        return None
    return template


def _drop_default_experiment(path: str) -> None:
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("DELETE FROM experiments WHERE experiment_id = 0")


def _copy_empty_store(path: str) -> None:
    """A fresh store at ``path`` as a copy of the empty template; nothing where there is no template."""
    import shutil

    template = _empty_store_template()
    if template is not None:
        with atomic.replacing(path) as part:
            shutil.copyfile(template, part)


def _artifact_root(uri: str) -> Optional[str]:
    """Local artifact folder for a local sqlite store (beside the database); None for servers."""
    if uri.startswith("sqlite:///"):
        return os.path.join(os.path.dirname(uri[len("sqlite:///") :]), "artifacts")
    return None


def client(uri: Optional[str] = None) -> MlflowClient:
    return MlflowClient(tracking_uri=resolve_uri(uri))


def ensure_experiment(name: str, uri: Optional[str] = None) -> str:
    """Create (or find) the experiment and return its id. Call in the parent process before workers
    start: concurrent first-time creation of a SQLite store fails (docs/design.md §13.1). ``name`` becomes the
    artifact folder ``<store>/artifacts/<name>/``, so it must be one plain folder name
    (``uwbench.paths.folder_name``; ValueError otherwise, before anything is created)."""
    from uwbench.paths import folder_name

    folder_name(name, "experiment", "its runs' artifacts go to a folder of that name beside the MLflow store: "
                                    "give a plain name such as my_experiment")
    uri = resolve_uri(uri)
    c = MlflowClient(tracking_uri=uri)
    exp = c.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            c.restore_experiment(exp.experiment_id)
        return exp.experiment_id
    root = _artifact_root(uri)
    location = None
    if root:
        location = os.path.join(root, name)
        os.makedirs(location, exist_ok=True)
    try:
        return c.create_experiment(name, artifact_location=location)
    except mlflow.exceptions.MlflowException:  # created meanwhile by another process
        return c.get_experiment_by_name(name).experiment_id


@functools.lru_cache(maxsize=None)
def git_sha() -> str:
    """The short commit of uwbench's own repository ("unknown" outside one); once per process."""
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class Run:
    """One MLflow run, written through the client API. Use as a context manager or call ``end``.

    ``run_id`` re-opens an existing run (status RUNNING again; its experiment is the run's own unless
    ``experiment_id`` is given). ``system_metrics``: sample CPU, memory and GPU use into the run until
    ``end`` (also ``start_system_metrics()``)."""

    def __init__(self, experiment: str, run_name: Optional[str] = None, tags: Optional[Mapping[str, Any]] = None,
                 parent_run_id: Optional[str] = None, uri: Optional[str] = None,
                 experiment_id: Optional[str] = None, run_id: Optional[str] = None, system_metrics: bool = False):
        self.uri = resolve_uri(uri)
        self.client = MlflowClient(tracking_uri=self.uri)
        if run_id is not None:  # re-open an existing run (a parent run, an interrupted run to resume)
            try:
                existing = self.client.get_run(run_id)
            except mlflow.exceptions.MlflowException as exc:
                if errors.fault(exc) is not None:  # the store does not answer: not a missing run
                    raise
                raise UserError(f"no MLflow run {run_id!r} in {self.uri}: check the run id and --tracking-uri") \
                    from exc
            self.experiment_id = experiment_id or existing.info.experiment_id
            self.run_id = run_id
            self.client.update_run(run_id, status="RUNNING")
        else:
            self.experiment_id = experiment_id or ensure_experiment(experiment, self.uri)
            all_tags = {k: str(v) for k, v in (tags or {}).items()}
            if run_name:
                all_tags["mlflow.runName"] = run_name
            if parent_run_id:
                all_tags["mlflow.parentRunId"] = parent_run_id
            run = self.client.create_run(self.experiment_id, tags=all_tags, run_name=run_name)
            self.run_id = run.info.run_id
        self._ended = False
        self._logged: Optional[Dict[str, set]] = None  # (metric -> steps) already in MLflow, when skipping
        self._monitor = None
        if system_metrics:
            self.start_system_metrics()

    def skip_logged_metrics(self) -> None:
        """From now on ``log_metrics`` leaves out every (metric, step) point the run already holds (for a
        resumed run: no point twice). System metrics keep their own steps."""
        self._logged = {}
        keys = [k for k in self.client.get_run(self.run_id).data.metrics if not k.startswith(SYSTEM_PREFIX)]
        for key in keys:
            self._logged[key] = {int(m.step) for m in self.client.get_metric_history(self.run_id, key)}

    def start_system_metrics(self) -> None:
        """Sample CPU, memory, disk, network and (with nvidia-ml-py and a GPU) GPU use every
        ``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL`` seconds (default 10) into ``system/...`` metrics,
        until ``end``. Idempotent."""
        if self._monitor is None:
            self._monitor = SystemMetrics(self.run_id, self.uri)

    def log_provenance(self, artifact_dir: str = "provenance", repo_dir: Optional[str] = None) -> None:
        """The code, software and machine of this process (``provenance.collect``): tags, and the package
        list and uncommitted changes as artifacts under ``artifact_dir``."""
        from uwbench.tracking import provenance

        prov = provenance.collect(repo_dir)
        self.set_tags(prov.tags)
        for name, text in prov.files.items():
            self.log_text(text, f"{artifact_dir}/{name}")

    def log_params(self, params: Mapping[str, Any]) -> None:
        items = [Param(k, _param_value(v)) for k, v in params.items()]
        for i in range(0, len(items), 100):  # MLflow accepts at most 100 params per batch
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, int(step)) for k, v in metrics.items() if v is not None]
        if self._logged is not None:
            items = [m for m in items if m.step not in self._logged.get(m.key, ())]
            for m in items:
                self._logged.setdefault(m.key, set()).add(m.step)
        if items:
            self.client.log_batch(self.run_id, metrics=items)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def delete_tags(self, keys) -> None:
        """Remove the tags ``keys`` where the run has them."""
        present = self.client.get_run(self.run_id).data.tags
        for key in keys:
            if key in present:
                self.client.delete_tag(self.run_id, key)

    def log_text(self, text: str, path: str) -> None:
        self.client.log_text(self.run_id, text, path)

    def log_dict(self, data: Mapping[str, Any], path: str) -> None:
        self.client.log_dict(self.run_id, dict(data), path)

    def log_file(self, local_path: str, artifact_dir: Optional[str] = None) -> None:
        self.client.log_artifact(self.run_id, local_path, artifact_dir)

    def log_bytes(self, writer, filename: str, artifact_dir: Optional[str] = None) -> None:
        """``writer(path)`` writes a file; it is logged as ``artifact_dir/filename``."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, filename)
            writer(path)
            self.log_file(path, artifact_dir)

    @property
    def ended(self) -> bool:
        """Whether this object has ended the run (``end``)."""
        return self._ended

    def end(self, status: str = "FINISHED") -> None:
        if not self._ended:
            if self._monitor is not None:
                self._monitor.stop()
                self._monitor = None
            self.client.set_terminated(self.run_id, status=status)
            self._ended = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.end("FINISHED" if exc_type is None else "FAILED")
        return False


SYSTEM_PREFIX = "system/"  # MLflow's prefix of system metrics


class SystemMetrics:
    """MLflow's own system-metrics monitor (``mlflow.system_metrics``, psutil; GPUs through nvidia-ml-py)
    on an explicit run id. Its steps continue after those the run already has (a resumed run), and the
    samples taken since the last logged step are logged on ``stop``, so a run shorter than the sampling
    interval still gets one point. Without psutil it logs nothing and warns once."""

    def __init__(self, run_id: str, uri: str):
        self.monitor = None
        try:
            from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor
        except ImportError as exc:  # psutil missing
            warnings.warn(f"system metrics are off: {exc} (pip install psutil nvidia-ml-py)")
            return
        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)  # no start/stop lines per run
        self.monitor = SystemMetricsMonitor(run_id, resume_logging=True, tracking_uri=uri)
        self.monitor.start()

    def stop(self) -> None:
        if self.monitor is None:
            return
        self.monitor.finish()  # stops the sampler thread and logs what it aggregated
        try:
            pending = self.monitor.aggregate_metrics()
            if pending:
                self.monitor.publish_metrics(pending)
                self.monitor.mlflow_logger.flush()
        except Exception as exc:  # noqa: BLE001 - never fail a run over its system metrics
            warnings.warn(f"could not log the last system metrics: {type(exc).__name__}: {exc}")
        self.monitor = None


def _param_value(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    return text[:MAX_PARAM_LENGTH]


def search_runs(experiment_names, uri: Optional[str] = None, filter_string: str = ""):
    """Runs of the named experiments as a pandas DataFrame (``mlflow.search_runs``)."""
    uri = resolve_uri(uri)
    mlflow.set_tracking_uri(uri)
    return mlflow.search_runs(experiment_names=list(experiment_names), filter_string=filter_string,
                              max_results=100000)


def download_artifact(run_id: str, path: str, uri: Optional[str] = None, dst: Optional[str] = None) -> str:
    return MlflowClient(tracking_uri=resolve_uri(uri)).download_artifacts(run_id, path, dst)


def store_exists(uri: Optional[str] = None) -> bool:
    """False for a local sqlite store whose file does not exist yet (checked without creating it);
    True otherwise (a server is assumed to be there)."""
    uri = uri or default_tracking_uri()
    if uri.startswith("sqlite:///"):
        return os.path.exists(os.path.abspath(uri[len("sqlite:///") :]))
    return True


def experiment_exists(name: str, uri: Optional[str] = None) -> bool:
    """Whether an active experiment of that name exists (never creates the store or the experiment)."""
    if not store_exists(uri):
        return False
    exp = MlflowClient(tracking_uri=resolve_uri(uri)).get_experiment_by_name(name)
    return exp is not None and exp.lifecycle_stage != "deleted"


def metric_histories(run_ids, keys, uri: Optional[str] = None):
    """Every logged value of the metrics ``keys`` of the runs: a list of (run_id, key, step, value),
    for learning curves (``search_runs`` gives only the last value)."""
    c = MlflowClient(tracking_uri=resolve_uri(uri))
    out = []
    for run_id in run_ids:
        for key in keys:
            for m in c.get_metric_history(run_id, key):
                out.append((run_id, key, int(m.step), float(m.value)))
    return out


# ---- helpers for sweeps (uwbench.sweeps): find, inspect, end and delete runs by id ----


def run_record(run) -> Dict[str, Any]:
    """A plain dict of an MLflow run: run_id, status, name, tags, metrics, params, start_time."""
    return {
        "run_id": run.info.run_id,
        "status": run.info.status,
        "name": run.info.run_name,
        "tags": dict(run.data.tags),
        "metrics": dict(run.data.metrics),
        "params": dict(run.data.params),
        "start_time": run.info.start_time,
    }


def find_runs(experiment_id: str, filter_string: str = "", uri: Optional[str] = None,
              max_results: Optional[int] = None):
    """Active runs of one experiment matching ``filter_string`` (MLflow search syntax), as dicts; at most
    ``max_results`` of them when given."""
    c = MlflowClient(tracking_uri=resolve_uri(uri))
    out, token = [], None
    while True:
        page = c.search_runs([experiment_id], filter_string=filter_string, max_results=min(1000, max_results or 1000),
                             page_token=token)
        out.extend(run_record(r) for r in page)
        token = page.token
        if not token or (max_results is not None and len(out) >= max_results):
            return out[:max_results] if max_results is not None else out


def get_run(run_id: str, uri: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The run as a dict, or None if it does not exist or was deleted."""
    c = MlflowClient(tracking_uri=resolve_uri(uri))
    try:
        run = c.get_run(run_id)
    except mlflow.exceptions.MlflowException as exc:
        if errors.fault(exc) is not None:  # a store that does not answer: the run may well exist
            raise
        return None
    if run.info.lifecycle_stage == "deleted":
        return None
    return run_record(run)


def delete_run(run_id: str, uri: Optional[str] = None) -> None:
    """Soft-delete a run (hidden from searches; ``mlflow gc`` removes it for good)."""
    c = MlflowClient(tracking_uri=resolve_uri(uri))
    try:
        c.delete_run(run_id)
    except mlflow.exceptions.MlflowException:
        pass  # already gone
