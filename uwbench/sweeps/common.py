"""What both sweep backends share: one trial's run (config, MLflow child run, tags, training, outcome),
the MLflow layout and the cells' parent runs, and the records a cell's summary is computed from. The
per-study lock is in ``locks.py``, the progress line and the end-of-sweep summary in ``display.py``.

MLflow layout (``studies/README.md`` documents it; the report relies on it):

- one experiment per study, named by the study id;
- one parent run per cell (and profile, spec hash and backend; ``role=cell``, run name = the cell id);
- one child run per training run (``mlflow.parentRunId`` = the cell run): ``role=trial`` for search
  trials, ``role=final`` for the re-runs of the best configuration on fresh seeds (tuned mode) and for
  every grid point x seed of a faithful study;
- tags on every child: ``CHILD_TAGS``; params: the flattened resolved config (logged by the trainer).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from uwbench import axes, errors, metrics, selection
from uwbench.spec import Cell, Plan
from uwbench.sweeps import space

RUN_TAGS = ("role", "status", "trial_number", "spec_hash", "git_sha", "device", "profile", "backend", "mode",
            "job_key", "search_params")  # what a child run is in its sweep; its settings are the axes


def child_tag_names():
    """Every tag of a child run: study, cell, label, the run axes (``uwbench.axes``), ``RUN_TAGS``."""
    return ("study", "cell", "label") + axes.names() + RUN_TAGS


CHILD_TAGS = child_tag_names()  # with the built-in axes
NONE = axes.NONE  # the value of a tag that does not apply
TERMINAL = ("finished", "failed", "pruned")


class SweepError(errors.UserError):
    """A sweep cannot start or go on; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------
# One trial
# ---------------------------------------------------------------------------------------------


@dataclass
class Job:
    """Everything a worker (an Optuna process or a Ray actor) needs to run one training run."""

    study: str
    profile: str
    mode: str
    spec_hash: str
    backend: str
    cell: Cell
    role: str  # trial | final
    params: Dict[str, Any]  # searched values (and ``seed`` for grids), by config path
    seed: int
    trial_number: int
    objective_metric: str  # e.g. eval_accuracy
    experiment_id: str
    parent_run_id: str
    uri: str
    extra_tags: Dict[str, Any] = field(default_factory=dict)
    device: Optional[str] = None  # overrides train.device (Ray trials given a GPU)
    run_id: Optional[str] = None  # re-open this MLflow run (a resumed job) instead of starting one
    costs: Tuple[str, ...] = ()  # a multi-objective study's other objectives (``metrics.COSTS``), in order

    @property
    def key(self) -> str:
        return job_key(self.cell.id, self.role, self.params, self.seed, self.trial_number)

    @property
    def run_name(self) -> str:
        if self.role == "trial":
            return f"{self.cell.id}/trial{self.trial_number}"
        grid = {k: v for k, v in self.params.items() if k != axes.SEED_PARAM}
        suffix = "".join(f"-{k.split('.', 1)[1]}{v}" for k, v in grid.items()) if self.mode == "faithful" else ""
        return f"{self.cell.id}/seed{self.seed}{suffix}"

    def config(self) -> Dict[str, Dict[str, Any]]:
        cfg = space.apply(self.cell.config, {k: v for k, v in self.params.items() if k != axes.SEED_PARAM})
        cfg.setdefault("train", {})["seed"] = int(self.seed)
        cfg["train"].setdefault("threads", 1)  # one intra-op thread per trial (docs/design.md §7.2)
        if self.device:
            cfg["train"]["device"] = self.device
        return cfg


def job_key(cell_id: str, role: str, params: Mapping[str, Any], seed: int, trial_number: int) -> str:
    """Identifies a planned run: a search trial by its number, a final/grid run by its params and seed."""
    ident = {"cell": cell_id, "role": role, "seed": seed}
    if role == "trial":
        ident["trial"] = trial_number
    else:
        ident["params"] = {k: v for k, v in sorted(params.items()) if k != axes.SEED_PARAM}
    return hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:12]


@dataclass
class Outcome:
    status: str  # finished | failed | pruned
    value: Optional[float] = None  # the objective (None unless finished)
    test: Optional[float] = None  # the test metric (None unless finished)
    run_id: Optional[str] = None
    error: Optional[str] = None
    eval: Optional[float] = None  # the best evaluation metric (what a grid point is chosen by)
    values: Optional[Tuple[float, ...]] = None  # multi-objective: (value, *costs), every one finite


def child_tags(job: Job, resolved: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """The tags of a child run, from the fully resolved config (defaults filled in)."""
    from uwbench.tracking.mlflow import git_sha

    tags = {"study": job.study, "cell": job.cell.id, "label": job.cell.label}
    tags.update(axes.run_tags(resolved))
    tags.update({
        "role": job.role,
        "status": "running",
        "trial_number": job.trial_number,
        "spec_hash": job.spec_hash,
        "git_sha": git_sha(),
        "device": resolved["train"]["device"],
        "profile": job.profile,
        "backend": job.backend,
        "mode": job.mode,
        "job_key": job.key,
        "search_params": json.dumps({k: v for k, v in job.params.items() if k != axes.SEED_PARAM},
                                    sort_keys=True),
    })
    tags.update(job.extra_tags)
    return tags


def objective_value(result, metric: str) -> Optional[float]:
    """The objective of a finished ``RunResult``: its best evaluation or its test value."""
    try:
        return metrics.value_of(result, metric)
    except ValueError as exc:
        raise SweepError(str(exc)) from None


class Detachable:
    """The run as the trainer sees it: once ``detached`` is set (another process has taken the job over
    and re-opened the run), every write through it is dropped, so the two never both end the run."""

    def __init__(self, run, detached):
        self._run, self._detached = run, detached

    def __getattr__(self, name):
        attr = getattr(self._run, name)
        if callable(attr):
            return lambda *args, **kwargs: None if self._detached.is_set() else attr(*args, **kwargs)
        return attr


def execute(job: Job, report: Optional[Callable[[int, float], None]] = None,
            on_run: Optional[Callable[[str], None]] = None, detached=None) -> Outcome:
    """Run one job: open its MLflow child run (or re-open ``job.run_id``: the trainer then continues it
    from its checkpoint), train, and always end the run (FINISHED, FAILED, or KILLED when pruned or
    interrupted). ``on_run(run_id)`` is called once the run exists (before any training), so a backend
    can remember it for recovery. ``detached`` (an Event): set, the run is no longer written."""
    from uwbench.training.config import resolve_run
    from uwbench.training.loop import Pruned, train

    os.environ.pop("MLFLOW_EXPERIMENT_ID", None)  # the experiment is always given by id
    config = job.config()
    run = None
    try:
        resolved = resolve_run(config).as_dict()
        run = open_child_run(job, resolved)
        if on_run is not None:
            on_run(run.run_id)
        result = train(config, run=run if detached is None else Detachable(run, detached), report=report,
                       progress=False)
    except Pruned:
        return Outcome("pruned", run_id=run.run_id if run else None)
    except Exception as exc:  # a bad config or a crash in a model: recorded failed, the sweep goes on
        if raised_while_interrupted(exc):  # the interruption is what happened: the run stays to be run again
            leave_unfinished(run, "interrupted", detached)
            raise KeyboardInterrupt(f"interrupted ({type(exc).__name__} while stopping: {exc})") from exc
        fault = errors.fault(exc)
        if fault is not None:  # a fault around the run is not its result: it stays to be run again
            leave_unfinished(run, fault, detached)
            raise errors.MachineFault(fault) from exc
        error = f"{type(exc).__name__}: {exc}"
        if run is not None:
            run.set_tags({"status": "failed", "error": error[:5000]})
            run.end("FAILED")
        return Outcome("failed", run_id=run.run_id if run else None, error=error)
    return outcome_of(job, run, result, resolved)


def open_child_run(job: Job, resolved: Mapping[str, Mapping[str, Any]], tags: Optional[Mapping[str, Any]] = None):
    """A job's MLflow child run with its tags (``child_tags``, then ``tags``): ``job.run_id`` re-opened (the
    trainer then continues it from its checkpoint), else a new run under the cell's parent run."""
    from uwbench.tracking.mlflow import Run

    all_tags = {**child_tags(job, resolved), **(tags or {})}
    if job.run_id is not None:
        run = Run(job.study, uri=job.uri, experiment_id=job.experiment_id, run_id=job.run_id)
        run.set_tags(all_tags)
        return run
    return Run(job.study, run_name=job.run_name, tags=all_tags, parent_run_id=job.parent_run_id, uri=job.uri,
               experiment_id=job.experiment_id)


def outcome_of(job: Job, run, result, resolved: Mapping[str, Mapping[str, Any]]) -> Outcome:
    """The ``Outcome`` of a job whose training returned ``result`` (its run ended by the trainer): a run that
    did not finish keeps its status; a finished one is judged by its objective (and costs)."""
    if result.status != "finished":
        return Outcome(result.status, run_id=run.run_id, error=result.error)
    try:
        value = objective_value(result, job.objective_metric)
    except SweepError as exc:
        return Outcome("failed", run_id=run.run_id, test=result.test, error=str(exc))
    if value is None:
        return Outcome("failed", run_id=run.run_id, error=f"objective {job.objective_metric} is not finite")
    best_eval = metrics.value_of(result, metrics.get(job.objective_metric).at("eval").key)
    values = None
    if job.costs:
        costs = [metrics.value_of(result, key, resolved) for key in job.costs]
        missing = [key for key, v in zip(job.costs, costs) if v is None]
        if missing:
            return Outcome("failed", run_id=run.run_id, test=result.test,
                           error=f"objective {', '.join(missing)} was not measured (or is not finite) for this run")
        values = (value, *costs)
    return Outcome("finished", value=value, test=result.test, run_id=run.run_id, eval=best_eval, values=values)


@dataclass
class Member:
    """A job trained as a member of a population (``execute_population``): its pruning callback
    ``report``, ``on_run(run_id)`` (called once its run exists, before any training) and ``detached`` (an
    Event: set, its run is no longer written), as ``execute`` takes them."""

    job: Job
    report: Optional[Callable[[int, float], None]] = None
    on_run: Optional[Callable[[str], None]] = None
    detached: Any = None


def execute_population(members: List[Member], limit: Optional[int] = None,
                       refill: Optional[Callable[[], Optional[Member]]] = None,
                       on_outcome: Optional[Callable[[int, Outcome], None]] = None) -> List[Outcome]:
    """Run jobs of one cell that differ only in seed, learning rate and clip as one population
    (``training.population``) of ``len(members)`` slots: each member exactly its solo ``execute``, with
    its own MLflow child run (opened, or ``job.run_id`` re-opened to continue from its checkpoint). With
    ``refill``, a slot a member leaves is taken by the next job ``refill`` gives (None: none now), so the
    population stays full while a cell has trials. Every run carries ``population`` (this population's id),
    ``population_member`` (its place, in the order members joined), ``population_size`` (slots) and
    ``population_limit`` (``limit``, the size asked for, when given).

    One ``Outcome`` per member, in the order they joined, as ``execute`` maps it; ``on_outcome(i, outcome)``
    is called for each, once, as soon as it is known (a member that ends is told before its slot is
    refilled). An error of the population as a whole (not of one member) fails every member not yet ended.
    A fault of the machine (``errors.fault``) leaves every unfinished member's run to be run again, and
    raises ``errors.MachineFault``."""
    import uuid

    from uwbench.training.config import resolve_run
    from uwbench.training.population import Joiner, Population

    os.environ.pop("MLFLOW_EXPERIMENT_ID", None)  # the experiment is always given by id
    pid = uuid.uuid4().hex[:12]
    tags: Dict[str, Any] = {"population": pid}
    if limit is not None:
        tags["population_limit"] = limit
    members = list(members)
    runs: List[Any] = []
    resolved: List[Any] = []
    outcomes: List[Optional[Outcome]] = []

    def settle(i: int, outcome: Outcome) -> None:
        if outcomes[i] is None:
            outcomes[i] = outcome
            if on_outcome is not None:
                on_outcome(i, outcome)

    def open_member(m: Member):
        i = len(runs)
        config = m.job.config()
        runs.append(None)
        outcomes.append(None)
        resolved.append(resolve_run(config).as_dict())
        runs[i] = open_child_run(m.job, resolved[i], {**tags, "population_member": i})
        if m.on_run is not None:
            m.on_run(runs[i].run_id)
        return config, runs[i] if m.detached is None else Detachable(runs[i], m.detached)

    def joiner() -> Optional[Joiner]:
        m = refill()
        if m is None:
            return None
        members.append(m)
        config, run = open_member(m)
        return Joiner(config, run, m.report)

    def ended(i: int, result) -> None:
        settle(i, outcome_of(members[i].job, runs[i], result, resolved[i]))

    population = None
    first = len(members)
    try:
        opened = [open_member(m) for m in members[:first]]
        population = Population([c for c, _ in opened], [r for _, r in opened], [m.report for m in members[:first]],
                                tags=tags, refill=joiner if refill is not None else None, on_end=ended)
        population.train(progress=False)
    except Exception as exc:  # a bad config or a crash in a model: recorded failed, the sweep goes on
        if raised_while_interrupted(exc):  # the interruption is what happened: the runs stay to be run again
            for i, run in enumerate(runs):
                if outcomes[i] is None:
                    leave_unfinished(run, "interrupted", members[i].detached)
            raise KeyboardInterrupt(f"interrupted ({type(exc).__name__} while stopping: {exc})") from exc
        fault = errors.fault(exc)
        if fault is not None:  # a fault around the runs is not their result: they stay to be run again
            for i, run in enumerate(runs):
                if outcomes[i] is None:
                    leave_unfinished(run, fault, members[i].detached)
            raise errors.MachineFault(fault) from exc
        error = f"{type(exc).__name__}: {exc}"
        results = population.results if population is not None else []
        for i, m in enumerate(members):
            if outcomes[i] is not None or i >= len(runs):
                continue
            result = results[i] if i < len(results) else None
            if result is not None:  # ended by the population (settled before the error, or failed with it)
                settle(i, outcome_of(m.job, runs[i], result, resolved[i]))
                continue
            run, d = runs[i], m.detached
            if run is not None and not (d is not None and d.is_set()):
                run.set_tags({"status": "failed", "error": error[:5000]})
                run.end("FAILED")
            settle(i, Outcome("failed", run_id=run.run_id if run else None, error=error))
        while len(outcomes) < len(members):  # a job refill gave whose run could not be opened
            outcomes.append(None)
            settle(len(outcomes) - 1, Outcome("failed", error=error))
    return [o for o in outcomes]


def raised_while_interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while an interruption (Ctrl-C, or SIGTERM as ``KeyboardInterrupt``) was
    being handled, e.g. a storage's lock file gone as the process stopped: then the interruption, not the
    error, is what happened to the run."""
    seen = set()
    e: Optional[BaseException] = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def leave_unfinished(run, fault: str, detached=None) -> None:
    """End a run a fault of the machine stopped as an interrupted one (KILLED, tag ``status`` interrupted, the
    fault as its ``error``), whatever the trainer recorded, so that its retry re-opens and continues it.
    Best effort: a store that cannot be written (the fault itself) keeps the run as it is, and the retry
    re-opens it all the same."""
    if run is None or (detached is not None and detached.is_set()):  # taken over: the run is another's now
        return
    try:
        run.set_tags({"status": "interrupted", "error": fault[:5000]})
        run.client.set_terminated(run.run_id, status="KILLED")
    except Exception:  # noqa: BLE001 - the fault is what the user must see
        pass


def interrupt(signum, frame) -> None:
    """A signal handler: the signal (SIGTERM) stops the process as Ctrl-C does (``KeyboardInterrupt``)."""
    raise KeyboardInterrupt(f"signal {signum}")


def _interrupt_once():
    """``interrupt`` that raises only the first time: a process already stopping ignores the signals after it,
    so that they do not cut its clean-up short (a worker gets Ctrl-C's SIGINT and then its parent's SIGTERM)."""
    state = {"raised": False}

    def handler(signum, frame) -> None:
        if state["raised"]:
            return
        state["raised"] = True
        raise KeyboardInterrupt(f"signal {signum}")

    return handler


@contextlib.contextmanager
def terminate_as_interrupt(once: bool = False):
    """While inside, SIGTERM (``kill PID``) stops this process as Ctrl-C does: a sweep started in the
    background, where the shell makes it ignore SIGINT, can still be stopped with its runs ended as
    interrupted. ``once`` (a sweep worker): the first SIGTERM or SIGINT stops the process and later ones are
    ignored while it ends its runs (the parent forwards SIGTERM after a Ctrl-C that reached the worker too;
    it kills a worker that has not ended within a minute). The previous handlers come back on leaving. Main
    thread only (elsewhere: nothing changes)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = _interrupt_once() if once else interrupt
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, handler)}
    if once and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a background sweep keeps ignoring it
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def worker_setup() -> None:
    """Process set-up of a sweep worker (Optuna process or Ray actor)."""
    from uwbench import env
    from uwbench.spec import import_plugins

    env.apply()
    os.environ.pop("MLFLOW_EXPERIMENT_ID", None)
    import torch

    torch.set_num_threads(1)
    import_plugins()


# ---------------------------------------------------------------------------------------------
# The MLflow experiment and the cell runs
# ---------------------------------------------------------------------------------------------


def children_filter(plan: Plan, backend: str) -> str:
    """The MLflow filter of the training runs (not the cell runs) of this run set."""
    return (f"tags.study = '{plan.id}' and tags.profile = '{plan.profile}' and tags.spec_hash = '{plan.spec_hash}' "
            f"and tags.backend = '{backend}' and tags.role != 'cell'")


def cell_filter(plan: Plan, backend: str, cell_id: Optional[str] = None) -> str:
    f = (f"tags.role = 'cell' and tags.profile = '{plan.profile}' and tags.spec_hash = '{plan.spec_hash}' "
         f"and tags.backend = '{backend}'")
    if cell_id is not None:
        f += f" and tags.cell = '{cell_id}'"
    return f


def ensure_cell_runs(plan: Plan, experiment_id: str, uri: str, backend: str) -> Dict[str, str]:
    """The parent run of every cell (created once per cell, profile, spec hash and backend; re-used when
    the sweep is resumed). Should creating them fail, the ones made are ended FAILED."""
    from uwbench.tracking.mlflow import find_runs

    existing = _first_per_cell(find_runs(experiment_id, cell_filter(plan, backend), uri))
    out, created = {}, []
    try:
        _create_cell_runs(plan, experiment_id, uri, backend, existing, out, created)
    except BaseException as exc:  # none of the runs made here is left RUNNING
        fail_cell_runs({str(i): r for i, r in enumerate(created)}, uri, f"{type(exc).__name__}: {exc}")
        raise
    if created:  # another machine may have created the same cell runs at the same moment: one survives
        out = _settle_cell_runs(plan, experiment_id, uri, backend, out, created)
    return out


def _create_cell_runs(plan: Plan, experiment_id: str, uri: str, backend: str, existing, out: Dict[str, str],
                      created: List[str]) -> None:
    """Fill ``out`` (cell id -> run id) with the existing parent runs and new ones (their ids also in
    ``created``)."""
    from uwbench.config import flatten
    from uwbench.tracking.mlflow import Run, git_sha

    for cell in plan.cells:
        if cell.id in existing:
            out[cell.id] = existing[cell.id]["run_id"]  # re-opened (RUNNING) by mark_running when work starts
            continue
        else:
            tags = {"role": "cell", "study": plan.id, "cell": cell.id, "label": cell.label, **cell_axis_tags(cell),
                    "profile": plan.profile, "spec_hash": plan.spec_hash, "mode": plan.mode,
                    "backend": backend, "git_sha": git_sha(), "artifact": plan.spec.artifact,
                    "objective": plan.objective.metric, "direction": plan.objective.direction,
                    "search_space": json.dumps(sorted(plan.search)), "axes": json.dumps(cell.axes, default=str)}
            if plan.multi_objective:
                tags["objectives"] = json.dumps([[o.metric, o.direction] for o in plan.objectives])
            if plan.overrides:
                tags["overrides"] = json.dumps(plan.overrides, sort_keys=True)
            if cell.paper is not None:
                tags["paper_value"] = cell.paper
                tags["paper_unit"] = plan.spec.paper.unit
            run = Run(plan.id, run_name=cell.id, tags=tags, uri=uri, experiment_id=experiment_id)
            created.append(run.run_id)
            run.log_params(flatten(cell.config))
        out[cell.id] = run.run_id


def _first_per_cell(records) -> Dict[str, Dict[str, Any]]:
    """One parent run per cell: the earliest created (then the smallest run id), the same on every machine."""
    out: Dict[str, Dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: (r.get("start_time") or 0, r["run_id"])):
        out.setdefault(r["tags"].get("cell"), r)
    return out


def _settle_cell_runs(plan: Plan, experiment_id: str, uri: str, backend: str, mine: Dict[str, str],
                      created: List[str]) -> Dict[str, str]:
    """After creating cell runs, read them back: where two machines created a cell's parent run at once,
    both keep the earliest (``_first_per_cell``) and each deletes its own other one, so a study never has
    two parents for a cell."""
    from uwbench.tracking.mlflow import client, find_runs

    first = _first_per_cell(find_runs(experiment_id, cell_filter(plan, backend), uri))
    out = {cid: first[cid]["run_id"] if cid in first else rid for cid, rid in mine.items()}
    c = client(uri)
    for run_id in created:
        if run_id not in out.values():
            c.delete_run(run_id)
    return out


def cell_axis_tags(cell: Cell) -> Dict[str, Any]:
    """The parent run's axis tags: the cell's describing axes from its resolved config (the spec's values
    where a component is not registered)."""
    from uwbench.training.config import resolve_run

    try:
        config = resolve_run(cell.config).as_dict()
    except Exception:  # noqa: BLE001 - validated by the plan; an unregistered component keeps the spec's values
        config = cell.config
    tags = axes.run_tags(config)
    out = {n: tags[n] for n in axes.names() if axes.get(n).cell}
    out.update(model=cell.model, task=cell.task)
    return out


def mark_running(cell_runs: Mapping[str, str], uri: str) -> None:
    """Re-open the cell runs of a resumed sweep (they were ended FINISHED or KILLED before)."""
    from uwbench.tracking.mlflow import client

    c = client(uri)
    for run_id in cell_runs.values():
        c.update_run(run_id, status="RUNNING")


@dataclass
class Record:
    """One run of a sweep as the summary sees it (from Optuna or from MLflow)."""

    cell: str
    role: str
    status: str  # finished | failed | pruned
    value: Optional[float]
    test: Optional[float]
    params: Dict[str, Any]
    seed: Optional[int]
    number: int
    error: Optional[str] = None
    eval: Optional[float] = None  # the best evaluation metric; None: ``value`` when the objective is one
    values: Optional[Tuple[float, ...]] = None  # the objective vector of a multi-objective study (``value`` first)


def recorded_values(plan: Plan, run_metrics: Mapping[str, Any], tags: Mapping[str, Any]) -> Optional[Tuple[float, ...]]:
    """A finished run's objective vector as MLflow holds it, for a multi-objective study (None otherwise, or
    when a value is missing): each objective's run metric (``metrics.run_key_of``), else the run's tag of
    that name (the compression ratio is an axis tag)."""
    if not plan.multi_objective:
        return None
    out = []
    for o in plan.objectives:
        key = metrics.run_key_of(o.metric)
        try:
            value = float(run_metrics.get(key, tags.get(key)))
        except (TypeError, ValueError):
            return None
        if not math.isfinite(value):
            return None
        out.append(value)
    return tuple(out)


def best_record(records: Iterable[Record], direction: str) -> Optional[Record]:
    """The best finished search trial (ties: the earliest): ``uwbench.selection.best_trial``."""
    return selection.best_trial(records, direction)


def cell_result(plan: Plan, rows: List[Record]):
    """(chosen params, test values of the runs that count) of one cell: ``uwbench.selection.choose``
    (tuned: the best trial's params and its re-runs; faithful: the grid point with the best mean
    evaluation metric and its seeds)."""
    choice = selection.choose(plan.mode, plan.objective, rows, plan.directions)
    return choice.params, choice.tests


def fail_cell_runs(cell_runs: Mapping[str, str], uri: str, error: str, status: str = "FAILED") -> None:
    """End the cell runs FAILED (or ``status``) with ``error`` as a tag, when no summary can be written (the
    engine's state cannot be read). Best effort: a store that cannot be written leaves the caller's error to
    be seen."""
    from uwbench.tracking.mlflow import client

    try:
        c = client(uri)
        for run_id in cell_runs.values():
            c.set_tag(run_id, "status", "interrupted")
            c.set_tag(run_id, "error", error[:5000])
            c.set_terminated(run_id, status=status)
    except Exception:  # noqa: BLE001 - the original error matters more than this one
        pass


def close_cell_runs(plan: Plan, experiment_id: str, cell_runs: Mapping[str, str], records: List[Record],
                    uri: str, finished_cells: Iterable[str], error: Optional[str] = None,
                    fault: bool = False) -> None:
    """Write each cell's summary (counts, chosen params, final mean and std) to its parent run and end it:
    FINISHED when all its runs ended, else KILLED when the sweep was interrupted, or FAILED with ``error`` as
    a tag when the sweep stopped on that error (KILLED with it when the error is a fault of the machine
    (``fault``): its runs are to be run, not failed)."""
    from uwbench.tracking.mlflow import Run

    finished_cells = set(finished_cells)
    objective = plan.objective.as_metric
    final = objective.at("final_test").key
    for cell in plan.cells:
        rows = [r for r in records if r.cell == cell.id]
        run = Run(plan.id, uri=uri, experiment_id=experiment_id, run_id=cell_runs[cell.id])
        tags: Dict[str, Any] = {
            "n_finished": sum(r.status == "finished" for r in rows),
            "n_pruned": sum(r.status == "pruned" for r in rows),
            "n_failed": sum(r.status == "failed" for r in rows),
            "status": "finished" if cell.id in finished_cells else "interrupted",
        }
        metrics_: Dict[str, float] = {}
        best = selection.best_trial(rows, objective.direction)
        if best is not None:
            tags["best_trial"] = best.number
            metrics_[f"best_{objective.key}"] = best.value
        choice = selection.choose(plan.mode, objective, rows, plan.directions)
        if choice.params is not None:
            tags["best_params"] = json.dumps(choice.params, sort_keys=True, default=str)
            tags["grid_points"] = choice.n_points
        if plan.multi_objective:  # the Pareto-optimal trials (their numbers), each re-run on the final seeds
            tags["pareto_trials"] = json.dumps([r.number for r in selection.pareto_trials(rows, plan.directions)])
        finals = choice.tests
        if finals:
            metrics_[f"{final}_mean"] = statistics.fmean(finals)
            metrics_[f"{final}_std"] = statistics.stdev(finals) if len(finals) > 1 else 0.0
            metrics_["n_final"] = len(finals)
        if error is not None and cell.id not in finished_cells:
            tags["error"] = error[:5000]
        run.set_tags(tags)
        if metrics_:
            run.log_metrics(metrics_, 0)
        run.end("FINISHED" if cell.id in finished_cells else "KILLED" if error is None or fault else "FAILED")


def setup_tracking(plan: Plan, uri: Optional[str], experiment: Optional[str], backend: str):
    """Create (in the parent, before any worker) the experiment and the cell runs."""
    from uwbench.tracking.mlflow import ensure_experiment, resolve_uri

    uri = resolve_uri(uri)
    experiment_id = ensure_experiment(experiment or plan.id, uri)
    return uri, experiment_id, ensure_cell_runs(plan, experiment_id, uri, backend)
