"""One sweep of a study at a time per machine (docs/design.md §7.1): the study lock the sweep holds
(``<runs>/locks/<study>.<profile>.lock``) and the shared lock each of its workers holds, so a new sweep
also waits for orphaned workers of a killed one."""
from __future__ import annotations

import contextlib
import os
import socket

from uwbench.spec import Plan
from uwbench.sweeps.common import SweepError


def locks_dir() -> str:
    from uwbench.env import runs_dir

    path = os.path.join(runs_dir(), "locks")
    os.makedirs(path, exist_ok=True)
    return path


@contextlib.contextmanager
def study_lock(plan: Plan):
    """Hold the study's lock for the whole sweep: a second ``uwbench sweep`` of the same study and
    profile on this machine fails at once, and stale RUNNING trials can safely be treated as
    interrupted. Worker processes hold a shared lock on a second file, so a new sweep also waits for
    orphaned workers of a killed one."""
    import fcntl

    path = os.path.join(locks_dir(), f"{plan.id}.{plan.profile}.lock")
    fh = open(path, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        owner = fh.read().strip() or "unknown"
        fh.close()
        raise SweepError(f"another `uwbench sweep` of study {plan.id!r} (profile {plan.profile}) is running "
                         f"({owner}); wait for it to end, or stop it (lock file {path})") from None
    wfh = open(path + ".workers", "a+")
    try:
        fcntl.flock(wfh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(wfh, fcntl.LOCK_UN)
    except OSError:
        wfh.close()
        fh.close()
        raise SweepError(f"workers of an earlier sweep of {plan.id!r} (profile {plan.profile}) are still running "
                         "(its parent was killed); they stop at their next evaluation; try again shortly") from None
    wfh.close()
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    fh.flush()
    try:
        yield path
    finally:
        fh.close()


def hold_worker_lock(lock_path: str):
    """In a worker: a shared lock that tells a later sweep this worker is still alive."""
    import fcntl

    fh = open(lock_path + ".workers", "a+")
    fcntl.flock(fh, fcntl.LOCK_SH)
    return fh
