"""How the Optuna engine starts its worker processes: forked from a warm server, not spawned cold.

A spawned worker is a new interpreter that imports torch, MLflow (with its SQLAlchemy store), Optuna and
torch's compiler front end (which the first optimizer step imports) before its first update: seconds of
every worker, paid after the sweep's parent has done its own set-up, so a short sweep's cores sit idle for
both in turn. Where the platform has it, workers come instead from multiprocessing's ``forkserver``: one
server process, started as the sweep command begins (``warm_up``), imports those libraries while the parent
reads the study and creates its runs, and each worker is a fork of it, ready at once; a worker that dies is
replaced as quickly.

A fork takes the server's environment, not the parent's as it is when the worker starts, so each worker is
handed the parent's environment and applies it before anything else (``worker_entry``); multiprocessing
itself hands over the working folder and ``sys.path``. The server only imports: it runs no torch operation
and initialises no GPU (CUDA is initialised in the worker, after ``CUDA_VISIBLE_DEVICES`` is set), and the
one Python thread it has is its main thread. Two native threads start at import, one of torch's and the
background thread of the memory allocator MLflow's dependencies load (jemalloc); both libraries reset
their state in a forked child, as they must for torch's own forkserver data loaders. Elsewhere (no
``forkserver``, as on Windows) workers are spawned.
"""
from __future__ import annotations

import multiprocessing
import os
from typing import Dict

# What every worker imports before it trains, imported once by the fork server.
PRELOAD = ("torch", "torch._dynamo", "optuna", "mlflow", "mlflow.store.tracking.sqlalchemy_store")


def context():
    """The multiprocessing context the workers start from."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def warm_up() -> None:
    """Start the fork server now, so that its imports overlap the parent's set-up (nothing where workers
    are spawned). Called once by a sweep command that may start workers; later calls do nothing."""
    from uwbench import env

    env.apply()  # the server (and so each worker before it applies the parent's environment) has uwbench's defaults
    if context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def worker_entry(environ: Dict[str, str], target, *args) -> None:
    """A worker's first step: the parent's environment, as it was when the worker was started, then its work."""
    os.environ.clear()
    os.environ.update(environ)
    target(*args)
