"""The embedded backend: Optuna studies shared by ``--workers N`` processes on one machine.

Per cell there is one Optuna study per phase: ``search`` (tuned mode: TPE, with median or successive-
halving pruning through the trainer's ``report`` callback) and ``final`` (the best search trial's
params re-run on each final seed; in faithful mode, every grid point x seed, GridSampler's grid).

The parent process (``sweep``) holds the study lock, creates the Optuna studies (journal file under
``runs/optuna/`` by default; ``sqlite:///`` and ``postgresql://`` URLs work too), the MLflow experiment
and the cell runs, and *enqueues* exactly the planned trials: ``budget.n_trials`` per search study,
then one per final seed once a cell's search has ended. Workers (spawned processes) pop WAITING
trials (an atomic claim in the storage), so no trial runs twice and the budget is never overshot.

Resuming: re-running the same command skips what is recorded. A trial left RUNNING by a killed worker
or sweep is *interrupted*: its MLflow run is deleted, the trial is marked failed with
``interrupted=True`` (not counted) and re-enqueued with the same params, once; if the retry is
interrupted too, it is recorded as failed. A run that had ended before the worker died (its result
not yet told to Optuna) is told from what MLflow holds, not re-run.
"""
from __future__ import annotations

import multiprocessing
import os
import socket
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from uwbench.spec import ChoiceParam, Plan
from uwbench.sweeps import common, space

POLL_S = 0.5


# ---------------------------------------------------------------------------------------------
# Storage and names
# ---------------------------------------------------------------------------------------------


def storage_url(plan: Plan, storage: Optional[str]) -> str:
    """``journal:<path>`` (the default: ``runs/optuna/<study>.journal``, or any path given) or an RDB URL."""
    from uwbench.env import runs_dir

    if storage is None:
        return "journal:" + os.path.join(runs_dir(), "optuna", f"{plan.id}.journal")
    if "://" in storage:
        return storage
    return "journal:" + os.path.abspath(storage[len("journal:"):] if storage.startswith("journal:") else storage)


def make_storage(url: str):
    """The storage object every study of this process shares (for an RDB, Optuna's cached wrapper: the
    studies and our trial claims must go through the same instance)."""
    import optuna
    from optuna.storages import JournalStorage, RDBStorage, get_storage
    from optuna.storages.journal import JournalFileBackend

    if url.startswith("journal:"):
        path = url[len("journal:"):]
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return JournalStorage(JournalFileBackend(path))
    kwargs = {}
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
        # several worker processes write: wait for the file lock instead of failing (stack notes §9)
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 120}}
    try:
        return get_storage(RDBStorage(url, **kwargs))
    except (ImportError, ModuleNotFoundError) as exc:
        raise common.SweepError(f"storage {url!r} needs a database driver that is not installed: {exc}") from None
    except optuna.exceptions.StorageInternalError as exc:
        raise common.SweepError(f"cannot open the Optuna storage {url!r}: {exc}") from None


def study_name(plan: Plan, cell_id: str, phase: str) -> str:
    return f"{plan.id}.{plan.profile}.{plan.spec_hash}.{cell_id}.{phase}"


def phases(plan: Plan) -> Tuple[str, ...]:
    return ("search", "final") if plan.mode == "tuned" else ("final",)


def phase_space(plan: Plan, phase: str) -> Dict[str, Any]:
    """What a trial of this phase suggests: the search space, plus the seed for final/grid trials."""
    if phase == "search":
        return dict(plan.search)
    seeds = plan.final_seeds if plan.mode == "tuned" else plan.seeds
    return {**plan.search, space.SEED_PARAM: ChoiceParam(type="choice", values=list(seeds))}


def _stable_int(text: str) -> int:
    return zlib.crc32(text.encode())


@dataclass
class Setup:
    """What the parent hands to each worker (picklable)."""

    plan: Plan
    storage: str
    uri: str
    experiment_id: str
    cell_runs: Dict[str, str]
    lock_path: str


# ---------------------------------------------------------------------------------------------
# Running trials (in workers, or in the parent with --workers 0)
# ---------------------------------------------------------------------------------------------


class TrialRunner:
    def __init__(self, setup: Setup, storage, worker_id: str, alive=lambda: True):
        self.setup = setup
        self.plan = setup.plan
        self.storage = storage
        self.worker_id = worker_id
        self.alive = alive
        self._studies: Dict[Tuple[str, str], Any] = {}
        self._eval_every: Dict[str, int] = {}
        self._ids: Dict[Tuple[str, str], int] = {}

    def study(self, cell_id: str, phase: str):
        import optuna

        key = (cell_id, phase)
        if key not in self._studies:
            self._studies[key] = optuna.load_study(study_name=study_name(self.plan, cell_id, phase),
                                                   storage=self.storage)
        return self._studies[key]

    def study_id(self, cell_id: str, phase: str) -> int:
        key = (cell_id, phase)
        if key not in self._ids:
            self._ids[key] = self.storage.get_study_id_from_name(study_name(self.plan, cell_id, phase))
        return self._ids[key]

    def claim(self) -> Optional[Tuple[str, str, int]]:
        """Pop one WAITING trial of any cell (atomic in the storage), or None."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        for cell in self.plan.cells:
            for phase in phases(self.plan):
                sid = self.study_id(cell.id, phase)
                for t in self.storage.get_all_trials(sid, deepcopy=False, states=(TrialState.WAITING,)):
                    tid = self.storage.get_trial_id_from_study_id_trial_number(sid, t.number)
                    try:
                        if self.storage.set_trial_state_values(tid, state=TrialState.RUNNING):
                            return cell.id, phase, tid
                    except UpdateFinishedTrialError:
                        continue
        return None

    def run_one(self) -> bool:
        claimed = self.claim()
        if claimed is None:
            return False
        self.run_trial(*claimed)
        return True

    def _pruner(self, cell_id: str, phase: str):
        import optuna

        pruning = self.plan.pruning
        if phase != "search" or pruning.type == "none":
            return optuna.pruners.NopPruner()
        if cell_id not in self._eval_every:
            from uwbench.training.config import resolve_run

            self._eval_every[cell_id] = resolve_run(self.plan.cell(cell_id).config).train.eval_every
        every = self._eval_every[cell_id]
        if pruning.type == "median":
            return optuna.pruners.MedianPruner(n_startup_trials=pruning.n_startup_trials,
                                               n_warmup_steps=pruning.warmup_evals * every)
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=pruning.min_evals * every,
                                                      reduction_factor=pruning.reduction_factor)

    def _sampler(self, cell_id: str, phase: str, number: int):
        import optuna

        if phase == "search":
            n = self.plan.budget.n_trials
            # a fresh sampler per trial, seeded by cell and trial number: reproducible given the history
            return optuna.samplers.TPESampler(seed=(_stable_int(cell_id) + number) % 2**31,
                                              n_startup_trials=min(10, max(2, n // 2)))
        # final and grid trials have every param fixed by the parent (GridSampler's own bookkeeping can
        # run a point twice under concurrency, and it expects grid ids that enqueued trials lack)
        return optuna.samplers.RandomSampler(seed=number)

    def run_trial(self, cell_id: str, phase: str, trial_id: int) -> common.Outcome:
        import optuna
        from optuna.trial import TrialState

        from uwbench.training.loop import Pruned

        plan = self.plan
        cell = plan.cell(cell_id)
        study = self.study(cell_id, phase)
        frozen = self.storage.get_trial(trial_id)
        study.sampler = self._sampler(cell_id, phase, frozen.number)
        study.pruner = self._pruner(cell_id, phase)
        trial = optuna.Trial(study, trial_id)
        self.storage.set_trial_user_attr(trial_id, "worker", self.worker_id)
        try:
            params = space.suggest(trial, phase_space(plan, phase))
        except Exception as exc:  # e.g. an enqueued value outside a changed space
            self.storage.set_trial_user_attr(trial_id, "status", "failed")
            self.storage.set_trial_user_attr(trial_id, "error", f"{type(exc).__name__}: {exc}"[:2000])
            study.tell(trial, state=TrialState.FAIL)
            return common.Outcome("failed", error=str(exc))
        if phase == "search":  # seeds in turn; a retry keeps the seed of the trial it replaces
            seed = int(frozen.user_attrs.get("seed", plan.seeds[trial.number % len(plan.seeds)]))
            self.storage.set_trial_user_attr(trial_id, "seed", seed)
        else:
            seed = int(params[space.SEED_PARAM])
        extra = {}
        for attr in ("retry_of", "best_trial"):
            if attr in frozen.user_attrs:
                extra[attr] = frozen.user_attrs[attr]
        job = common.Job(
            study=plan.id, profile=plan.profile, mode=plan.mode, spec_hash=plan.spec_hash, backend="optuna",
            cell=cell, role="trial" if phase == "search" else "final", params=params, seed=seed,
            trial_number=trial.number, objective_metric=plan.objective.metric,
            experiment_id=self.setup.experiment_id, parent_run_id=self.setup.cell_runs[cell_id], uri=self.setup.uri,
            extra_tags={**extra, "optuna_study": study.study_name},
        )

        def report(step: int, value: float) -> None:
            if not self.alive():
                raise KeyboardInterrupt("the sweep's parent process is gone")
            if value == value:  # skip NaN
                trial.report(value, step)
                if phase == "search" and trial.should_prune():
                    raise Pruned()

        outcome = common.execute(job, report=report,
                                 on_run=lambda rid: self.storage.set_trial_user_attr(trial_id, "mlflow_run_id", rid))
        self.storage.set_trial_user_attr(trial_id, "status", outcome.status)
        if outcome.test is not None:
            self.storage.set_trial_user_attr(trial_id, "test", outcome.test)
        if outcome.error:
            self.storage.set_trial_user_attr(trial_id, "error", outcome.error[:2000])
        if outcome.status == "finished":
            study.tell(trial, outcome.value)
        elif outcome.status == "pruned":
            study.tell(trial, state=TrialState.PRUNED)
        else:
            study.tell(trial, state=TrialState.FAIL)
        return outcome


def worker_main(setup: Setup, stop, index: int) -> None:
    """A spawned worker: claim and run trials until the parent says stop (or is gone)."""
    import optuna

    common.worker_setup()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    lock = common.hold_worker_lock(setup.lock_path)
    parent = multiprocessing.parent_process()
    alive = (lambda: parent.is_alive()) if parent is not None else (lambda: True)
    runner = TrialRunner(setup, make_storage(setup.storage), f"{socket.gethostname()}:{os.getpid()}", alive)
    try:
        while not stop.is_set() and alive():
            if not runner.run_one():
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        pass
    finally:
        lock.close()


# ---------------------------------------------------------------------------------------------
# The parent: plan, enqueue, watch, recover
# ---------------------------------------------------------------------------------------------


@dataclass
class State:
    records: List[common.Record] = field(default_factory=list)
    running: int = 0
    waiting: int = 0
    planned: int = 0
    complete: bool = False
    finished_cells: List[str] = field(default_factory=list)
    failed_cells: List[str] = field(default_factory=list)  # searches without one successful trial


STATE_NAMES = {"COMPLETE": "finished", "PRUNED": "pruned", "FAIL": "failed"}


class Coordinator:
    def __init__(self, setup: Setup, storage):
        import optuna

        self.setup = setup
        self.plan = setup.plan
        self.storage = storage
        self.studies = {}
        for cell in self.plan.cells:
            for phase in phases(self.plan):
                self.studies[(cell.id, phase)] = optuna.create_study(
                    study_name=study_name(self.plan, cell.id, phase), storage=storage,
                    direction=self.plan.objective.direction, load_if_exists=True)
        self.study_ids = {k: storage.get_study_id_from_name(s.study_name) for k, s in self.studies.items()}

    def trials(self, cell_id: str, phase: str):
        return self.storage.get_all_trials(self.study_ids[(cell_id, phase)], deepcopy=False)

    @staticmethod
    def counted(trials):
        return [t for t in trials if not t.user_attrs.get("interrupted")]

    # -- recovery --

    def recover(self, only_worker: Optional[str] = None) -> int:
        """Resolve RUNNING trials whose worker is gone (all of them when ``only_worker`` is None: the
        caller holds the study lock and no worker of ours is alive)."""
        from optuna.trial import TrialState

        n = 0
        for (cell_id, phase), study in self.studies.items():
            for t in self.trials(cell_id, phase):
                if t.state != TrialState.RUNNING:
                    continue
                if only_worker is not None and t.user_attrs.get("worker") != only_worker:
                    continue
                self._recover_trial(study, t)
                n += 1
        return n

    def _recover_trial(self, study, t) -> None:
        from optuna.trial import TrialState

        from uwbench.tracking.mlflow import delete_run, end_run, get_run

        sid = self.storage.get_study_id_from_name(study.study_name)
        tid = self.storage.get_trial_id_from_study_id_trial_number(sid, t.number)
        run_id = t.user_attrs.get("mlflow_run_id")
        run = get_run(run_id, self.setup.uri) if run_id else None
        tag = run["tags"].get("status") if run else None
        if run is not None and run["status"] == "FINISHED" and tag == "finished":
            # it ended; only the tell was lost
            value = run["metrics"].get(self.plan.objective.run_metric)
            test = run["metrics"].get("test_" + self.plan.objective.metric.split("_", 1)[1])
            if value is not None:
                self.storage.set_trial_user_attr(tid, "status", "finished")
                if test is not None:
                    self.storage.set_trial_user_attr(tid, "test", test)
                study.tell(t.number, value)
                return
        if run is not None and ((run["status"] == "FAILED" and tag == "failed") or tag == "pruned"):
            self.storage.set_trial_user_attr(tid, "status", tag)
            study.tell(t.number, state=TrialState.PRUNED if tag == "pruned" else TrialState.FAIL)
            return
        if "retry_of" in t.user_attrs:  # interrupted twice: recorded as a failed run, not retried again
            if run is not None:
                end_run(run_id, "FAILED", {"status": "failed", "error": "interrupted twice (worker died)"},
                        self.setup.uri)
            self.storage.set_trial_user_attr(tid, "status", "failed")
            self.storage.set_trial_user_attr(tid, "error", "interrupted twice (worker died)")
            study.tell(t.number, state=TrialState.FAIL)
            return
        if run is not None:
            delete_run(run_id, self.setup.uri)
        self.storage.set_trial_user_attr(tid, "interrupted", True)
        study.tell(t.number, state=TrialState.FAIL)
        params = dict(t.system_attrs.get("fixed_params") or t.params)
        attrs = {k: v for k, v in t.user_attrs.items() if k in ("best_trial", "seed")}
        attrs["retry_of"] = t.number
        study.enqueue_trial(params, user_attrs=attrs)

    # -- planning --

    def enqueue(self) -> None:
        """Enqueue what is planned and not yet enqueued (idempotent)."""
        plan = self.plan
        for cell in plan.cells:
            if plan.mode == "faithful":
                study = self.studies[(cell.id, "final")]
                have = {_point_key(t.system_attrs.get("fixed_params") or t.params)
                        for t in self.counted(self.trials(cell.id, "final"))}
                for point in plan.grid_points():
                    for seed in plan.seeds:
                        params = {**point, space.SEED_PARAM: seed}
                        if _point_key(params) not in have:
                            study.enqueue_trial(params)
                continue
            search = self.counted(self.trials(cell.id, "search"))
            missing = plan.budget.n_trials - len(search)
            for _ in range(max(0, missing)):
                self.studies[(cell.id, "search")].enqueue_trial({})
            if missing > 0 or not all(t.state.is_finished() for t in search):
                continue
            best = self._best(search)
            if best is None:
                continue
            study = self.studies[(cell.id, "final")]
            have = {(t.system_attrs.get("fixed_params") or t.params).get(space.SEED_PARAM)
                    for t in self.counted(self.trials(cell.id, "final"))}
            for seed in plan.final_seeds:
                if seed not in have:
                    study.enqueue_trial({**best.params, space.SEED_PARAM: seed},
                                        user_attrs={"best_trial": best.number})

    def _best(self, trials):
        from optuna.trial import TrialState

        done = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
        if not done:
            return None
        sign = 1.0 if self.plan.objective.direction == "maximize" else -1.0
        return max(done, key=lambda t: (sign * t.value, -t.number))

    def state(self) -> State:
        from optuna.trial import TrialState

        plan = self.plan
        st = State()
        all_complete = True
        for cell in plan.cells:
            cell_done = True
            for phase in phases(plan):
                trials = self.counted(self.trials(cell.id, phase))
                for t in trials:
                    if t.state == TrialState.RUNNING:
                        st.running += 1
                    elif t.state == TrialState.WAITING:
                        st.waiting += 1
                    elif t.state.name in STATE_NAMES:
                        params = dict(t.params)
                        seed = params.pop(space.SEED_PARAM, None)
                        if phase == "search":
                            seed = t.user_attrs.get("seed", plan.seeds[t.number % len(plan.seeds)])
                        st.records.append(common.Record(
                            cell=cell.id, role="trial" if phase == "search" else "final",
                            status=STATE_NAMES[t.state.name], value=t.value, test=t.user_attrs.get("test"),
                            params=params, seed=seed, number=t.number, error=t.user_attrs.get("error")))
            want = plan.runs_per_cell()
            got = [r for r in st.records if r.cell == cell.id]
            if plan.mode == "tuned":
                search = self.counted(self.trials(cell.id, "search"))
                search_done = len(search) >= plan.budget.n_trials and all(t.state.is_finished() for t in search)
                if search_done and self._best(search) is None:
                    st.failed_cells.append(cell.id)
                    want = plan.budget.n_trials  # no finals without a successful trial
            st.planned += want
            cell_done = len(got) >= want
            if cell_done:
                st.finished_cells.append(cell.id)
            all_complete = all_complete and cell_done
        st.complete = all_complete
        return st


def _point_key(params) -> str:
    import json

    return json.dumps({k: params[k] for k in sorted(params)}, default=str)


# ---------------------------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------------------------


def sweep(plan: Plan, workers: int = 1, uri: Optional[str] = None, storage: Optional[str] = None,
          experiment: Optional[str] = None, progress: bool = True, out=print) -> int:
    """Run (or resume) ``plan``; returns 0 when every planned run has ended (finished, failed or pruned)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if workers < 0:
        raise common.SweepError(f"`--workers >= 0` must hold, got {workers}")
    with common.study_lock(plan) as lock_path:
        url = storage_url(plan, storage)
        store = make_storage(url)
        uri, experiment_id, cell_runs = common.setup_tracking(plan, uri, experiment, "optuna")
        setup = Setup(plan=plan, storage=url, uri=uri, experiment_id=experiment_id, cell_runs=cell_runs,
                      lock_path=lock_path)
        coord = Coordinator(setup, store)
        recovered = coord.recover()
        coord.enqueue()
        st = coord.state()
        already = len(st.records)
        out(f"study {plan.id} (profile {plan.profile}, {plan.mode}, spec hash {plan.spec_hash}): "
            f"{len(plan.cells)} cells, {st.planned} runs planned, {already} recorded"
            + (f", {recovered} interrupted run(s) recovered" if recovered else ""))
        out(f"  MLflow {uri} (experiment {experiment or plan.id!r}); Optuna {url}")
        if st.complete:
            out("nothing to do: every planned run is recorded")
            out(common.summary(plan, st.records))
            return 0
        common.mark_running(cell_runs, uri)
        bar = common.Progress(st.planned, plan.id, enabled=progress, initial=already)
        try:
            if workers == 0:
                st = _run_inline(setup, store, coord, bar)
            else:
                st = _run_workers(setup, coord, bar, workers)
        except BaseException as exc:
            bar.close()
            coord.recover()  # no worker of ours is alive any more: clean state for the next run
            st = coord.state()
            common.close_cell_runs(plan, experiment_id, cell_runs, st.records, uri, st.finished_cells)
            if isinstance(exc, KeyboardInterrupt):
                out(f"interrupted: {len(st.records)} of {st.planned} runs recorded; re-run the same command to resume")
            raise
        bar.close()
        common.close_cell_runs(plan, experiment_id, cell_runs, st.records, uri, st.finished_cells)
        for line in common.failures(st.records):
            out(line)
        for cell_id in st.failed_cells:
            out(f"cell {cell_id}: no search trial finished, so no final runs (see the failed runs' `error` tag)")
        out(common.summary(plan, st.records))
        return 0


def _tick(coord: Coordinator, bar: common.Progress) -> State:
    coord.enqueue()
    st = coord.state()
    c = {s: sum(r.status == s for r in st.records) for s in common.TERMINAL}
    bar.update(c["finished"], c["pruned"], c["failed"], st.running, common.describe_best(coord.plan, st.records),
               total=st.planned)
    return st


def _run_inline(setup: Setup, store, coord: Coordinator, bar: common.Progress) -> State:
    common.worker_setup()
    runner = TrialRunner(setup, store, f"{socket.gethostname()}:{os.getpid()}")
    idle = 0
    while True:
        st = _tick(coord, bar)
        if st.complete:
            return st
        if runner.run_one():
            idle = 0
            continue
        idle += 1
        if idle > 3:
            raise common.SweepError("internal: the sweep is not complete but no trial is waiting")


def _run_workers(setup: Setup, coord: Coordinator, bar: common.Progress, workers: int) -> State:
    ctx = multiprocessing.get_context("spawn")
    restarts = 0
    max_restarts = 2 * workers + 3

    def start(stop):
        procs = []
        for i in range(workers):
            p = ctx.Process(target=worker_main, args=(setup, stop, i), name=f"uwbench-worker-{i}", daemon=False)
            p.start()
            procs.append(p)
        return procs

    stop = ctx.Event()
    procs = start(stop)
    try:
        while True:
            st = _tick(coord, bar)
            if st.complete:
                return st
            dead = [p for p in procs if p.exitcode is not None]
            if dead:
                codes = ", ".join(f"{p.name} (pid {p.pid}) exit code {p.exitcode}" for p in dead)
                restarts += 1
                if restarts > max_restarts:
                    raise common.SweepError(f"workers keep dying ({codes}); giving up after {max_restarts} "
                                            "restarts; re-run the same command to resume")
                bar.write(f"worker died: {codes}; letting the others end their current run, then resuming")
                stop.set()
                for p in procs:
                    p.join()
                n = coord.recover()
                bar.write(f"recovered {n} interrupted run(s): each runs again once")
                stop = ctx.Event()
                procs = start(stop)
                continue
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
        raise
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=120)
