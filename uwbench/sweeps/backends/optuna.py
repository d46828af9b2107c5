"""The Optuna engine: worker processes on any number of machines sharing one Optuna storage.

Per cell there is one Optuna study per phase: ``search`` (tuned mode: TPE, with median or successive-
halving pruning through the trainer's ``report`` callback) and ``final`` (the best search trial's params
on each final seed; in faithful mode, every grid point x seed).

Planning. Every process that runs the sweep *enqueues* what is planned and not yet in the storage, each
trial tagged with its ``job_key`` (a search trial by its index, a final run by its params and seed).
Workers pop WAITING trials (the WAITING -> RUNNING transition is atomic in the journal and in RDB
storages), so a trial runs once. Two machines planning at the same moment may enqueue the same job
twice; the trial with the lower number is the one that runs, and the worker that pops the other
records it as a ``duplicate`` (never counted, never run).

Liveness. A worker keeps a heartbeat for the trial it runs: Optuna's own for RDB storages
(``heartbeat_interval``, ``grace_period``, ``fail_stale_trials``), and for the journal file a timestamp
in the trial's user attrs refreshed by a thread (machines' clocks must agree to well within the grace
period, as NTP keeps them). Every sweep process looks for trials whose heartbeat is older than the
grace period and fails them; the one process whose FAIL lands first enqueues a retry with the same
params and user attrs (Optuna's ``RetryHeartbeatStaleTrialCallback``), so the retry exists once. The
per-machine lock lets a sweep recover at once what *its own machine* left RUNNING (a killed sweep on this machine,
a dead worker of its own), without waiting for the grace period; a live trial of another machine is
never touched. A sweep process that was itself frozen (SIGSTOP, a suspended machine) judges no heartbeat
for two intervals after it wakes, so its own workers, frozen with it, keep their trials (``judging_heartbeats``).

Resuming a trial. A retry inherits the MLflow run id of the trial it replaces (user attr
``mlflow_run_id``): a run that had ended before its worker died is told from what MLflow holds, not
re-run; otherwise the same run is re-opened and the trainer continues it from its checkpoint in the
checkpoint folder (``--checkpoint-dir``; on a disk every machine reads for multi-machine sweeps). A
trial interrupted more than ``max_retries`` times is recorded as failed.

Faults. A trial stopped by a fault of the machine (``errors.fault``: a full disk, a store that does not
answer) is put back to WAITING (``TrialRunner.requeue``; the trials of this machine's other workers, stopped
with it, too: ``Studies.requeue_local``), so no retry is spent on it and no outcome recorded; a worker that
meets one hands its line to the sweep through a queue and ends, and the sweep stops on it. A stop the user
asks for (Ctrl-C, SIGTERM) puts this machine's running trials back to WAITING the same way: stopping and
resuming a sweep spends no retry.

Populations. A worker that claims a WAITING trial also claims the other WAITING trials of its cell and
phase that can train with it (final trials that differ only in seed, learning rate and clip; search
trials when the search varies only the learning rate and clip, ``planning.member_only_search``), up to
the population size (``--population`` or the study's ``population``: ``auto`` is ``AUTO_SIZE`` of the
device), each with its own heartbeat, and trains them as one population (``common.execute_population``):
each member is its solo run, with its own MLflow run, outcome and retry. A search trial's params are
sampled when it is claimed, by TPE with ``constant_liar`` (the cell's running trials count at the worst
value). Slots are continuous: a member that ends is told at once and the next WAITING trial of the cell
and phase takes its slot, until none waits or the sweep stops.

GPUs. ``--workers N`` on a machine with G GPUs gives worker i GPU ``i mod G`` through
``CUDA_VISIBLE_DEVICES`` (``planning.worker_devices``).

Modules: this one (the engine: options, opening the studies, supervising the workers), ``optuna_studies``
(the record and the planning of trials), ``optuna_worker`` (claiming and running trials),
``optuna_heartbeat`` and ``worker_processes`` (how the worker processes start: forked from a warm server).
"""
from __future__ import annotations

import os
import signal
import socket
import time
from typing import Dict, Optional

from uwbench import errors
from uwbench.spec import Plan
from uwbench.sweeps import common, planning
from uwbench.sweeps.backends.optuna_studies import Settings, Studies, open_storage
from uwbench.sweeps.backends import worker_processes
from uwbench.sweeps.backends.optuna_worker import POLL_S, TrialRunner, say, worker_main
from uwbench.sweeps.storage import make_storage, storage_url


class Backend:
    name = "optuna"

    def __init__(self, plan: Plan, options: planning.Options):
        self.plan, self.options = plan, options
        workers = 1 if options.workers is None else options.workers
        if workers < 0:
            raise common.SweepError(f"`--workers >= 0` must hold, got {workers}")
        if options.ray_address:
            raise common.SweepError("--ray-address is for --backend ray; the optuna backend runs its workers on this "
                                    "machine (start `uwbench sweep` on each machine to add it)")
        if options.heartbeat_interval < 1 or options.grace_period <= options.heartbeat_interval:
            raise common.SweepError(f"--heartbeat-interval must be >= 1 and --grace-period above it, got "
                                    f"{options.heartbeat_interval} and {options.grace_period}")
        self.workers = workers
        self.devices = planning.worker_devices(max(1, workers), planning.gpu_ids(), options.gpus_per_trial)
        self.studies: Optional[Studies] = None
        make_storage(storage_url(plan, options.storage))  # refused, or a torn journal repaired, before any run exists

    note = staticmethod(say)

    def open(self, ctx: planning.Context) -> str:
        url = storage_url(self.plan, self.options.storage)
        self.settings = Settings(ctx=ctx, storage=url, heartbeat_interval=self.options.heartbeat_interval,
                                 grace_period=self.options.grace_period, max_retries=self.options.max_retries,
                                 devices=self.devices,
                                 population=planning.population_setting(self.plan, self.options))
        storage, retry = open_storage(self.settings, self.note)
        self.studies = Studies(self.settings, storage, retry, create=True)
        return f"Optuna {url}"

    def recover(self) -> int:
        return self.studies.recover_local()

    def records(self):
        return self.studies.records()

    def recorded_in(self) -> Optional[str]:
        return self.studies.recorded_in()

    def _housekeeping(self, state: Dict[str, float]) -> None:
        self.studies.enqueue()
        now = time.time()
        if not judging_heartbeats(state, now, self.settings.heartbeat_interval, self.settings.grace_period):
            return
        if now - state.get("stale", 0.0) >= max(1.0, self.settings.heartbeat_interval / 2):
            state["stale"] = now
            self.studies.fail_stale()

    def run(self, tick) -> None:
        state: Dict[str, float] = {}
        if self.workers == 0:
            self._run_inline(tick, state)
        else:
            self._run_workers(tick, state)

    def _run_inline(self, tick, state) -> None:
        common.worker_setup()
        if self.devices[0] is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = self.devices[0]
        runner = TrialRunner(self.settings, f"{socket.gethostname()}:{os.getpid()}", note=self.note)
        try:
            while True:
                self._housekeeping(state)
                if tick():
                    return
                if not runner.run_one():
                    time.sleep(POLL_S)
        except KeyboardInterrupt:
            self.studies.requeue_local()  # as for workers: a stop asked for spends no retry
            raise

    def _run_workers(self, tick, state) -> None:
        ctx = worker_processes.context()
        restarts = 0
        max_restarts = 2 * self.workers + 3
        stop = ctx.Event()
        faults = ctx.Queue()  # a worker's fault of the machine (its one line): the sweep stops on it

        def start(i: int):
            environ = dict(os.environ)
            if self.devices[i] is not None:  # only its GPU(s) are visible to it
                environ["CUDA_VISIBLE_DEVICES"] = self.devices[i]
            p = ctx.Process(target=worker_processes.worker_entry,
                            args=(environ, worker_main, self.settings, stop, i, faults),
                            name=f"uwbench-worker-{i}", daemon=False)
            p.start()
            return p

        procs = [start(i) for i in range(self.workers)]
        try:
            while True:
                self._housekeeping(state)
                if tick():
                    return
                for i, p in enumerate(procs):
                    _raise_fault(faults)
                    if p.exitcode is None:
                        continue
                    restarts += 1
                    if restarts > max_restarts:
                        raise errors.MachineFault(f"workers keep dying ({p.name} {died(p.exitcode)}); gave up after "
                                                  f"{max_restarts} restarts: fix that, {errors.AGAIN}")
                    n = self.studies.recover_local(worker=f"{socket.gethostname()}:{p.pid}")
                    self.note(f"worker died: {p.name} (pid {p.pid}) {died(p.exitcode)}; {n} interrupted run(s) "
                              "to resume; starting a new worker")
                    procs[i] = start(i)
                time.sleep(POLL_S)
        except BaseException as exc:
            stop.set()
            for p in procs:  # Ctrl-C reached them too (same process group); make sure, with the signal a worker
                if p.is_alive():  # always takes as an interrupt (SIGINT is ignored in a background sweep)
                    try:
                        os.kill(p.pid, signal.SIGTERM)
                    except OSError:
                        pass
            for p in procs:
                p.join(timeout=60)
                if p.is_alive():
                    p.kill()
                    p.join()
            if self.studies is not None and (errors.fault(exc) is not None or isinstance(exc, KeyboardInterrupt)):
                # their runs were cut short by the fault, or by the stop the user asked for: they wait to be run
                # again (the same MLflow runs, from their checkpoints), and no retry is spent on them
                self.studies.requeue_local()
            if self.studies is not None:
                self.studies.recover_local()  # none of our workers is alive any more
            raise
        finally:
            stop.set()
            for p in procs:
                p.join(timeout=120)

    def close(self) -> None:
        pass


def judging_heartbeats(state: Dict[str, float], now: float, interval: float, grace: float) -> bool:
    """Whether this sweep process may fail trials whose heartbeat is stale at ``now`` (``state`` keeps what
    it needs between calls, which come every ``POLL_S``). Not for ``2 * interval`` seconds after a gap of
    more than half the grace period between two calls: this process was frozen (SIGSTOP, a suspended
    machine, a stalled disk), and its own workers most likely with it, so their heartbeats are as old as
    the gap although they are alive; in that time every live worker beats again. A worker that is really
    gone is failed that much later."""
    last = state.get("tick")
    state["tick"] = now
    if last is not None and now - last > grace / 2:
        state["thawed"] = now
    return now - state.get("thawed", float("-inf")) >= 2 * interval


def _raise_fault(faults) -> None:
    """Stop the sweep on the first fault of the machine a worker met."""
    import queue

    try:
        line = faults.get_nowait()
    except queue.Empty:
        return
    raise errors.MachineFault(line)


# What a worker killed by a signal most likely met, and where to look.
SIGNAL_HINTS = {
    "SIGKILL": "the kernel's out-of-memory killer, or a kill -9: see `dmesg`; lower the batch size, the sequence "
               "length or --workers",
    "SIGBUS": "a damaged file mapped into it, such as a native kernel library in the cache: delete the cache "
              "folder (UWBENCH_NATIVE_CACHE) and it is built again",
    "SIGSEGV": "a crash in native code, such as a damaged native kernel library: delete the cache folder "
               "(UWBENCH_NATIVE_CACHE) and it is built again",
}


def died(exitcode: int) -> str:
    """How a worker process ended, in words: its exit code, or the signal that killed it and what to check."""
    if exitcode is None or exitcode >= 0:
        return f"exit code {exitcode}"
    try:
        name = signal.Signals(-exitcode).name
    except ValueError:
        return f"killed by signal {-exitcode}"
    hint = SIGNAL_HINTS.get(name)
    return f"killed by {name}" + (f" ({hint})" if hint else "")
