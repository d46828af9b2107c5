"""What a sweep plans, decided once for both engines (docs/design.md §7.1): the engine settings
(``Options``) and what the frame hands a backend (``Context``); which seed a search trial uses
(``search_seed``), how TPE is seeded (``tpe_sampler``), which final runs a cell needs (``final_jobs``),
what the spec's pruning means in evaluations and updates (``pruning_for``), how many runs a cell counts
(``cell_planned``) and when the study is complete, and which GPU each local worker gets
(``worker_devices``). The frame (``sweeps/driver.py``) and both backends (``sweeps/backends/``) import it;
it imports neither."""
from __future__ import annotations

import json
import math
import os
import socket
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

from uwbench import axes, env, selection
from uwbench.spec import Plan
from uwbench.sweeps import common
from uwbench.training.config import resolve_run
from uwbench.training.sizes import AUTO_SIZE

CHECKPOINT_DIR_ENV = env.CHECKPOINT_DIR_ENV  # where the trainer keeps mid-run checkpoints (one folder per run id)
GPU_COUNT_ENV = "UWBENCH_GPU_COUNT"  # for tests: the number of GPUs this machine claims to have


@dataclass
class Options:
    """Engine settings from the command line (each backend checks the ones it uses)."""

    workers: Optional[int] = None
    storage: Optional[str] = None
    ray_address: Optional[str] = None
    gpus_per_trial: Optional[float] = None
    checkpoint_dir: Optional[str] = None
    heartbeat_interval: int = 10
    grace_period: int = 60
    max_retries: int = 3
    system_metrics: bool = True  # CPU, memory (and GPU) sampled into every run
    population: Optional[Union[str, int]] = None  # --population: auto | off | K (None: the study's, else auto)


@dataclass
class Context:
    """What the frame hands a backend once tracking is set up (picklable)."""

    plan: Plan
    backend: str
    uri: str
    experiment_id: str
    cell_runs: Dict[str, str]
    lock_path: str
    machine: str = field(default_factory=lambda: machine_id())

    def job(self, cell_id: str, role: str, params: Mapping[str, Any], seed: int, number: int,
            extra: Optional[Mapping[str, Any]] = None, **kw) -> common.Job:
        plan = self.plan
        if plan.overrides:  # a --set sweep: its child runs say so too, like their cell's parent run
            extra = {"overrides": json.dumps(plan.overrides, sort_keys=True), **(extra or {})}
        return common.Job(study=plan.id, profile=plan.profile, mode=plan.mode, spec_hash=plan.spec_hash,
                          backend=self.backend, cell=plan.cell(cell_id), role=role, params=dict(params), seed=int(seed),
                          trial_number=int(number), objective_metric=plan.objective.metric,
                          costs=tuple(o.metric for o in plan.objectives[1:]),
                          experiment_id=self.experiment_id, parent_run_id=self.cell_runs[cell_id], uri=self.uri,
                          extra_tags=dict(extra or {}), **kw)


def machine_id() -> str:
    """This machine as the study sees it: host name and runs folder (two working folders on one host are
    two machines, each with its own lock)."""
    return f"{socket.gethostname()}:{env.runs_dir()}"


# ---------------------------------------------------------------------------------------------
# What is planned (one owner for both engines)
# ---------------------------------------------------------------------------------------------


def search_seed(plan: Plan, index: int) -> int:
    """The training seed of search trial ``index`` of a cell: the study's seeds in turn."""
    return int(plan.seeds[index % len(plan.seeds)])


def sampler_seed(cell_id: str, index: int = 0) -> int:
    return (zlib.crc32(cell_id.encode()) + index) % 2**31


def tpe_sampler(plan: Plan, cell_id: str, index: int = 0):
    """TPE for one cell's search, seeded by the cell (and the trial index, for a sampler made per trial). With
    ``constant_liar``, a trial sampled while others of its cell train (other workers', or the other members
    of its population) counts them at the worst value, so concurrent trials spread over the space instead of
    crowding one region; a trial sampled while none trains samples as without it."""
    import optuna

    n = plan.budget.n_trials
    return optuna.samplers.TPESampler(seed=sampler_seed(cell_id, index), n_startup_trials=min(10, max(2, n // 2)),
                                      constant_liar=True)


def member_only_search(plan: Plan) -> bool:
    """Whether the search varies only settings a population's members may have of their own
    (``population.MEMBER_KEYS``: lr, clip, clip mode): then every search trial of a cell has the cell's
    shape, and its trials can train as one population. A search over a shape setting (memory size, cache
    size, ...) trains each trial alone."""
    from uwbench.training.population import MEMBER_PATHS

    return bool(plan.search) and all(k in MEMBER_PATHS for k in plan.search)


@dataclass
class FinalJob:
    """A final run of a cell: tuned, the best trial's params on a final seed; faithful, a grid point x seed."""

    params: Dict[str, Any]  # by config path; faithful grids also carry the seed (``axes.SEED_PARAM``)
    seed: int
    index: int
    extra: Dict[str, Any]

    def key(self, cell_id: str) -> str:
        return common.job_key(cell_id, "final", self.params, self.seed, 0)


def final_jobs(plan: Plan, cell_id: str, rows: List[common.Record]) -> List[FinalJob]:
    """Every final run a cell needs given its records (tuned: none until a search trial finished; with
    several objectives, every Pareto-optimal trial's params on every final seed: ``selection.pareto_trials``)."""
    if plan.mode == "tuned" and plan.multi_objective:
        front = selection.pareto_trials([r for r in rows if r.cell == cell_id], plan.directions)
        n = len(plan.final_seeds)
        return [FinalJob(dict(t.params), int(seed), p * n + i, {"best_trial": t.number})
                for p, t in enumerate(front) for i, seed in enumerate(plan.final_seeds)]
    if plan.mode == "tuned":
        best = common.best_record([r for r in rows if r.cell == cell_id], plan.objective.direction)
        if best is None:
            return []
        return [FinalJob(dict(best.params), int(seed), i, {"best_trial": best.number})
                for i, seed in enumerate(plan.final_seeds)]
    seeds = plan.seeds_of(cell_id)
    return [FinalJob({**point, axes.SEED_PARAM: seed}, int(seed), i * len(seeds) + j, {})
            for i, point in enumerate(plan.grid_points()) for j, seed in enumerate(seeds)]


def search_done(plan: Plan, rows: List[common.Record]) -> bool:
    return plan.mode == "faithful" or sum(r.role == "trial" for r in rows) >= plan.budget.n_trials


def cell_planned(plan: Plan, rows: List[common.Record], cell_id: Optional[str] = None) -> int:
    """Runs a cell counts: its plan, less the final runs of a search in which no trial finished; with
    several objectives, once the search is done, its trials and the final runs of each Pareto-optimal one."""
    if plan.mode == "tuned" and plan.multi_objective and search_done(plan, rows):
        return plan.budget.n_trials + len(selection.pareto_trials(rows, plan.directions)) * len(plan.final_seeds)
    if plan.mode == "tuned" and search_done(plan, rows) and common.best_record(rows, plan.objective.direction) is None:
        return plan.budget.n_trials
    return plan.runs_per_cell(cell_id)


def _by_cell(plan: Plan, records: List[common.Record]) -> Dict[str, List[common.Record]]:
    out: Dict[str, List[common.Record]] = {c.id: [] for c in plan.cells}
    for r in records:
        out.setdefault(r.cell, []).append(r)
    return out


def planned_total(plan: Plan, records: List[common.Record]) -> int:
    return sum(cell_planned(plan, rows, cid) for cid, rows in _by_cell(plan, records).items())


def finished_cells(plan: Plan, records: List[common.Record]) -> List[str]:
    return [cid for cid, rows in _by_cell(plan, records).items() if len(rows) >= cell_planned(plan, rows, cid)]


def complete(plan: Plan, records: List[common.Record]) -> bool:
    return len(finished_cells(plan, records)) == len(plan.cells)


@dataclass
class PruningPlan:
    """The spec's pruning for one cell, in evaluations and in updates (``eval_every`` apart)."""

    type: str  # median | asha | none
    eval_every: int
    n_evals: int  # evaluations in a full run
    n_startup_trials: int
    warmup_evals: int
    min_evals: int
    reduction_factor: int


def pruning_for(plan: Plan, cell_id: str) -> PruningPlan:
    train = resolve_run(plan.cell(cell_id).config).train
    p = plan.pruning
    return PruningPlan(type=p.type, eval_every=train.eval_every, n_evals=max(1, -(-train.steps // train.eval_every)),
                       n_startup_trials=p.n_startup_trials, warmup_evals=p.warmup_evals, min_evals=p.min_evals,
                       reduction_factor=p.reduction_factor)


# ---------------------------------------------------------------------------------------------
# Populations
# ---------------------------------------------------------------------------------------------


def parse_population(text: Optional[str]) -> Optional[Union[str, int]]:
    """``--population`` as given (None: not given): ``auto``, ``off`` or a number of members >= 1."""
    if text is None or text in ("auto", "off"):
        return text
    try:
        k = int(text)
    except ValueError:
        k = 0
    if k < 1:
        raise common.SweepError(f"`--population` must be auto, off or a number of members >= 1, got {text!r}")
    return k


def population_setting(plan: Plan, options: "Options") -> Union[str, int]:
    """How a sweep trains a cell's runs of one shape (its final runs, and its search trials when the search
    varies only member settings): ``--population``, else the study's (or its profile's) ``population``,
    else ``auto``."""
    for value in (options.population, plan.population):
        if value is not None:
            return value
    return "auto"


def population_limit(setting: Union[str, int], device_type: str) -> int:
    """Members per population of a worker whose runs train on ``device_type`` (``cpu``, ``cuda``): ``off`` 1
    (each run alone, as without populations), ``auto`` ``AUTO_SIZE`` of the device, else the number given."""
    if setting == "off":
        return 1
    if setting == "auto":
        return AUTO_SIZE.get(device_type, 1)
    return int(setting)


# ---------------------------------------------------------------------------------------------
# GPUs of this machine
# ---------------------------------------------------------------------------------------------


def gpu_ids() -> List[str]:
    """The GPUs this machine's workers may use: those in ``$CUDA_VISIBLE_DEVICES`` when it is set (the
    user's choice is kept), else every GPU the driver lists. ``$UWBENCH_GPU_COUNT`` overrides the count
    (for tests only: it fakes GPUs on a machine without any)."""
    raw = os.environ.get(GPU_COUNT_ENV)
    if raw is not None:
        try:
            return [str(i) for i in range(max(0, int(raw)))]
        except ValueError:
            raise common.SweepError(f"${GPU_COUNT_ENV} must be a whole number, got {raw!r}") from None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    try:
        return [str(i) for i in range(len(os.listdir("/proc/driver/nvidia/gpus")))]
    except OSError:
        return []


def worker_devices(workers: int, ids: List[str], per_worker: Optional[float] = None) -> List[Optional[str]]:
    """The ``CUDA_VISIBLE_DEVICES`` of each local worker: worker i gets GPU ``i mod G``. With a fraction
    ``f`` (``--gpus-per-trial``), up to ``1/f`` workers share a GPU and more workers than ``G/f`` is an
    error; a whole number ``k`` gives each worker its own ``k`` GPUs. No GPUs: None for every worker."""
    gpus = len(ids)
    if per_worker is not None and per_worker <= 0:
        raise common.SweepError(f"--gpus-per-trial must be > 0, got {per_worker:g}")
    if gpus == 0:
        if per_worker:
            raise common.SweepError(f"--gpus-per-trial {per_worker:g} asks for GPUs, but this machine has none; "
                                    "leave it out to run on CPUs")
        return [None] * workers
    if per_worker is None or per_worker <= 1:
        share = 1.0 if per_worker is None else per_worker
        if per_worker is not None and workers * share > gpus + 1e-9:
            raise common.SweepError(f"--workers {workers} at --gpus-per-trial {share:g} needs "
                                    f"{math.ceil(workers * share)} GPUs, this machine has {gpus}; use fewer workers "
                                    "or a smaller fraction")
        return [ids[i % gpus] for i in range(workers)]
    if not float(per_worker).is_integer():
        raise common.SweepError(f"--gpus-per-trial must be a fraction in (0, 1] or a whole number, got {per_worker:g}")
    k = int(per_worker)
    if workers * k > gpus:
        raise common.SweepError(f"--workers {workers} with {k} GPUs each needs {workers * k} GPUs, this machine has "
                                f"{gpus}")
    return [",".join(ids[i * k + j] for j in range(k)) for i in range(workers)]
