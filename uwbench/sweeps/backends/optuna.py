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
never touched.

Resuming a trial. A retry inherits the MLflow run id of the trial it replaces (user attr
``mlflow_run_id``): a run that had ended before its worker died is told from what MLflow holds, not
re-run; otherwise the same run is re-opened and the trainer continues it from its checkpoint in the
checkpoint folder (``--checkpoint-dir``; on a disk every machine reads for multi-machine sweeps). A
trial interrupted more than ``max_retries`` times is recorded as failed.

GPUs. ``--workers N`` on a machine with G GPUs gives worker i GPU ``i mod G`` through
``CUDA_VISIBLE_DEVICES`` (``planning.worker_devices``).
"""
from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from uwbench import axes
from uwbench.spec import ChoiceParam, Plan
from uwbench.sweeps import common, planning, space
from uwbench.sweeps.storage import is_journal, make_storage, storage_url, study_name

POLL_S = 0.5
HEARTBEAT_ATTR = "heartbeat"  # journal storage: the last beat (seconds since the epoch)
STATE_NAMES = {"COMPLETE": "finished", "PRUNED": "pruned", "FAIL": "failed"}
DUPLICATE = "duplicate"


class TrialLost(KeyboardInterrupt):
    """This worker's trial was failed by another process (its heartbeat was judged stale): stop at once
    and leave the run to the retry (a KeyboardInterrupt, so no one records it as a failed run)."""


def say(line: str) -> None:
    """A line for the person watching (stderr, beside the progress line)."""
    import sys

    print(line, file=sys.stderr, flush=True)


def phases(plan: Plan) -> Tuple[str, ...]:
    return ("search", "final") if plan.mode == "tuned" else ("final",)


def phase_space(plan: Plan, phase: str) -> Dict[str, Any]:
    """What a trial of this phase suggests: the search space, plus the seed for final/grid trials."""
    if phase == "search":
        return dict(plan.search)
    seeds = plan.final_seeds if plan.mode == "tuned" else plan.all_seeds()
    return {**plan.search, axes.SEED_PARAM: ChoiceParam(type="choice", values=list(seeds))}


def legacy_index(t) -> int:
    """The index of a trial written before indices were recorded: its number, or the one it retried."""
    return int(t.user_attrs.get("retry_of", t.number))


def generation(t) -> int:
    """0 for a planned trial, n for the n-th retry of an interrupted one."""
    return len(t.system_attrs.get("retry_history", []))


def interrupted(t) -> bool:
    """Failed without an outcome of ours: its worker was lost (every ended run sets ``status``)."""
    return t.state.name == "FAIL" and "status" not in t.user_attrs


@dataclass
class Settings:
    """What every process of this machine's sweep needs (picklable)."""

    ctx: planning.Context
    storage: str
    heartbeat_interval: int
    grace_period: int
    max_retries: int
    devices: List[Optional[str]]  # CUDA_VISIBLE_DEVICES of each local worker (None: no GPU)


class Retry:
    """Called once per trial failed for a stale heartbeat (by the process whose FAIL landed): enqueue a
    copy of it (Optuna's ``RetryHeartbeatStaleTrialCallback``: same params and user attrs, ``retry_history``)."""

    def __init__(self, max_retries: int, note=None):
        import optuna
        from optuna.storages import RetryHeartbeatStaleTrialCallback

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.inner = RetryHeartbeatStaleTrialCallback(max_retry=max_retries)
        self.max_retries = max_retries
        self.note = note

    def __call__(self, study, trial) -> None:
        self.inner(study, trial)
        if self.note is not None:
            again = generation(trial) < self.max_retries
            self.note(f"trial {trial.number} of {study.study_name.rsplit('.', 2)[-2]} abandoned (worker "
                      f"{trial.user_attrs.get('worker', '?')} gone)" + ("; it resumes on the next free worker" if again
                                                                         else "; retried too often: recorded failed"))


def open_storage(s: Settings, note=None):
    retry = Retry(s.max_retries, note)
    if is_journal(s.storage):
        return make_storage(s.storage), retry
    return make_storage(s.storage, s.heartbeat_interval, s.grace_period, retry), retry


# ---------------------------------------------------------------------------------------------
# Heartbeat of a running trial
# ---------------------------------------------------------------------------------------------


class Heartbeat:
    """Beats for one trial every ``interval`` seconds from a thread, until stopped; ``lost`` is set when
    the storage says the trial was ended by someone else."""

    def __init__(self, storage, trial_id: int, interval: int, journal: bool):
        self.storage, self.trial_id, self.interval, self.journal = storage, trial_id, interval, journal
        self.lost = threading.Event()
        self._stop = threading.Event()
        self.beat()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{trial_id}", daemon=True)
        self._thread.start()

    def beat(self) -> None:
        from optuna.exceptions import UpdateFinishedTrialError

        try:
            if self.journal:
                self.storage.set_trial_user_attr(self.trial_id, HEARTBEAT_ATTR, time.time())
            else:
                self.storage.record_heartbeat(self.trial_id)
        except UpdateFinishedTrialError:
            self.lost.set()
        except Exception:  # a transient storage error: the next beat tries again
            pass

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()
            if self.lost.is_set():
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)


def directions(plan: Plan) -> Dict[str, Any]:
    """``create_study`` arguments: one direction, or one per objective of a multi-objective study."""
    if plan.multi_objective:
        return {"directions": list(plan.directions)}
    return {"direction": plan.objective.direction}


# ---------------------------------------------------------------------------------------------
# The studies of one sweep, as any process sees them
# ---------------------------------------------------------------------------------------------


class Studies:
    def __init__(self, s: Settings, storage, retry: Retry, create: bool = False):
        import optuna

        self.s, self.plan, self.storage, self.retry = s, s.ctx.plan, storage, retry
        self.studies: Dict[Tuple[str, str], Any] = {}
        for cell in self.plan.cells:
            for phase in phases(self.plan):
                name = study_name(self.plan, cell.id, phase)
                if create:
                    study = optuna.create_study(study_name=name, storage=storage, load_if_exists=True,
                                                **directions(self.plan))
                else:
                    study = optuna.load_study(study_name=name, storage=storage)
                self.studies[(cell.id, phase)] = study
        self.ids = {k: storage.get_study_id_from_name(st.study_name) for k, st in self.studies.items()}

    def trials(self, cell_id: str, phase: str, states=None):
        return self.storage.get_all_trials(self.ids[(cell_id, phase)], deepcopy=False, states=states)

    def trial_id(self, cell_id: str, phase: str, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(self.ids[(cell_id, phase)], number)

    # -- abandoning trials --

    def abandon(self, cell_id: str, phase: str, t) -> bool:
        """Fail a RUNNING trial whose worker is gone; if this process's FAIL is the one that landed,
        enqueue its retry. True when it did."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        tid = self.trial_id(cell_id, phase, t.number)
        try:
            if not self.storage.set_trial_state_values(tid, state=TrialState.FAIL):
                return False
        except UpdateFinishedTrialError:
            return False
        self.retry(self.studies[(cell_id, phase)], self.storage.get_trial(tid))
        return True

    def fail_stale(self) -> int:
        """Fail (and retry) every trial whose heartbeat is older than the grace period, on any machine."""
        import optuna
        from optuna.trial import TrialState

        n = 0
        journal = is_journal(self.s.storage)
        now = time.time()
        for (cell_id, phase), study in self.studies.items():
            if not journal:  # Optuna's heartbeat; retries through ``Retry``
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    optuna.storages.fail_stale_trials(study)
                continue
            for t in self.trials(cell_id, phase, states=(TrialState.RUNNING,)):
                last = t.user_attrs.get(HEARTBEAT_ATTR)
                if last is None and t.datetime_start is not None:
                    last = t.datetime_start.timestamp()
                if last is not None and now - float(last) > self.s.grace_period:
                    n += self.abandon(cell_id, phase, t)
        return n

    def recover_local(self, worker: Optional[str] = None) -> int:
        """Fail (and retry) the RUNNING trials of this machine (of one of its workers, if given): the
        caller knows they are dead (it holds the machine's lock, or saw the worker exit)."""
        from optuna.trial import TrialState

        n = 0
        for (cell_id, phase) in self.studies:
            for t in self.trials(cell_id, phase, states=(TrialState.RUNNING,)):
                if t.user_attrs.get("machine") != self.s.ctx.machine:
                    continue
                if worker is not None and t.user_attrs.get("worker") != worker:
                    continue
                n += self.abandon(cell_id, phase, t)
        return n

    # -- the record --

    def key(self, cell_id: str, phase: str, t) -> Optional[str]:
        """A trial's job key (None: not a job). Trials written by uwbench before job keys existed get the
        same key from their number (or the number they retried), seed and params; their interrupted
        trials (``interrupted``) were replaced by a retry, so they are no job."""
        if "job_key" in t.user_attrs:
            return t.user_attrs["job_key"]
        if t.user_attrs.get("interrupted"):
            return None
        if phase == "search":
            number = legacy_index(t)
            seed = int(t.user_attrs.get("seed", planning.search_seed(self.plan, number)))
            return common.job_key(cell_id, "trial", {}, seed, number)
        params = dict(t.system_attrs.get("fixed_params") or t.params)
        return common.job_key(cell_id, "final", params, params.get(axes.SEED_PARAM), 0)

    def by_key(self, cell_id: str, phase: str) -> Dict[str, List[Any]]:
        out: Dict[str, List[Any]] = {}
        for t in self.trials(cell_id, phase):
            key = self.key(cell_id, phase, t)
            if key is not None and t.user_attrs.get("status") != DUPLICATE:
                out.setdefault(key, []).append(t)
        return out

    def outcome(self, trials) -> Optional[Any]:
        """The trial that holds a job's outcome (None while it is waiting, running or to be retried)."""
        for t in trials:
            if t.user_attrs.get("status") in common.TERMINAL and t.state.name in STATE_NAMES:
                return t
        last = max(trials, key=lambda t: t.number)
        if interrupted(last) and generation(last) >= self.s.max_retries:
            return last
        return None

    def records(self) -> Tuple[List[common.Record], int]:
        from optuna.trial import TrialState

        records, running = [], 0
        for (cell_id, phase) in self.studies:
            for key, trials in self.by_key(cell_id, phase).items():
                running += sum(t.state == TrialState.RUNNING for t in trials)
                t = self.outcome(trials)
                if t is None:
                    continue
                status = t.user_attrs.get("status", "failed")
                error = t.user_attrs.get("error")
                if status not in common.TERMINAL:
                    error = f"interrupted {generation(t) + 1} times (its worker died each time)"
                    status = "failed"
                params = dict(t.params)
                seed = params.pop(axes.SEED_PARAM, None)
                if phase == "search":
                    seed = t.user_attrs.get("seed")
                values = tuple(t.values) if status == "finished" and t.values is not None else None
                records.append(common.Record(
                    cell=cell_id, role="trial" if phase == "search" else "final", status=status,
                    value=values[0] if values else None, test=t.user_attrs.get("test"), params=params,
                    eval=t.user_attrs.get("eval"),
                    seed=seed, number=int(t.user_attrs.get("index", legacy_index(t))), error=error,
                    values=values if self.plan.multi_objective else None))
        return records, running

    # -- planning --

    def enqueue(self) -> None:
        """Enqueue every planned job that has no trial yet, and a retry for any interrupted trial whose
        retry was never enqueued (its failer died in between). Idempotent; concurrent planners may make
        duplicates, which the workers discard."""
        plan = self.plan
        records, _ = self.records()
        for cell in plan.cells:
            rows = [r for r in records if r.cell == cell.id]
            if plan.mode == "tuned":
                have = self.by_key(cell.id, "search")
                self._orphans(cell.id, "search", have)
                for i in range(plan.budget.n_trials):
                    seed = planning.search_seed(plan, i)
                    key = common.job_key(cell.id, "trial", {}, seed, i)
                    if key not in have:
                        self.studies[(cell.id, "search")].enqueue_trial(
                            {}, user_attrs={"job_key": key, "index": i, "seed": seed}, skip_if_exists=False)
                if not planning.search_done(plan, rows):
                    continue
            have = self.by_key(cell.id, "final")
            self._orphans(cell.id, "final", have)
            for job in planning.final_jobs(plan, cell.id, rows):
                key = job.key(cell.id)
                if key not in have:
                    self.studies[(cell.id, "final")].enqueue_trial(
                        {**job.params, axes.SEED_PARAM: job.seed},
                        user_attrs={"job_key": key, "index": job.index, **job.extra}, skip_if_exists=False)

    def _orphans(self, cell_id: str, phase: str, have: Dict[str, List[Any]]) -> None:
        for trials in have.values():
            last = max(trials, key=lambda t: t.number)
            if interrupted(last) and generation(last) < self.s.max_retries and last.datetime_complete is not None \
                    and time.time() - last.datetime_complete.timestamp() > self.s.grace_period:
                self.retry(self.studies[(cell_id, phase)], last)

    def duplicate(self, cell_id: str, phase: str, t) -> bool:
        """Whether a popped trial repeats a job that a lower-numbered trial of the same generation holds."""
        key, gen = t.user_attrs.get("job_key"), generation(t)
        if key is None:
            return False
        return any(u.number < t.number and u.user_attrs.get("job_key") == key and generation(u) == gen
                   and u.user_attrs.get("status") != DUPLICATE for u in self.trials(cell_id, phase))


# ---------------------------------------------------------------------------------------------
# Running trials (in workers, or in the sweep process with --workers 0)
# ---------------------------------------------------------------------------------------------


class TrialRunner:
    def __init__(self, s: Settings, worker_id: str, index: int = 0, alive=lambda: True, note=None):
        self.s, self.plan, self.ctx = s, s.ctx.plan, s.ctx
        storage, retry = open_storage(s, note)
        self.storage = storage
        self.studies = Studies(s, storage, retry)
        self.worker_id = worker_id
        self.alive = alive
        self.note = note
        self.journal = is_journal(s.storage)
        self.extra_tags: Dict[str, Any] = {}
        if s.devices[index] is not None:  # the GPU(s) this worker was given
            self.extra_tags["cuda_visible_devices"] = s.devices[index]

    def claim(self) -> Optional[Tuple[str, str, int, Heartbeat]]:
        """Pop one WAITING trial of any cell (atomic in the storage) and start its heartbeat, or None."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        for cell_id, phase, t in self.waiting():
            tid = self.studies.trial_id(cell_id, phase, t.number)
            try:
                if not self.storage.set_trial_state_values(tid, state=TrialState.RUNNING):
                    continue
            except UpdateFinishedTrialError:
                continue
            self.storage.set_trial_user_attr(tid, "worker", self.worker_id)
            self.storage.set_trial_user_attr(tid, "machine", self.ctx.machine)
            beat = Heartbeat(self.storage, tid, self.s.heartbeat_interval, self.journal)
            if self.studies.duplicate(cell_id, phase, t):
                beat.stop()
                self.storage.set_trial_user_attr(tid, "status", DUPLICATE)
                self.storage.set_trial_state_values(tid, state=TrialState.FAIL)
                continue
            return cell_id, phase, tid, beat
        return None

    def waiting(self) -> List[Tuple[str, str, Any]]:
        """Every WAITING trial, in the order they are run: round-robin over the cells (every cell's first
        job, then every cell's second, ...), so a study cut off early has every cell with as many seeds as
        the others, not some cells done and the rest empty. Search trials come before final runs."""
        from optuna.trial import TrialState

        out = []
        for pos, cell in enumerate(self.plan.cells):
            for rank, phase in enumerate(phases(self.plan)):
                for t in self.studies.trials(cell.id, phase, states=(TrialState.WAITING,)):
                    out.append(((rank, int(t.user_attrs.get("index", legacy_index(t))), pos, t.number), cell.id, phase, t))
        return [(cid, phase, t) for _, cid, phase, t in sorted(out, key=lambda e: e[0])]

    def run_one(self) -> bool:
        claimed = self.claim()
        if claimed is None:
            return False
        cell_id, phase, tid, beat = claimed
        try:
            self.run_trial(cell_id, phase, tid, beat)
        finally:
            beat.stop()
        return True

    def _pruner(self, cell_id: str, phase: str):
        import optuna

        p = planning.pruning_for(self.plan, cell_id)
        if phase != "search" or p.type == "none":
            return optuna.pruners.NopPruner()
        if p.type == "median":
            return optuna.pruners.MedianPruner(n_startup_trials=p.n_startup_trials,
                                               n_warmup_steps=p.warmup_evals * p.eval_every)
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=p.min_evals * p.eval_every,
                                                      reduction_factor=p.reduction_factor)

    def _sampler(self, cell_id: str, phase: str, index: int):
        import optuna

        if phase == "search":  # a fresh sampler per trial, seeded by cell and index: reproducible given the history
            return planning.tpe_sampler(self.plan, cell_id, index)
        return optuna.samplers.RandomSampler(seed=index)  # final and grid trials have every param fixed

    def _told_from_mlflow(self, study, trial_id: int, run) -> bool:
        """A retried trial whose run had ended before its worker died: tell what MLflow holds."""
        from optuna.trial import TrialState

        tag = run["tags"].get("status")
        plan = self.plan
        if run["status"] == "FINISHED" and tag == "finished":
            value = run["metrics"].get(plan.objective.run_metric)
            if plan.multi_objective:
                value = common.recorded_values(plan, run["metrics"], run["tags"])
            if value is None:
                return False
            objective = plan.objective.as_metric
            self.storage.set_trial_user_attr(trial_id, "status", "finished")
            for attr, key in (("test", objective.at("test").key), ("eval", objective.at("best_eval").key)):
                if run["metrics"].get(key) is not None:
                    self.storage.set_trial_user_attr(trial_id, attr, run["metrics"][key])
            study.tell(self.storage.get_trial(trial_id).number, value)
            return True
        if (run["status"] == "FAILED" and tag == "failed") or (run["status"] == "KILLED" and tag == "pruned"):
            self.storage.set_trial_user_attr(trial_id, "status", tag)
            if run["tags"].get("error"):
                self.storage.set_trial_user_attr(trial_id, "error", run["tags"]["error"][:2000])
            study.tell(self.storage.get_trial(trial_id).number,
                       state=TrialState.PRUNED if tag == "pruned" else TrialState.FAIL)
            return True
        return False

    def run_trial(self, cell_id: str, phase: str, trial_id: int, beat: Heartbeat) -> Optional[common.Outcome]:
        import optuna
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        from uwbench.tracking.mlflow import get_run
        from uwbench.training.loop import Pruned

        plan = self.plan
        study = self.studies.studies[(cell_id, phase)]
        frozen = self.storage.get_trial(trial_id)
        index = int(frozen.user_attrs.get("index", legacy_index(frozen)))
        previous = frozen.user_attrs.get("mlflow_run_id")
        run = get_run(previous, self.ctx.uri) if previous else None
        if run is not None and self._told_from_mlflow(study, trial_id, run):
            return None
        study.sampler = self._sampler(cell_id, phase, index)
        study.pruner = self._pruner(cell_id, phase)
        trial = optuna.Trial(study, trial_id)
        try:
            params = space.suggest(trial, phase_space(plan, phase))
        except Exception as exc:  # e.g. an enqueued value outside a changed space
            self.storage.set_trial_user_attr(trial_id, "status", "failed")
            self.storage.set_trial_user_attr(trial_id, "error", f"{type(exc).__name__}: {exc}"[:2000])
            study.tell(trial, state=TrialState.FAIL)
            return common.Outcome("failed", error=str(exc))
        if phase == "search":
            seed = int(frozen.user_attrs.get("seed", planning.search_seed(plan, index)))
        else:
            seed = int(params[axes.SEED_PARAM])
        extra = {k: frozen.user_attrs[k] for k in ("best_trial",) if k in frozen.user_attrs}
        if "failed_trial" in frozen.system_attrs:
            extra["retry_of"] = frozen.system_attrs["failed_trial"]
        job = self.ctx.job(cell_id, "trial" if phase == "search" else "final", params, seed, index,
                           {**extra, **self.extra_tags, "optuna_study": study.study_name},
                           run_id=previous if run is not None else None)

        def report(step: int, value: float) -> None:
            if not self.alive():
                raise KeyboardInterrupt("the sweep's parent process is gone")
            if beat.lost.is_set() or self.storage.get_trial(trial_id).state.is_finished():
                beat.lost.set()  # the run now belongs to the retry: write nothing more to it
                raise TrialLost(f"trial {frozen.number} was taken over (its heartbeat was judged stale)")
            if value == value and not plan.multi_objective:  # skip NaN; Optuna prunes single objectives only
                trial.report(value, step)
                if phase == "search" and trial.should_prune():
                    raise Pruned()

        def remember(run_id: str) -> None:  # a retry re-opens this run
            self.storage.set_trial_user_attr(trial_id, "mlflow_run_id", run_id)

        try:
            outcome = common.execute(job, report=report, on_run=remember, detached=beat.lost)
        except TrialLost as exc:  # another process retries it; this worker takes the next trial
            if self.note is not None:
                self.note(str(exc))
            return None
        try:
            self.storage.set_trial_user_attr(trial_id, "status", outcome.status)
            for attr in ("test", "eval"):
                if getattr(outcome, attr) is not None:
                    self.storage.set_trial_user_attr(trial_id, attr, getattr(outcome, attr))
            if outcome.error:
                self.storage.set_trial_user_attr(trial_id, "error", outcome.error[:2000])
            if outcome.status == "finished":
                study.tell(trial, outcome.values if plan.multi_objective else outcome.value)
            elif outcome.status == "pruned":
                study.tell(trial, state=TrialState.PRUNED)
            else:
                study.tell(trial, state=TrialState.FAIL)
        except UpdateFinishedTrialError:  # failed by another process meanwhile: its retry is told from MLflow
            pass
        return outcome


def worker_main(s: Settings, stop, index: int) -> None:
    """A spawned worker: claim and run trials until the sweep says stop (or is gone)."""
    import optuna

    common.worker_setup()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    lock = common.hold_worker_lock(s.ctx.lock_path)
    parent = multiprocessing.parent_process()
    alive = (lambda: parent.is_alive()) if parent is not None else (lambda: True)
    runner = TrialRunner(s, f"{socket.gethostname()}:{os.getpid()}", index, alive, note=say)
    try:
        while not stop.is_set() and alive():
            if not runner.run_one():
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        pass
    finally:
        lock.close()


# ---------------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------------


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

    note = staticmethod(say)

    def open(self, ctx: planning.Context) -> str:
        url = storage_url(self.plan, self.options.storage)
        self.settings = Settings(ctx=ctx, storage=url, heartbeat_interval=self.options.heartbeat_interval,
                                 grace_period=self.options.grace_period, max_retries=self.options.max_retries,
                                 devices=self.devices)
        storage, retry = open_storage(self.settings, self.note)
        self.studies = Studies(self.settings, storage, retry, create=True)
        return f"Optuna {url}"

    def recover(self) -> int:
        return self.studies.recover_local()

    def records(self):
        return self.studies.records()

    def _housekeeping(self, state: Dict[str, float]) -> None:
        self.studies.enqueue()
        now = time.time()
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
        while True:
            self._housekeeping(state)
            if tick():
                return
            if not runner.run_one():
                time.sleep(POLL_S)

    def _run_workers(self, tick, state) -> None:
        ctx = multiprocessing.get_context("spawn")
        restarts = 0
        max_restarts = 2 * self.workers + 3
        stop = ctx.Event()

        def start(i: int):
            saved = os.environ.get("CUDA_VISIBLE_DEVICES")
            if self.devices[i] is not None:  # the child inherits it at spawn: only its GPU(s) are visible
                os.environ["CUDA_VISIBLE_DEVICES"] = self.devices[i]
            try:
                p = ctx.Process(target=worker_main, args=(self.settings, stop, i), name=f"uwbench-worker-{i}",
                                daemon=False)
                p.start()
            finally:
                if saved is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = saved
            return p

        procs = [start(i) for i in range(self.workers)]
        try:
            while True:
                self._housekeeping(state)
                if tick():
                    return
                for i, p in enumerate(procs):
                    if p.exitcode is None:
                        continue
                    restarts += 1
                    if restarts > max_restarts:
                        raise common.SweepError(f"workers keep dying ({p.name} exit code {p.exitcode}); giving up "
                                                f"after {max_restarts} restarts; re-run the same command to resume")
                    n = self.studies.recover_local(worker=f"{socket.gethostname()}:{p.pid}")
                    self.note(f"worker died: {p.name} (pid {p.pid}) exit code {p.exitcode}; {n} interrupted run(s) "
                              "to resume; starting a new worker")
                    procs[i] = start(i)
                time.sleep(POLL_S)
        except BaseException:
            stop.set()
            for p in procs:  # Ctrl-C reached them too (same process group); make sure
                if p.is_alive():
                    try:
                        os.kill(p.pid, 2)
                    except OSError:
                        pass
            for p in procs:
                p.join(timeout=60)
                if p.is_alive():
                    p.kill()
                    p.join()
            if self.studies is not None:
                self.studies.recover_local()  # none of our workers is alive any more
            raise
        finally:
            stop.set()
            for p in procs:
                p.join(timeout=120)

    def close(self) -> None:
        pass
