"""The distributed backend: the same study run by Ray Tune, locally (``ray.init``) or on a cluster
(``--ray-address``).

Tuned mode: per cell, a Tuner with ``OptunaSearch`` over the same Optuna distributions as the Optuna
backend (``space.distributions``; its study persisted in the same storage, so a resumed search
remembers its history) and ASHA (or the median stopping rule) fed by the trainer's ``report`` callback
through ``ray.tune.report``. Then one Tuner runs every final job (best params x final seed) of every
cell; faithful mode runs every grid point x seed that way. Each trial is one Ray actor call with
``{cpu: 1, gpu: fraction}`` (GPUs only if the cluster has them) and one torch thread; it logs to MLflow
itself (``uwbench.tracking.mlflow.Run`` with explicit experiment and parent run ids, always ended).

Resuming uses MLflow as the record: runs of this study, profile and spec hash already ended are
skipped; a child run left RUNNING by a killed sweep is deleted and run again. The environment follows
the stack notes: token auth off for local clusters, loopback binding for 127.0.0.1 clusters,
``MLFLOW_EXPERIMENT_ID`` popped, a 256 MB object store, no dashboard, actors reused.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import replace
from typing import Any, Dict, List, Optional

from uwbench.spec import Plan
from uwbench.sweeps import common, space

OBJECT_STORE_BYTES = 256 * 1024**2
DEFAULT_GPU_FRACTION = 0.25  # trials per GPU = 4 when the cluster has GPUs and no --gpus-per-trial is given
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# forwarded to trial processes on clusters started elsewhere (`ray start`): plugins, data, run folders
FORWARD_ENV = ("UWBENCH_PLUGINS", "UWBENCH_RUNS_DIR", "UWBENCH_DATA", "PYTHONPATH", "MLFLOW_DISABLE_TELEMETRY",
               "DO_NOT_TRACK", "RAY_CHDIR_TO_TRIAL_DIR")


# ---------------------------------------------------------------------------------------------
# Inside a trial (a Ray actor)
# ---------------------------------------------------------------------------------------------


def _run_in_trial(job: common.Job, direction: str) -> None:
    from ray import tune

    from uwbench.training.loop import Pruned

    common.worker_setup()

    def report(step: int, value: float) -> None:
        try:
            tune.report({"objective": float(value), "step": int(step)})
        except SystemExit:  # the scheduler stopped this trial (Ray ends the trial thread this way)
            raise Pruned() from None

    outcome = common.execute(job, report=report)
    if outcome.status == "pruned":
        return
    if outcome.status == "finished":
        final = outcome.value
    else:  # a failed run is the worst possible result for the searcher and the scheduler
        final = -math.inf if direction == "maximize" else math.inf
    result = {"objective": final, "status": outcome.status, "finished": float(outcome.status == "finished")}
    if outcome.test is not None:
        result["test"] = outcome.test
    try:
        tune.report(result)
    except SystemExit:
        pass


def _trainable(config: Dict[str, Any], ctx: Dict[str, Any]) -> None:
    """One trial: ``config`` holds the searched values (or a final job's params) and where it belongs."""
    base: common.Job = ctx["jobs"][config["_cell"]]
    number = int(config["_trial_number"])
    if config["_kind"] == "search":
        params = {name: config[name] for name in ctx["names"]}
        seeds = ctx["seeds"]
        job = replace(base, params=params, trial_number=number, seed=seeds[number % len(seeds)])
    else:
        job = replace(base, role="final", params=dict(config["_params"]), seed=int(config["_seed"]),
                      trial_number=number, extra_tags={**base.extra_tags, **config["_extra"]})
    _run_in_trial(job, ctx["direction"])


# ---------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------


def _numbered_optuna_search(**kwargs):
    from ray.tune.search.optuna import OptunaSearch

    class NumberedOptunaSearch(OptunaSearch):
        """OptunaSearch that tells each trial its Optuna trial number (the run's ``trial_number``)."""

        def suggest(self, trial_id: str):
            config = super().suggest(trial_id)
            if isinstance(config, dict):
                config = {**config, "_trial_number": self._ot_trials[trial_id].number}
            return config

    return NumberedOptunaSearch(**kwargs)


def _study_searcher(plan: Plan, records: List[common.Record], opt_storage, direction: str):
    """One Ray searcher for the whole study, so one Tuner (and one pool of reused actors) runs it all:
    per cell an ``OptunaSearch`` (TPE over ``space.distributions``) for the remaining search trials,
    then, as soon as a cell's search has ended, its final jobs (best params x final seed); faithful
    studies get every missing grid point x seed at once. Returns FINISHED when nothing is left."""
    import optuna
    from ray.tune.search import Searcher

    from uwbench.sweeps.optuna_backend import study_name

    mode = "max" if direction == "maximize" else "min"

    class StudySearcher(Searcher):
        def __init__(self):
            super().__init__(metric="objective", mode=mode)
            self.records = list(records)
            self.remaining: Dict[str, int] = {}
            self.searchers: Dict[str, Any] = {}
            self.finals: List[Dict[str, Any]] = []
            self.live: Dict[str, Dict[str, Any]] = {}  # trial id -> its config
            if plan.mode == "tuned":
                for cell in plan.cells:
                    done = [r for r in self.records if r.cell == cell.id and r.role == "trial"]
                    self.remaining[cell.id] = max(0, plan.budget.n_trials - len(done))
                    if self.remaining[cell.id] > 0:
                        self.searchers[cell.id] = _numbered_optuna_search(
                            space=space.distributions(plan.search), metric="objective", mode=mode,
                            sampler=optuna.samplers.TPESampler(
                                seed=common_seed(cell.id), n_startup_trials=min(10, max(2, plan.budget.n_trials // 2))),
                            study_name=study_name(plan, cell.id, "search") + ".ray", storage=opt_storage)
                    else:
                        self.finals += _final_configs(plan, self.records, cell.id)
            else:
                for cell in plan.cells:
                    self.finals += _final_configs(plan, self.records, cell.id)

        def suggest(self, trial_id: str):
            if self.finals:
                config = self.finals.pop(0)
            else:
                config = None
                for cell in plan.cells:
                    if self.remaining.get(cell.id, 0) > 0:
                        config = {**self.searchers[cell.id].suggest(trial_id), "_kind": "search", "_cell": cell.id}
                        self.remaining[cell.id] -= 1
                        break
                if config is None:
                    return None if self.live else Searcher.FINISHED
            self.live[trial_id] = config
            return config

        def on_trial_result(self, trial_id: str, result: Dict) -> None:
            config = self.live.get(trial_id)
            if config and config["_kind"] == "search":
                self.searchers[config["_cell"]].on_trial_result(trial_id, result)

        def on_trial_complete(self, trial_id: str, result: Optional[Dict] = None, error: bool = False) -> None:
            config = self.live.pop(trial_id, None)
            if config is None or config["_kind"] != "search":
                return
            cell_id = config["_cell"]
            self.searchers[cell_id].on_trial_complete(trial_id, result, error)
            result = result or {}
            status = "failed" if error else result.get("status", "pruned")
            value = result.get("objective") if status == "finished" else None
            self.records.append(common.Record(
                cell=cell_id, role="trial", status=status, value=value, test=result.get("test"),
                params={k: config[k] for k in plan.search}, seed=None, number=int(config["_trial_number"])))
            if self.remaining[cell_id] == 0 and not any(c["_cell"] == cell_id and c["_kind"] == "search"
                                                        for c in self.live.values()):
                self.finals += _final_configs(plan, self.records, cell_id)

        def save_to_dir(self, *args, **kwargs):  # resuming reads MLflow, not Tune's searcher state
            pass

        def restore_from_dir(self, *args, **kwargs):
            pass

    return StudySearcher()


def _final_configs(plan: Plan, records: List[common.Record], cell_id: str) -> List[Dict[str, Any]]:
    """The final runs of one cell still to do: tuned, best params x final seeds; faithful, grid point x
    seed. Each is a Tune config (plain values; the trainable rebuilds the job)."""
    rows = [r for r in records if r.cell == cell_id]
    done = {common.job_key(cell_id, "final", r.params, r.seed, 0) for r in rows if r.role == "final"}
    if plan.mode == "tuned":
        best = common.best_record(rows, plan.objective.direction)
        if best is None:
            return []
        todo = [(best.params, seed, i, {"best_trial": best.number}) for i, seed in enumerate(plan.final_seeds)]
    else:
        todo = [(point, seed, i * len(plan.seeds) + j, {})
                for i, point in enumerate(plan.grid_points()) for j, seed in enumerate(plan.seeds)]
    out = []
    for params, seed, number, extra in todo:
        if common.job_key(cell_id, "final", params, seed, 0) in done:
            continue
        job_params = {**params, space.SEED_PARAM: seed} if plan.mode == "faithful" else dict(params)
        out.append({"_kind": "final", "_cell": cell_id, "_params": job_params, "_seed": seed,
                    "_trial_number": number, "_extra": extra})
    return out


def _per_cell_scheduler(plan: Plan, n_evals: Dict[str, int]):
    """Pruning per cell (trials of different cells are different models: never compared): one ASHA (or
    median stopping rule) per cell for search trials; final runs are never stopped."""
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, MedianStoppingRule, TrialScheduler

    mode = "max" if plan.objective.direction == "maximize" else "min"
    p = plan.pruning

    def make(cell_id: str):
        if p.type == "asha":
            return ASHAScheduler(time_attr="training_iteration", metric="objective", mode=mode,
                                 max_t=n_evals[cell_id] + 1, grace_period=min(p.min_evals, n_evals[cell_id] + 1),
                                 reduction_factor=p.reduction_factor)
        if p.type == "median":
            return MedianStoppingRule(time_attr="training_iteration", metric="objective", mode=mode,
                                      grace_period=max(1, p.warmup_evals), min_samples_required=max(1, p.n_startup_trials),
                                      min_time_slice=10**9)  # never PAUSE: function trials have no checkpoints
        return None

    class PerCellScheduler(FIFOScheduler):
        def __init__(self):
            super().__init__()
            self.by_cell: Dict[str, Any] = {}

        def _inner(self, trial):
            config = trial.config or {}
            if config.get("_kind") != "search":
                return None
            cell_id = config["_cell"]
            if cell_id not in self.by_cell:
                self.by_cell[cell_id] = make(cell_id)
            return self.by_cell[cell_id]

        def set_search_properties(self, metric, mode, **spec) -> bool:
            return True

        def on_trial_add(self, tune_controller, trial):
            inner = self._inner(trial)
            if inner is not None:
                inner.on_trial_add(tune_controller, trial)

        def on_trial_error(self, tune_controller, trial):
            inner = self._inner(trial)
            if inner is not None:
                inner.on_trial_error(tune_controller, trial)

        def on_trial_result(self, tune_controller, trial, result):
            inner = self._inner(trial)
            if inner is None:
                return TrialScheduler.CONTINUE
            return inner.on_trial_result(tune_controller, trial, result)

        def on_trial_complete(self, tune_controller, trial, result):
            inner = self._inner(trial)
            if inner is not None:
                inner.on_trial_complete(tune_controller, trial, result)

        def on_trial_remove(self, tune_controller, trial):
            inner = self._inner(trial)
            if inner is not None:
                inner.on_trial_remove(tune_controller, trial)

        def debug_string(self) -> str:
            return f"per-cell {p.type} pruning over {len(self.by_cell)} cells"

    return PerCellScheduler()


def _prepare_env(address: Optional[str]) -> None:
    from uwbench import env

    env.apply()
    os.environ.pop("MLFLOW_EXPERIMENT_ID", None)  # Ray's MLflow helpers would prefer it (stack notes §5)
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no tables; our progress line instead
    os.environ.setdefault("RAY_CHDIR_TO_TRIAL_DIR", "0")  # relative data paths keep working in trials
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    host = (address or "127.0.0.1").rsplit(":", 1)[0].replace("ray://", "")
    if address is None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local cluster of our own (stack notes §6)
    if host in LOOPBACK:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # bind/connect on loopback only


def _init_ray(address: Optional[str], workers: Optional[int]):
    import ray

    runtime_env = {"env_vars": {k: os.environ[k] for k in FORWARD_ENV if k in os.environ}}
    kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level="WARNING", runtime_env=runtime_env)
    try:
        if address is None:
            ray.init(address="local", num_cpus=workers or os.cpu_count() or 1, object_store_memory=OBJECT_STORE_BYTES,
                     **kwargs)
        else:
            kwargs.pop("include_dashboard")
            ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError) as exc:
        hint = ""
        if address is not None:
            hint = (" Check the address, and that RAY_AUTH_MODE matches the cluster's (`token` on every client if "
                    "the head has token auth, `disabled` on head and clients alike); for a 127.0.0.1 head started "
                    "with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 the client needs it too (stack notes §6).")
        raise common.SweepError(f"cannot start or join Ray ({address or 'local'}): {exc}.{hint}") from None
    return ray


def gpu_fraction(requested: Optional[float], cluster_gpus: float, resources: Dict[str, float]) -> float:
    """The GPU share per trial: what was asked (an error if the cluster has no GPU), else 0.25 of one
    when the cluster has GPUs, else 0 (a GPU request on a CPU-only cluster would hang forever)."""
    if requested is None:
        return DEFAULT_GPU_FRACTION if cluster_gpus > 0 else 0.0
    if requested < 0 or requested > 1 and not float(requested).is_integer():
        raise common.SweepError(f"--gpus-per-trial must be a fraction in (0, 1] or a whole number, got {requested}")
    if requested > 0 and cluster_gpus <= 0:
        shown = ", ".join(f"{k}={v:g}" for k, v in sorted(resources.items()) if "/" not in k and "node:" not in k)
        raise common.SweepError(f"--gpus-per-trial {requested:g} asks for GPUs, but the Ray cluster has none "
                                f"({shown}); leave --gpus-per-trial out to run on CPUs")
    return float(requested)


class _Counts:
    def __init__(self, plan: Plan, records: List[common.Record], bar: common.Progress, total: int):
        self.plan, self.bar, self.total = plan, bar, total
        self.done = sum(r.status == "finished" for r in records)
        self.pruned = sum(r.status == "pruned" for r in records)
        self.failed = sum(r.status == "failed" for r in records)
        self.running = 0
        self.best: Optional[str] = common.describe_best(plan, records)
        self.best_value: Optional[float] = None
        for r in records:
            self._consider(r.value, r.cell, r.status)

    def _consider(self, value, cell, status) -> None:
        if status != "finished" or value is None or not math.isfinite(value):
            return
        better = self.best_value is None or (value > self.best_value if self.plan.objective.direction == "maximize"
                                             else value < self.best_value)
        if better:
            self.best_value = value
            self.best = f"{self.plan.objective.metric} {value:.4f} ({cell})"

    def show(self) -> None:
        self.bar.update(self.done, self.pruned, self.failed, self.running, self.best, total=self.total)


def _progress_callback(counts: _Counts, searcher):
    from ray import tune

    class ProgressCallback(tune.Callback):
        def __getstate__(self):  # Tune saves its callbacks with the experiment; the bar stays here
            return {}

        def on_trial_start(self, iteration, trials, trial, **info):
            counts.running += 1
            counts.show()

        def on_trial_complete(self, iteration, trials, trial, **info):
            counts.running = max(0, counts.running - 1)
            last = trial.last_result or {}
            status = last.get("status", "pruned")
            if status == "finished":
                counts.done += 1
                counts._consider(last.get("objective"), (trial.config or {}).get("_cell"), status)
                counts.total = _planned_total(counts.plan, searcher.records)
            elif status == "failed":
                counts.failed += 1
            else:
                counts.pruned += 1
            counts.show()

        def on_trial_error(self, iteration, trials, trial, **info):
            counts.running = max(0, counts.running - 1)
            counts.failed += 1
            counts.show()

    return ProgressCallback()


def _records(plan: Plan, experiment_id: str, uri: str) -> List[common.Record]:
    """This sweep's ended child runs, from MLflow."""
    from uwbench.tracking.mlflow import find_runs

    metric = plan.objective.metric.split("_", 1)[1]
    out = []
    for r in find_runs(experiment_id, _children_filter(plan), uri):
        tags = r["tags"]
        status = tags.get("status")
        if tags.get("role") not in ("trial", "final") or status not in common.TERMINAL:
            continue
        params = json.loads(tags.get("search_params") or "{}")
        finished = status == "finished"
        out.append(common.Record(
            cell=tags.get("cell"), role=tags["role"], status=status,
            value=r["metrics"].get(plan.objective.run_metric) if finished else None,
            test=r["metrics"].get(f"test_{metric}") if finished else None,
            params=params, seed=int(tags["seed"]) if tags.get("seed", "").lstrip("-").isdigit() else None,
            number=int(tags.get("trial_number", -1)), error=tags.get("error")))
    return out


def _children_filter(plan: Plan) -> str:
    return (f"tags.study = '{plan.id}' and tags.profile = '{plan.profile}' and tags.spec_hash = '{plan.spec_hash}' "
            "and tags.backend = 'ray'")


def _clean_stale(plan: Plan, experiment_id: str, uri: str) -> int:
    """Delete child runs a killed sweep left RUNNING (we hold the study lock: nothing else is running)."""
    from uwbench.tracking.mlflow import delete_run, find_runs

    n = 0
    for r in find_runs(experiment_id, _children_filter(plan) + " and attributes.status = 'RUNNING'", uri):
        if r["tags"].get("role") in ("trial", "final"):
            delete_run(r["run_id"], uri)
            n += 1
    return n


def sweep(plan: Plan, workers: Optional[int] = None, uri: Optional[str] = None, storage: Optional[str] = None,
          experiment: Optional[str] = None, progress: bool = True, ray_address: Optional[str] = None,
          gpus_per_trial: Optional[float] = None, out=print) -> int:
    from uwbench.env import runs_dir
    from uwbench.sweeps.optuna_backend import make_storage, storage_url
    from uwbench.training.config import resolve_run

    if workers is not None and workers < 1:
        raise common.SweepError(f"the ray backend needs `--workers >= 1` (concurrent trials), got {workers}")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    _prepare_env(ray_address)
    with common.study_lock(plan):
        uri, experiment_id, cell_runs = common.setup_tracking(plan, uri, experiment, "ray")
        if ray_address and uri.startswith("sqlite:///"):
            out(f"note: trials on other machines of the cluster cannot reach {uri}; give --tracking-uri "
                "http://<mlflow server> for a multi-machine cluster")
        stale = _clean_stale(plan, experiment_id, uri)
        records = _records(plan, experiment_id, uri)
        planned = plan.n_runs()
        out(f"study {plan.id} (profile {plan.profile}, {plan.mode}, spec hash {plan.spec_hash}): "
            f"{len(plan.cells)} cells, {planned} runs planned, {len(records)} recorded"
            + (f", {stale} interrupted run(s) to run again" if stale else ""))
        out(f"  MLflow {uri} (experiment {experiment or plan.id!r}); Ray {ray_address or 'local'}")
        if _complete(plan, records):
            out("nothing to do: every planned run is recorded")
            out(common.summary(plan, records))
            return 0
        try:
            ray = _init_ray(ray_address, workers)
            from ray import tune

            resources_all = ray.cluster_resources()
            frac = gpu_fraction(gpus_per_trial, resources_all.get("GPU", 0.0), resources_all)
            resources = {"cpu": 1, "gpu": frac} if frac > 0 else {"cpu": 1}
            concurrency = workers or max(1, int(resources_all.get("CPU", 1)))
            common.mark_running(cell_runs, uri)
            base = {c.id: common.Job(
                study=plan.id, profile=plan.profile, mode=plan.mode, spec_hash=plan.spec_hash, backend="ray",
                cell=c, role="trial", params={}, seed=plan.seeds[0], trial_number=0,
                objective_metric=plan.objective.metric, experiment_id=experiment_id, parent_run_id=cell_runs[c.id],
                uri=uri, device="cuda" if frac > 0 else None) for c in plan.cells}
            bar = common.Progress(planned, plan.id, enabled=progress, initial=len(records))
            counts = _Counts(plan, records, bar, planned)
            results_dir = os.path.join(runs_dir(), "ray")
            stamp = time.strftime("%Y%m%d-%H%M%S")
            direction = plan.objective.direction
            try:
                opt_storage = make_storage(storage_url(plan, storage)) if plan.mode == "tuned" else None
                searcher = _study_searcher(plan, records, opt_storage, direction)
                n_evals = {c.id: _n_evals(resolve_run(c.config).train) for c in plan.cells}
                ctx = {"jobs": base, "names": list(plan.search), "seeds": plan.seeds, "direction": direction}
                tuner = tune.Tuner(
                    tune.with_resources(tune.with_parameters(_trainable, ctx=ctx), resources),
                    tune_config=tune.TuneConfig(search_alg=searcher, scheduler=_per_cell_scheduler(plan, n_evals),
                                                num_samples=-1, max_concurrent_trials=concurrency, reuse_actors=True,
                                                trial_dirname_creator=lambda t: f"trial_{t.trial_id}"),
                    run_config=tune.RunConfig(name=f"{plan.id}.{plan.profile}.{stamp}", storage_path=results_dir,
                                              verbose=0, callbacks=[_progress_callback(counts, searcher)]))
                tuner.fit()
            finally:
                bar.close()
        except BaseException as exc:
            records = _records(plan, experiment_id, uri)
            common.close_cell_runs(plan, experiment_id, cell_runs, records, uri, _finished_cells(plan, records))
            if isinstance(exc, KeyboardInterrupt):
                out(f"interrupted: {len(records)} of {planned} runs recorded; re-run the same command to resume")
            raise
        finally:
            import ray

            if ray.is_initialized():
                ray.shutdown()
        records = _records(plan, experiment_id, uri)
        common.close_cell_runs(plan, experiment_id, cell_runs, records, uri, _finished_cells(plan, records))
        for line in common.failures(records):
            out(line)
        for cell in plan.cells:
            if plan.mode == "tuned" and common.best_record([r for r in records if r.cell == cell.id],
                                                           plan.objective.direction) is None:
                out(f"cell {cell.id}: no search trial finished, so no final runs (see the failed runs' `error` tag)")
        out(common.summary(plan, records))
        return 0


def common_seed(cell_id: str) -> int:
    import zlib

    return zlib.crc32(cell_id.encode()) % 2**31


def _n_evals(train) -> int:
    return max(1, -(-train.steps // train.eval_every))


def _cell_planned(plan: Plan, rows: List[common.Record]) -> int:
    if plan.mode == "tuned" and len([r for r in rows if r.role == "trial"]) >= plan.budget.n_trials \
            and common.best_record(rows, plan.objective.direction) is None:
        return plan.budget.n_trials
    return plan.runs_per_cell()


def _planned_total(plan: Plan, records: List[common.Record]) -> int:
    return sum(_cell_planned(plan, [r for r in records if r.cell == c.id]) for c in plan.cells)


def _finished_cells(plan: Plan, records: List[common.Record]) -> List[str]:
    out = []
    for cell in plan.cells:
        rows = [r for r in records if r.cell == cell.id]
        if len(rows) >= _cell_planned(plan, rows):
            out.append(cell.id)
    return out


def _complete(plan: Plan, records: List[common.Record]) -> bool:
    return len(_finished_cells(plan, records)) == len(plan.cells)
