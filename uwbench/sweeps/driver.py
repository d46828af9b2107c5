"""The sweep frame both engines share: lock, tracking set-up, plan, resume, progress and summary.

``sweep(plan, backend, ...)`` does, for any backend:

1. takes this machine's study lock (``locks.study_lock``: one sweep of a study and profile per machine;
   it guards per-machine things only: this machine's workers and its interrupted runs);
2. creates (or finds) the MLflow experiment and one parent run per cell (``common.setup_tracking``);
3. opens the engine, lets it recover what *this machine* left unfinished, and reads what is recorded;
4. runs the engine until every planned run has ended, redrawing the progress line on each ``tick``;
5. writes each cell's summary to its parent run and prints the summary table.

What is planned is decided once for both engines, in ``sweeps/planning.py`` (seeds, TPE, final runs,
pruning, run counts, GPUs per worker, ``Options``, ``Context``); the backends import it, never this frame.

The backend protocol (``uwbench.sweeps.backends``; a backend holds only what is specific to its engine)::

    class Backend:
        name: str                                  # the ``backend`` tag of every run
        def __init__(self, plan, options): ...     # options: ``Options``; check them here (before the lock)
        def open(self, ctx) -> str: ...            # set up the engine's state; returns where it lives
        def recover(self) -> int: ...              # resolve runs this machine left unfinished; how many
        def records(self) -> (records, running): ...  # ended runs (``common.Record``), runs under way
        def recorded_in(self) -> Optional[str]: ...  # the MLflow store its state says the runs went to
        def run(self, tick) -> None: ...           # run until ``tick()`` returns True (study complete)
        def close(self) -> None: ...               # release engine resources (always called)

``records`` counts the runs of every machine sharing the study, so the study is complete (and each
machine's sweep ends) only when the last planned run anywhere has ended.

No cell run is left RUNNING: once they exist, a sweep that stops for any reason ends them (``_end_cells``):
interrupted, the cells not complete are KILLED (re-run the command to resume); failed, they are FAILED
with the error as a tag; stopped by a fault of the machine (``errors.fault``: a full disk, a store that does
not answer), KILLED with the fault as the tag, its runs left unfinished for the same command to run (a
store the fault keeps from being written is put right by that next sweep). A sweep whose every run failed
(their own failures) ends with that as its error (``EveryRunFailed``), also when there is nothing left to do. An engine whose state records ended runs that the MLflow store does not hold (a
new ``--tracking-uri`` with the default storage) is an error that says which store to point at, or how to
run the study again (``_unrecorded``).
"""
from __future__ import annotations

import contextlib
import os
from typing import Dict, List, Optional, Tuple

from uwbench import env, native
from uwbench.spec import Plan
from uwbench.sweeps import common, display, locks
from uwbench.sweeps.backends import BACKENDS
from uwbench.sweeps.planning import CHECKPOINT_DIR_ENV, Context, Options, complete, finished_cells, planned_total

# ---------------------------------------------------------------------------------------------
# The frame
# ---------------------------------------------------------------------------------------------


def _counts(records: List[common.Record]) -> Dict[str, int]:
    return {s: sum(r.status == s for r in records) for s in common.TERMINAL}


class StoresDisagree(common.SweepError):
    """The engine's storage records ended runs of the study; the MLflow store holds none of them."""


def _unrecorded(plan: Plan, engine, experiment_id: str, uri: str, records: List[common.Record],
                where: str) -> Optional[str]:
    """What to do when the engine's state holds ended runs and the MLflow store none of this run set (None
    when they agree): their report would be empty, and a resumed sweep would add runs the store has no
    history for."""
    from uwbench.tracking.mlflow import find_runs

    trained = [r for r in records if r.status in ("finished", "pruned")]  # a failed one may have no run at all
    if not trained or find_runs(experiment_id, common.children_filter(plan, engine.name), uri, max_results=1):
        return None
    recorded = engine.recorded_in()
    there = f" ({recorded})" if recorded and recorded != uri else ""
    return (f"{where} records {len(trained)} trained run(s) of study {plan.id} (profile {plan.profile}, spec hash "
            f"{plan.spec_hash}) but the MLflow store {uri} holds none of them. Point --tracking-uri at the store "
            f"the sweep recorded them in{there}; or, to run the study again into this store, give a new Optuna "
            "storage (--storage PATH.journal)")


def _end_cells(exc: BaseException, plan: Plan, engine, experiment_id: str, cell_runs, uri: str) -> None:
    """End the cell runs of a sweep stopped by ``exc``: with their summary where the engine can still be read
    (the complete cells FINISHED, the others KILLED when interrupted, FAILED with the error otherwise), all
    FAILED with the error where it cannot or where the stores disagree."""
    from uwbench.errors import fault, one_line

    error = None if isinstance(exc, KeyboardInterrupt) else one_line(exc)[0]
    faulted = error is not None and fault(exc) is not None
    try:
        records = None if isinstance(exc, StoresDisagree) else engine.records()[0]
    except Exception:  # noqa: BLE001 - the engine's state is unreadable: no summary to write
        records = None
    if records is not None:
        try:
            common.close_cell_runs(plan, experiment_id, cell_runs, records, uri, finished_cells(plan, records),
                                   error=error, fault=faulted)
            return
        except Exception:  # noqa: BLE001 - the store took part of it (a fault): end the rest without a summary
            pass
    common.fail_cell_runs(cell_runs, uri, error or "interrupted", "KILLED" if faulted else "FAILED")


def machine_load() -> Tuple[int, float]:
    """The cores this process may use and the machine's 1-minute load average (0 where unknown)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    return cores, load


def crowding_note(workers: Optional[int], cores: int, load: float) -> Optional[str]:
    """What to say when this sweep's local workers (``workers``; 0 trains in this process, None: not a local
    pool) and what already runs (``load``) are more than the ``cores``: their runs will share cores, which
    costs CPU time too, so a report leaves their times out (``uwbench.report.analysis.cores``). None when
    they fit, with a core of slack: the load average counts this process, busy starting up."""
    if workers is None:
        return None
    training = max(1, workers)
    if training + load <= cores + 1.0:
        return None
    return (f"note: {training} training process(es) on {cores} core(s) with a load average of {load:.1f} "
            "already: runs that share a core spend more CPU time per update, so a report leaves their times "
            "out of time comparisons (docs/speed.md, \"Timing on a shared machine\"); accuracy is unaffected")


class EveryRunFailed(common.SweepError):
    """The sweep ended and every one of its runs failed: its own failures (a fault would have stopped it)."""


def _every_run_failed(records: List[common.Record]) -> Optional[str]:
    """What to say when every recorded run failed (None otherwise): the first error and how to run them again
    (they are recorded results, so the same command would not)."""
    if not records or any(r.status != "failed" for r in records):
        return None
    first = next((r.error for r in records if r.error), "no error recorded")
    return (f"every one of the {len(records)} runs failed (the first: {first.splitlines()[0][:300]}); fix what "
            "their `error` tags say, then sweep into a new Optuna storage (--storage PATH.journal) to run them again")


def sweep(plan: Plan, backend: str = "optuna", uri: Optional[str] = None, experiment: Optional[str] = None,
          progress: bool = True, out=print, options: Optional[Options] = None) -> int:
    """Run (or resume, or join) ``plan`` with ``backend``; returns 0 once every planned run has ended
    (finished, failed or pruned), on whichever machine."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    options = options or Options()
    settings = {}
    if options.checkpoint_dir:  # read by the trainer in every worker and Ray trial (inherited / runtime env)
        settings[CHECKPOINT_DIR_ENV] = os.path.abspath(options.checkpoint_dir)
    if not options.system_metrics:  # read by the trainer in every worker and Ray trial, like the folder above
        settings[env.SYSTEM_METRICS_ENV] = "0"
    # `kill PID` stops the sweep as Ctrl-C does, also where SIGINT is ignored (a sweep started in the background)
    with common.terminate_as_interrupt(), _environ(settings):  # for this sweep only: a later one starts clean
        return _sweep(plan, backend, uri, experiment, progress, out, options)


@contextlib.contextmanager
def _environ(settings: Dict[str, str]):
    """Set these environment variables for the block, then put back what was there."""
    before = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _sweep(plan: Plan, backend: str, uri: Optional[str], experiment: Optional[str], progress: bool, out,
           options: Options) -> int:
    engine = BACKENDS.get(backend)(plan, options)
    with locks.study_lock(plan) as lock_path:
        uri, experiment_id, cell_runs = common.setup_tracking(plan, uri, experiment, backend)
        ctx = Context(plan=plan, backend=backend, uri=uri, experiment_id=experiment_id, cell_runs=cell_runs,
                      lock_path=lock_path)
        try:
            where = engine.open(ctx)
            recovered = engine.recover()
            records, _ = engine.records()
            planned = planned_total(plan, records)
            out(f"study {plan.id} (profile {plan.profile}, {plan.mode}, spec hash {plan.spec_hash}): "
                f"{len(plan.cells)} cells, {planned} runs planned, {len(records)} recorded"
                + (f", {recovered} interrupted run(s) recovered" if recovered else ""))
            out(f"  MLflow {uri} (experiment {experiment or plan.id!r}); {where}")
            crowded = crowding_note(getattr(engine, "workers", None), *machine_load())
            if crowded and not complete(plan, records):
                out(crowded)
            disagree = _unrecorded(plan, engine, experiment_id, uri, records, where)
            if disagree and complete(plan, records):
                raise StoresDisagree(disagree)
            if disagree:
                out(f"note: {disagree}")
            if complete(plan, records):
                out("nothing to do: every planned run is recorded")
                out(display.summary(plan, records))
                if _every_run_failed(records):
                    raise EveryRunFailed(_every_run_failed(records))
                return 0
            common.mark_running(cell_runs, uri)
            native.prebuild()  # the C++ kernels, once, before the workers start (they share the build)
            bar = display.Progress(planned, plan.id, enabled=progress, initial=len(records))

            def tick() -> bool:
                recs, running = engine.records()
                c = _counts(recs)
                bar.update(c["finished"], c["pruned"], c["failed"], running, display.describe_best(plan, recs),
                           total=planned_total(plan, recs))
                return complete(plan, recs)

            try:
                engine.run(tick)
            finally:
                bar.close()
            records, _ = engine.records()
        except BaseException as exc:
            _end_cells(exc, plan, engine, experiment_id, cell_runs, uri)
            if isinstance(exc, KeyboardInterrupt):
                try:
                    records, _ = engine.records()
                    out(f"interrupted: {len(records)} of {planned_total(plan, records)} runs recorded; re-run the "
                        "same command to resume")
                except Exception:  # noqa: BLE001 - the engine's state is unreadable
                    out("interrupted; re-run the same command to resume")
            raise
        finally:
            engine.close()
        common.close_cell_runs(plan, experiment_id, cell_runs, records, uri, finished_cells(plan, records))
        for line in display.failures(records):
            out(line)
        for cell in plan.cells:
            rows = [r for r in records if r.cell == cell.id]
            if plan.mode == "tuned" and common.best_record(rows, plan.objective.direction) is None:
                out(f"cell {cell.id}: no search trial finished, so no final runs (see the failed runs' `error` tag)")
        out(display.summary(plan, records))
        if _every_run_failed(records):
            raise EveryRunFailed(_every_run_failed(records))
        return 0
