"""The optuna backend's record of a sweep (``sweeps/backends/optuna.py``): per cell one Optuna study per
phase, as any process of any machine sees them (``Studies``): what is recorded (``records``), what is
planned and not yet enqueued (``enqueue``), duplicates, and the trials whose worker is gone (failed and
retried once, by the process whose FAIL lands: ``abandon``, ``fail_stale``, ``recover_local``)."""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from uwbench import axes
from uwbench.spec import ChoiceParam, Plan
from uwbench.sweeps import common, planning
from uwbench.sweeps.backends.optuna_heartbeat import HEARTBEAT_ATTR
from uwbench.sweeps.storage import is_journal, make_storage, study_name

STATE_NAMES = {"COMPLETE": "finished", "PRUNED": "pruned", "FAIL": "failed"}
DUPLICATE = "duplicate"
MLFLOW_URI_ATTR = "mlflow_uri"  # a study's user attr: the MLflow store its runs are recorded in


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
    population: Union[str, int] = "off"  # how final trials train: auto | off | K (``planning.population_setting``)


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


def directions(plan: Plan) -> Dict[str, Any]:
    """``create_study`` arguments: one direction, or one per objective of a multi-objective study."""
    if plan.multi_objective:
        return {"directions": list(plan.directions)}
    return {"direction": plan.objective.direction}


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
                    if MLFLOW_URI_ATTR not in study.user_attrs and not study.get_trials(deepcopy=False):
                        study.set_user_attr(MLFLOW_URI_ATTR, s.ctx.uri)  # a new study: its runs go there
                else:
                    study = optuna.load_study(study_name=name, storage=storage)
                self.studies[(cell.id, phase)] = study
        self.ids = {k: storage.get_study_id_from_name(st.study_name) for k, st in self.studies.items()}

    def recorded_in(self) -> Optional[str]:
        """The MLflow store the studies' runs were recorded in, as their first sweep noted it (None for
        studies made before it was noted)."""
        for study in self.studies.values():
            uri = study.user_attrs.get(MLFLOW_URI_ATTR)
            if uri:
                return uri
        return None

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

    def requeue_local(self) -> int:
        """Put this machine's RUNNING trials back to WAITING, when the sweep stopped on a fault of the machine
        and its workers are gone: the runs the fault cut short have no outcome, and are not retries of a lost
        worker either (no retry is spent on them). Best effort: a storage that cannot be written leaves them
        to ``recover_local`` next time. How many."""
        from optuna.trial import TrialState

        n = 0
        try:
            for (cell_id, phase) in self.studies:
                for t in self.trials(cell_id, phase, states=(TrialState.RUNNING,)):
                    if t.user_attrs.get("machine") == self.s.ctx.machine:
                        tid = self.trial_id(cell_id, phase, t.number)
                        n += self.storage.set_trial_state_values(tid, state=TrialState.WAITING) is not False
        except Exception:  # noqa: BLE001 - the fault is what the user must see
            pass
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

    def add_restored(self, cell_id: str, job: "planning.FinalJob", space: Dict[str, Any], value: float,
                     test: Optional[float], best_eval: Optional[float], run_id: str, marks: Dict[str, Any]) -> None:
        """A final job whose run is restored from a report's snapshot (``sweeps/restore.py``): a COMPLETE
        trial with the job's key, params and objective, pointing at the restored MLflow run (``marks``: the
        user attrs that say where it came from)."""
        import optuna

        distributions = {name: optuna.distributions.CategoricalDistribution(list(param.values))
                         for name, param in space.items()}
        attrs = {"job_key": job.key(cell_id), "index": job.index, **job.extra, "status": "finished",
                 "mlflow_run_id": run_id, "machine": self.s.ctx.machine, **marks}
        attrs.update({k: v for k, v in (("test", test), ("eval", best_eval)) if v is not None})
        trial = optuna.trial.create_trial(params=dict(job.params), distributions=distributions, value=value,
                                          user_attrs=attrs, state=optuna.trial.TrialState.COMPLETE)
        self.studies[(cell_id, "final")].add_trial(trial)

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
