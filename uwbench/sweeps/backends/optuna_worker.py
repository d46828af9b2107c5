"""The optuna backend's workers (``sweeps/backends/optuna.py``): a ``TrialRunner`` claims WAITING trials
(round-robin over the cells), keeps each one's heartbeat, runs it through ``common.execute`` (or, with
the other WAITING trials of its cell and phase that share its shape, up to the population size, as one
population through ``common.execute_population``, whose freed slots it refills) and tells Optuna each
outcome as it ends; ``worker_main`` is a spawned worker
process's loop. With ``--workers 0`` the sweep process itself runs the trials."""
from __future__ import annotations

import json
import multiprocessing
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from uwbench import axes, errors
from uwbench.sweeps import common, locks, planning, space
from uwbench.sweeps.backends.optuna_heartbeat import Heartbeat
from uwbench.sweeps.storage import is_journal
from uwbench.sweeps.backends.optuna_studies import (DUPLICATE, Settings, Studies, legacy_index, open_storage,
                                                    phase_space, phases)

POLL_S = 0.5  # seconds between looks for a WAITING trial


class TrialLost(KeyboardInterrupt):
    """This worker's trial was failed by another process (its heartbeat was judged stale): stop at once
    and leave the run to the retry (a KeyboardInterrupt, so no one records it as a failed run)."""


def say(line: str) -> None:
    """A line for the person watching (stderr, beside the progress line)."""
    import sys

    print(line, file=sys.stderr, flush=True)


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
        self._limits: Dict[str, int] = {}  # cell id -> members per population of its final trials
        self.stopping: Callable[[], bool] = lambda: False  # the sweep asked its workers to stop: refill no slot
        if s.devices[index] is not None:  # the GPU(s) this worker was given
            self.extra_tags["cuda_visible_devices"] = s.devices[index]

    def claim(self) -> Optional[Tuple[str, str, int, Heartbeat]]:
        """Pop one WAITING trial of any cell (atomic in the storage) and start its heartbeat, or None."""
        for cell_id, phase, t in self.waiting():
            claimed = self._claim_one(cell_id, phase, t)
            if claimed is not None:
                return claimed
        return None

    def _claim_one(self, cell_id: str, phase: str, t) -> Optional[Tuple[str, str, int, Heartbeat]]:
        """Pop this WAITING trial and start its heartbeat; None when another worker popped it first, or when
        it repeats a job a lower-numbered trial holds (then recorded a ``duplicate``)."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        tid = self.studies.trial_id(cell_id, phase, t.number)
        try:
            if not self.storage.set_trial_state_values(tid, state=TrialState.RUNNING):
                return None
        except UpdateFinishedTrialError:
            return None
        self.storage.set_trial_user_attr(tid, "worker", self.worker_id)
        self.storage.set_trial_user_attr(tid, "machine", self.ctx.machine)
        beat = Heartbeat(self.storage, tid, self.s.heartbeat_interval, self.journal)
        if self.studies.duplicate(cell_id, phase, t):
            beat.stop()
            self.storage.set_trial_user_attr(tid, "status", DUPLICATE)
            self.storage.set_trial_state_values(tid, state=TrialState.FAIL)
            return None
        return cell_id, phase, tid, beat

    def claim_members(self, first: Tuple[str, str, int, Heartbeat], n: int) -> List[Tuple[str, str, int, Heartbeat]]:
        """Pop up to ``n`` more WAITING trials of the first one's cell and phase that can train with it as one
        population (``_shape``), each with its own heartbeat, in the order they would be run."""
        cell_id, phase, tid, _ = first
        want = self._shape(cell_id, phase, self.storage.get_trial(tid))
        out: List[Tuple[str, str, int, Heartbeat]] = []
        if want is None:
            return out
        for cid, ph, t in self.waiting():
            if len(out) >= n:
                break
            if (cid, ph) != (cell_id, phase) or self._shape(cid, ph, t) != want:
                continue
            claimed = self._claim_one(cid, ph, t)
            if claimed is not None:
                out.append(claimed)
        return out

    def _shape(self, cell_id: str, phase: str, t) -> Optional[str]:
        """What a trial's run shares with every member of its population, or None when it trains alone. A
        search trial of a cell whose search varies only member settings (``planning.member_only_search``)
        shares the cell's shape with every other; a final trial, ``population.shape`` of its config from
        its enqueued params (None when that config does not resolve)."""
        from uwbench.training.config import resolve_run
        from uwbench.training.population import shape

        if phase == "search":
            return f"search:{cell_id}" if planning.member_only_search(self.plan) else None
        params = dict(t.system_attrs.get("fixed_params") or t.params)
        if axes.SEED_PARAM not in params:
            return None
        try:
            job = self.ctx.job(cell_id, "final", params, params[axes.SEED_PARAM], 0)
            return json.dumps(shape(resolve_run(job.config())), sort_keys=True, default=str)
        except Exception:  # noqa: BLE001 - the run itself reports a config that does not resolve
            return None

    def population_limit(self, cell_id: str, phase: str) -> int:
        """Members per population for this cell's trials on this worker (1: each trial alone), by the sweep's
        population setting and the device the cell's runs train on; search trials alone when the search
        varies a shape setting (``planning.member_only_search``)."""
        if self.s.population == "off" or (phase == "search" and not planning.member_only_search(self.plan)):
            return 1
        if cell_id not in self._limits:
            from uwbench.training.config import resolve_run
            from uwbench.training.loop import resolve_device

            try:
                device = resolve_device(resolve_run(self.plan.cell(cell_id).config).train.device).type
            except Exception:  # noqa: BLE001 - the run itself reports a device it cannot have
                device = "cpu"
            self._limits[cell_id] = planning.population_limit(self.s.population, device)
        return self._limits[cell_id]

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
        """Claim and run the next trial (a final trial with the others of its cell that train with it, as one
        population, when the population setting allows more than one member); False when none waits."""
        claimed = self.claim()
        if claimed is None:
            return False
        cell_id, phase, tid, beat = claimed
        group = [claimed]
        try:
            limit = self.population_limit(cell_id, phase)
            if limit > 1:
                group += self.claim_members(claimed, limit - 1)
                self.run_population(group, limit)
            else:
                self.run_trial(cell_id, phase, tid, beat)
        except Exception as exc:
            fault = errors.fault(exc)
            if fault is None:
                raise
            for _, _, member_tid, member_beat in group:
                member_beat.stop()
                self.requeue(member_tid)
            if isinstance(exc, errors.MachineFault):
                raise
            raise errors.MachineFault(fault) from exc
        finally:
            for _, _, _, member_beat in group:
                member_beat.stop()
        return True

    def requeue(self, trial_id: int) -> None:
        """Put a trial stopped before its outcome (by a fault of the machine, or with a member of its
        population that another process took over) back to WAITING: the next worker (of this sweep run
        again, or of another machine) runs it, re-opening its MLflow run. Best effort: a storage that cannot
        be written (the fault itself) leaves it RUNNING, and the next sweep on this machine recovers it
        (``Studies.recover_local``)."""
        from optuna.trial import TrialState

        try:
            if not self.storage.get_trial(trial_id).state.is_finished():
                self.storage.set_trial_state_values(trial_id, state=TrialState.WAITING)
        except Exception:  # noqa: BLE001 - the fault is what the user must see
            pass

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
        if (run["status"] == "FAILED" and tag == "failed" and not errors.fault_in_text(run["tags"].get("error"))) or (run["status"] == "KILLED" and tag == "pruned"):
            self.storage.set_trial_user_attr(trial_id, "status", tag)
            if run["tags"].get("error"):
                self.storage.set_trial_user_attr(trial_id, "error", run["tags"]["error"][:2000])
            study.tell(self.storage.get_trial(trial_id).number,
                       state=TrialState.PRUNED if tag == "pruned" else TrialState.FAIL)
            return True
        return False

    def prepare(self, cell_id: str, phase: str, trial_id: int, beat: Heartbeat) -> "Prepared":
        """A claimed trial made ready to train: its job (re-opening the MLflow run of the trial it retries,
        if that run is unfinished), its pruning callback and its run-id keeper. A retried trial whose run
        had ended is told from MLflow (``done``, no outcome); one whose params cannot be suggested is failed
        (``outcome``)."""
        import optuna
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
            return Prepared(trial_id, beat, study, None, None, done=True)
        study.sampler = self._sampler(cell_id, phase, index)
        study.pruner = self._pruner(cell_id, phase)
        trial = optuna.Trial(study, trial_id)
        try:
            params = space.suggest(trial, phase_space(plan, phase))
        except Exception as exc:  # noqa: BLE001 - e.g. an enqueued value outside a changed space
            self.storage.set_trial_user_attr(trial_id, "status", "failed")
            self.storage.set_trial_user_attr(trial_id, "error", f"{type(exc).__name__}: {exc}"[:2000])
            study.tell(trial, state=TrialState.FAIL)
            return Prepared(trial_id, beat, study, trial, None, outcome=common.Outcome("failed", error=str(exc)),
                            done=True)
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

        return Prepared(trial_id, beat, study, trial, job, report=report, remember=remember)

    def tell(self, p: "Prepared", outcome: common.Outcome) -> None:
        """Record a trained trial's outcome in its trial's user attrs and tell Optuna."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        trial_id = p.trial_id
        try:
            self.storage.set_trial_user_attr(trial_id, "status", outcome.status)
            for attr in ("test", "eval"):
                if getattr(outcome, attr) is not None:
                    self.storage.set_trial_user_attr(trial_id, attr, getattr(outcome, attr))
            if outcome.error:
                self.storage.set_trial_user_attr(trial_id, "error", outcome.error[:2000])
            if outcome.status == "finished":
                p.study.tell(p.trial, outcome.values if self.plan.multi_objective else outcome.value)
            elif outcome.status == "pruned":
                p.study.tell(p.trial, state=TrialState.PRUNED)
            else:
                p.study.tell(p.trial, state=TrialState.FAIL)
        except UpdateFinishedTrialError:  # failed by another process meanwhile: its retry is told from MLflow
            pass

    def run_trial(self, cell_id: str, phase: str, trial_id: int, beat: Heartbeat) -> Optional[common.Outcome]:
        """Train one claimed trial alone (``common.execute``) and tell its outcome; None when there was none
        to tell (told from MLflow, or taken over by another process)."""
        p = self.prepare(cell_id, phase, trial_id, beat)
        if p.done:
            return p.outcome
        try:
            outcome = common.execute(p.job, report=p.report, on_run=p.remember, detached=beat.lost)
        except TrialLost as exc:  # another process retries it; this worker takes the next trial
            if self.note is not None:
                self.note(str(exc))
            return None
        self.tell(p, outcome)
        return outcome

    def run_population(self, group: List[Tuple[str, str, int, Heartbeat]], limit: int) -> List[Optional[common.Outcome]]:
        """Train claimed trials of one cell and phase together as one population of ``len(group)`` slots
        (``common.execute_population``) and tell each its outcome as soon as it ends, as ``run_trial``
        does. A slot a member leaves is refilled with the next WAITING trial of the same cell, phase and
        shape (claimed and appended to ``group``, so a fault requeues it too) until none waits or the sweep
        stops. A member taken over by another process stops the population: the other members' unfinished
        trials go back to WAITING (their runs resume from their checkpoints on the next claim), and this
        worker takes the next trial."""
        cell_id, phase = group[0][0], group[0][1]
        want = self._shape(cell_id, phase, self.storage.get_trial(group[0][2]))
        prepared = [self.prepare(*claimed) for claimed in group]
        todo = [p for p in prepared if not p.done]

        def member(p: "Prepared") -> common.Member:
            return common.Member(p.job, p.report, p.remember, p.beat.lost)

        def refill() -> Optional[common.Member]:
            while not self.stopping() and self.alive():
                nxt = self._next_member(cell_id, phase, want)
                if nxt is None:
                    return None
                group.append(nxt)
                p = self.prepare(*nxt)
                prepared.append(p)
                if not p.done:
                    todo.append(p)
                    return member(p)
                nxt[3].stop()
            return None

        def told(i: int, outcome: common.Outcome) -> None:
            p = todo[i]
            p.beat.stop()
            self.tell(p, outcome)
            p.outcome = outcome

        if todo:
            try:
                common.execute_population([member(p) for p in todo], limit=limit,
                                          refill=refill if want is not None else None, on_outcome=told)
            except TrialLost as exc:
                for p in todo:
                    if not p.beat.lost.is_set() and p.outcome is None:
                        p.beat.stop()
                        self.requeue(p.trial_id)
                if self.note is not None:
                    self.note(f"{exc}; the other members of its population resume on the next free worker")
                return [None] * len(prepared)
        return [p.outcome for p in prepared]

    def _next_member(self, cell_id: str, phase: str, want: str) -> Optional[Tuple[str, str, int, Heartbeat]]:
        """Claim the next WAITING trial of this cell and phase with this shape (None: none waits)."""
        for cid, ph, t in self.waiting():
            if (cid, ph) == (cell_id, phase) and self._shape(cid, ph, t) == want:
                claimed = self._claim_one(cid, ph, t)
                if claimed is not None:
                    return claimed
        return None


@dataclass
class Prepared:
    """A claimed trial ready to train (``TrialRunner.prepare``), or ``done`` (told already, ``outcome`` its
    outcome where it has one)."""

    trial_id: int
    beat: Heartbeat
    study: Any
    trial: Any
    job: Optional[common.Job]
    report: Optional[Callable[[int, float], None]] = None
    remember: Optional[Callable[[str], None]] = None
    outcome: Optional[common.Outcome] = None
    done: bool = False


def worker_main(s: Settings, stop, index: int, faults=None) -> None:
    """A spawned worker: claim and run trials until the sweep says stop (or is gone). A fault of the machine
    (``errors.fault``) ends it quietly, its line put on ``faults`` (a queue the sweep reads) for the sweep to
    stop on."""
    common.worker_setup()
    with common.terminate_as_interrupt(once=True):  # the parent stops its workers with SIGTERM (SIGINT may be ignored)
        try:
            _serve(s, stop, index)
        except Exception as exc:
            fault = errors.fault(exc)
            if fault is None or faults is None:
                raise
            faults.put(fault)
    from uwbench.shutdown import exit_now

    exit_now(0)  # its work done and recorded: the parent need not wait out this process's teardown


def _serve(s: Settings, stop, index: int) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    lock = locks.hold_worker_lock(s.ctx.lock_path)
    parent = multiprocessing.parent_process()
    alive = (lambda: parent.is_alive()) if parent is not None else (lambda: True)
    try:
        runner = TrialRunner(s, f"{socket.gethostname()}:{os.getpid()}", index, alive, note=say)
        runner.stopping = stop.is_set
        while not stop.is_set() and alive():
            if not runner.run_one():
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        pass
    finally:
        lock.close()
