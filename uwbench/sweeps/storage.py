"""Optuna storages: where the studies of a sweep live (both engines keep their Optuna studies there).

``journal:<path>`` (the default: ``runs/optuna/<study>.journal``; a file on a disk every machine of the
sweep can write is the shared-file option) or an RDB URL (``sqlite:///...``, ``postgresql+psycopg://...``).
RDB storages get Optuna's heartbeat (``heartbeat_interval``, ``grace_period``) and a stale-trial callback
when asked for one.
"""
from __future__ import annotations

import os
from typing import Callable, Optional

from uwbench.spec import Plan
from uwbench.sweeps.common import SweepError


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
                 stale_callback: Optional[Callable] = None):
    """The storage object every study of this process shares (for an RDB, Optuna's cached wrapper: the
    studies and our trial claims go through the same instance)."""
    import optuna
    from optuna.storages import JournalStorage, RDBStorage, get_storage
    from optuna.storages.journal import JournalFileBackend

    if is_journal(url):
        path = url[len("journal:"):]
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return JournalStorage(JournalFileBackend(path))
    kwargs = {}
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
        # several worker processes write: wait for the file lock instead of failing
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 120}}
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
        raise SweepError(f"storage {url!r} needs a database driver that is not installed: {exc}{hint}") from None
    except optuna.exceptions.StorageInternalError as exc:
        raise SweepError(f"cannot open the Optuna storage {url!r}: {exc}") from None


def study_name(plan: Plan, cell_id: str, phase: str) -> str:
    return f"{plan.id}.{plan.profile}.{plan.spec_hash}.{cell_id}.{phase}"
