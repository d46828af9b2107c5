"""Optuna storages: where the studies of a sweep live (both engines keep their Optuna studies there).

``journal:<path>`` (the default: ``runs/optuna/<study>.journal``; a file on a disk every machine of the
sweep can write is the shared-file option) or an RDB URL (``sqlite:///...``, ``postgresql+psycopg://...``).
RDB storages get Optuna's heartbeat (``heartbeat_interval``, ``grace_period``) and a stale-trial callback
when asked for one.

Damaged storages. A journal is a file of JSON records, one per line, appended under Optuna's lock file. A
process killed (or a disk filled) during an append can leave the last line incomplete; anything appended
after it would be glued to it and make every later read fail. So before a journal is opened for writing,
an incomplete last line is cut off under that lock (``repair_journal``: a copy of the file as it was is kept
beside it, ``<journal>.torn-<n>``, and one line says so); a record damaged anywhere else is an error naming
the file, the line and what to do (``check_journal``). A storage that cannot be opened (an unknown scheme, a
database server that does not answer within ``UWBENCH_CONNECT_TIMEOUT`` seconds, a damaged SQLite file) is a
one-line ``SweepError`` naming it, its password hidden.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Callable, Optional

from uwbench import errors
from uwbench.spec import Plan
from uwbench.sweeps.common import SweepError

TORN_SUFFIX = ".torn-"  # <journal>.torn-<n>: the file as it was before its incomplete last line was cut off


class JournalDamaged(SweepError):
    """A journal record other than the last cannot be read: Optuna cannot replay the file past it."""


def storage_url(plan: Plan, storage: Optional[str]) -> str:
    """``journal:<absolute path>`` or the RDB URL as given."""
    from uwbench.env import runs_dir

    if storage is None:
        return "journal:" + os.path.join(runs_dir(), "optuna", f"{plan.id}.journal")
    if "://" in storage:
        return storage
    return "journal:" + os.path.abspath(storage[len("journal:"):] if storage.startswith("journal:") else storage)


def is_journal(url: str) -> bool:
    return url.startswith("journal:")


def make_storage(url: str, heartbeat_interval: Optional[int] = None, grace_period: Optional[int] = None,
                 stale_callback: Optional[Callable] = None, repair: bool = True, log: Callable[[str], None] = print):
    """The storage object every study of this process shares (for an RDB, Optuna's cached wrapper: the
    studies and our trial claims go through the same instance). A journal is repaired first (``repair``:
    for a process that will write to it) and checked (``check_journal``)."""
    import optuna
    from optuna.storages import JournalStorage, RDBStorage, get_storage
    from optuna.storages.journal import JournalFileBackend

    if is_journal(url):
        path = url[len("journal:"):]
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            if repair:
                repair_journal(path, log)
            check_journal(path)
            return JournalStorage(JournalFileBackend(path))
        except OSError as exc:
            if exc.errno in errors.FULL:  # a fault of the machine, not a wrong path
                raise errors.MachineFault(errors.disk_full(exc.filename or path)) from None
            raise SweepError(f"cannot open the Optuna journal {path}: {exc.strerror or exc}; give --storage a "
                             "path in a folder this user can write") from None
    kwargs = {}
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
        except OSError as exc:
            raise SweepError(f"cannot create the folder of the Optuna storage {url!r}: {exc.strerror or exc}") from None
        # several worker processes write: wait for the file lock instead of failing
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 120}}
    elif url.startswith("postgresql"):  # an unreachable server: an error after the timeout, not a hang
        from uwbench.env import connect_timeout

        kwargs["engine_kwargs"] = {"connect_args": {"connect_timeout": max(1, round(connect_timeout()))}}
    if heartbeat_interval is not None:
        kwargs.update(heartbeat_interval=int(heartbeat_interval),
                      grace_period=int(grace_period or 2 * heartbeat_interval),
                      heartbeat_stale_trial_callback=stale_callback)
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return get_storage(RDBStorage(url, **kwargs))
    except (ImportError, ModuleNotFoundError) as exc:
        hint = " (PostgreSQL: pip install 'psycopg[binary]', URL postgresql+psycopg://...)" if "postgres" in url else ""
        raise SweepError(f"storage {shown(url)!r} needs a database driver that is not installed: {exc}{hint}") from None
    except optuna.exceptions.StorageInternalError as exc:
        raise SweepError(f"cannot open the Optuna storage {shown(url)!r}: {first_line(exc)}") from None
    except Exception as exc:  # SQLAlchemy's: an unknown scheme, a server that does not answer, a damaged file
        if not type(exc).__module__.startswith("sqlalchemy"):
            raise
        reason = first_line(getattr(exc, "orig", None) or exc)
        raise SweepError(f"cannot open the Optuna storage {shown(url)!r}: {reason}; {_rdb_fix(exc, url)}") from None


def _rdb_fix(exc: Exception, url: str) -> str:
    """What to do about an RDB storage SQLAlchemy could not open, by the kind of its error."""
    kind = type(exc).__name__
    if kind in ("NoSuchModuleError", "ArgumentError"):
        return "--storage takes a journal file path, sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB"
    if kind == "OperationalError" and url.startswith("sqlite"):
        return "check that the file's folder exists and that this user may write there"
    if kind == "OperationalError":
        return ("check that the database server runs and that the URL's host, port, user and database are right "
                "(UWBENCH_CONNECT_TIMEOUT sets the seconds a connection may take)")
    return "the file is not an Optuna database, or it is damaged: restore it from a backup or give a new --storage"


def shown(url: str) -> str:
    """The URL as it may be printed: a password replaced by ***."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy parses: nothing to hide in it
        return url


def first_line(exc: object) -> str:
    from uwbench.errors import first_line as first

    return first(str(exc))


def repair_journal(path: str, log: Callable[[str], None] = print) -> Optional[str]:
    """Cut off an incomplete last line of the journal at ``path`` (what a process killed during an append
    leaves), under the journal's own lock file, so nothing is appended to it. The file as it was is copied
    to ``<path>.torn-<n>`` first and one line is logged. Returns the copy's path, or None when the file
    ends with a complete line (or is empty or missing)."""
    from optuna.storages.journal import JournalFileSymlinkLock
    from optuna.storages.journal._file import get_lock_file

    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    with get_lock_file(JournalFileSymlinkLock(path)):  # the lock Optuna's appends take
        with open(path, "rb+") as f:
            data = f.read()
            if data.endswith(b"\n"):
                return None
            cut = data.rfind(b"\n") + 1  # 0 when the only line is the torn one
            copy = _free_name(path + TORN_SUFFIX)
            shutil.copyfile(path, copy)
            f.truncate(cut)
            f.flush()
            os.fsync(f.fileno())
    line = data.count(b"\n", 0, cut) + 1
    log(f"{path}: line {line}, the last record, was incomplete ({len(data) - cut} bytes, what a process killed "
        f"while writing leaves); cut it off before appending (the file as it was: {copy})")
    return copy


def _free_name(prefix: str) -> str:
    n = 1
    while os.path.exists(f"{prefix}{n}"):
        n += 1
    return f"{prefix}{n}"


def check_journal(path: str) -> None:
    """Every complete line of the journal is a JSON record; otherwise ``JournalDamaged`` names the file, the
    line and the ways out. (An incomplete last line is left to ``repair_journal``: a reader skips it.)"""
    if not os.path.exists(path):
        return
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    complete = lines[:-1]  # what follows the last newline is a line still being written, or nothing
    for number, line in enumerate(complete, start=1):
        try:
            json.loads(line)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise JournalDamaged(
                f"the Optuna journal {path} is damaged at line {number} of {len(complete)} ({first_line(exc)}), so "
                f"no record after it can be read. Restore the file from a backup; or keep only the lines before it "
                f"(`head -n {number - 1} {path} > {path}.kept && mv {path}.kept {path}`: what the later "
                "lines recorded is forgotten and planned again); or start the study's record afresh with a new "
                "--storage") from None


def study_name(plan: Plan, cell_id: str, phase: str) -> str:
    return f"{plan.id}.{plan.profile}.{plan.spec_hash}.{cell_id}.{phase}"
