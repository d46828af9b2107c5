"""The Ray Tune engine: the same study run by Ray Tune, locally (``ray.init``) or on a cluster
(``--ray-address``).

Tuned mode: per cell an ``OptunaSearch`` over the same Optuna distributions as the Optuna engine
(``space.distributions``; its study persisted in the same storage, so a resumed search remembers its
history), with ASHA (or the median stopping rule) fed by the trainer's ``report`` callback through
``ray.tune.report``; as soon as a cell's search has ended, its final jobs. Faithful mode runs every grid
point x seed. One Tuner (one pool of reused actors) runs the whole study; each trial is one actor call
with ``{cpu: 1, gpu: fraction}`` (GPUs only if the cluster has them) and one torch thread, and logs to
MLflow itself (``uwbench.tracking.mlflow.Run`` with explicit experiment and parent run ids).

Lost workers and nodes: ``FailureConfig(max_failures=...)`` retries a trial whose actor or node died
within the same sweep. The retried trial finds its MLflow run by ``tags.job_key`` (left RUNNING, or
KILLED by an interrupt) and re-opens it, so the trainer continues it from its checkpoint in
``--checkpoint-dir`` (a folder every node can read; handed to the trials with the runtime env).

Resuming a sweep uses MLflow as the record: runs of this study, profile and spec hash already ended are
skipped; a search-trial run a killed sweep left RUNNING is deleted (the searcher numbers new trials
afresh), a final run is resumed. The environment: token auth off for local clusters, loopback binding
for 127.0.0.1 clusters, ``MLFLOW_EXPERIMENT_ID`` popped, a 256 MB object store, no dashboard, actors
reused.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import replace
from typing import Any, Dict, List, Optional

from uwbench import axes, env, errors
from uwbench.spec import Plan
from uwbench.sweeps import common, planning, space

OBJECT_STORE_BYTES = 256 * 1024**2
DEFAULT_GPU_FRACTION = 0.25  # trials per GPU = 4 when the cluster has GPUs and no --gpus-per-trial is given
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# forwarded to trial processes on clusters started elsewhere (`ray start`): plugins, data, run and checkpoint folders
FORWARD_ENV = ("UWBENCH_PLUGINS", "UWBENCH_RUNS_DIR", "UWBENCH_DATA", planning.CHECKPOINT_DIR_ENV,
               env.SYSTEM_METRICS_ENV, "PYTHONPATH",
               "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "RAY_CHDIR_TO_TRIAL_DIR")


# ---------------------------------------------------------------------------------------------
# Inside a trial (a Ray actor)
# ---------------------------------------------------------------------------------------------


def _children_filter(plan: Plan) -> str:
    return (f"tags.study = '{plan.id}' and tags.profile = '{plan.profile}' and tags.spec_hash = '{plan.spec_hash}' "
            "and tags.backend = 'ray'")


def _unfinished_run(job: common.Job, plan: Plan) -> Optional[str]:
    """The MLflow run of this job that an earlier attempt left unfinished (its worker or node died)."""
    from uwbench.tracking.mlflow import find_runs

    rows = find_runs(job.experiment_id, _children_filter(plan) + f" and tags.job_key = '{job.key}'", job.uri)
    for r in sorted(rows, key=lambda r: r["start_time"] or 0):
        if r["status"] == "RUNNING" or (r["status"] == "KILLED" and r["tags"].get("status") != "pruned"):
            return r["run_id"]
    return None


def _run_in_trial(job: common.Job, plan: Plan) -> None:
    from ray import tune

    from uwbench.training.loop import Pruned

    common.worker_setup()
    job = replace(job, run_id=_unfinished_run(job, plan))

    def report(step: int, value: float) -> None:
        try:
            tune.report({"objective": float(value), "step": int(step)})
        except SystemExit:  # the scheduler stopped this trial (Ray ends the trial thread this way)
            raise Pruned() from None

    outcome = common.execute(job, report=report)
    _report_outcome(outcome, job, plan)


def _run_population_in_trial(jobs: List[common.Job], plan: Plan, limit: int) -> None:
    """Final jobs of one cell and shape trained as one population inside one Ray trial, each member its solo
    run (re-opening the run an earlier attempt left unfinished); the trial reports once, at the end (final
    runs are never stopped by the scheduler)."""
    common.worker_setup()
    jobs = [replace(job, run_id=_unfinished_run(job, plan)) for job in jobs]
    outcomes = common.execute_population([common.Member(job) for job in jobs], limit=limit)
    finished = [o for o in outcomes if o.status == "finished"]
    _report_outcome(finished[0] if finished else outcomes[0], jobs[0], plan)


def _report_outcome(outcome: common.Outcome, job: common.Job, plan: Plan) -> None:
    """A trial's last report to Tune: its objective (the worst possible for a failed run), status and costs."""
    from ray import tune

    if outcome.status == "pruned":
        return
    if outcome.status == "finished":
        final = outcome.value
    else:  # a failed run is the worst possible result for the searcher and the scheduler
        final = -math.inf if plan.objective.direction == "maximize" else math.inf
    result = {"objective": final, "status": outcome.status, "finished": float(outcome.status == "finished")}
    for i, key in enumerate(job.costs, start=1):  # a multi-objective study: each cost (minimised; failed: +inf)
        result[key] = outcome.values[i] if outcome.status == "finished" else math.inf
    for name in ("test", "eval"):
        if getattr(outcome, name) is not None:
            result[name] = getattr(outcome, name)
    try:
        tune.report(result)
    except SystemExit:
        pass


def _trainable(config: Dict[str, Any], ctx: Dict[str, Any]) -> None:
    """One trial: ``config`` holds the searched values (or the final jobs of one population: their params,
    seeds and numbers) and where it belongs."""
    context: planning.Context = ctx["context"]
    plan = context.plan
    cell_id, number = config["_cell"], int(config["_trial_number"])
    if config["_kind"] == "search":
        params = {name: config[name] for name in plan.search}
        job = context.job(cell_id, "trial", params, planning.search_seed(plan, number), number, device=ctx["device"])
        _run_in_trial(job, plan)
        return
    jobs = [context.job(cell_id, "final", m["_params"], m["_seed"], int(m["_trial_number"]), m["_extra"],
                        device=ctx["device"]) for m in config["_members"]]
    if len(jobs) == 1:
        _run_in_trial(jobs[0], plan)
    else:
        _run_population_in_trial(jobs, plan, int(config["_limit"]))


# ---------------------------------------------------------------------------------------------
# The searcher and the scheduler (on the driver)
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


def _objectives(plan: Plan) -> Dict[str, Any]:
    """``OptunaSearch``'s metric and mode: ``objective``, or with several objectives one name per objective
    (``objective`` then each cost's key, as the trial reports them) and one mode each."""
    mode = "max" if plan.objective.direction == "maximize" else "min"
    if not plan.multi_objective:
        return {"metric": "objective", "mode": mode}
    return {"metric": ["objective", *(o.metric for o in plan.objectives[1:])],
            "mode": [mode, *("max" if o.direction == "maximize" else "min" for o in plan.objectives[1:])]}

def _final_configs(plan: Plan, records: List[common.Record], cell_id: str, limit: int = 1) -> List[Dict[str, Any]]:
    """The final jobs of one cell still to do, as Tune configs (plain values; the trainable rebuilds the
    jobs): one config per population of up to ``limit`` jobs that share a shape (their params differ only
    in the settings a member may have of its own, ``population.MEMBER_KEYS``, and the seed)."""
    from uwbench.training.population import MEMBER_PATHS

    own = MEMBER_PATHS | {axes.SEED_PARAM}
    done = {common.job_key(cell_id, "final", r.params, r.seed, 0) for r in records
            if r.cell == cell_id and r.role == "final"}
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for job in planning.final_jobs(plan, cell_id, records):
        if job.key(cell_id) in done:
            continue
        shape = json.dumps({k: v for k, v in job.params.items() if k not in own}, sort_keys=True, default=str)
        groups.setdefault(shape, []).append({"_params": job.params, "_seed": job.seed, "_trial_number": job.index,
                                             "_extra": job.extra})
    out = []
    for members in groups.values():
        for i in range(0, len(members), max(1, limit)):
            out.append({"_kind": "final", "_cell": cell_id, "_members": members[i:i + max(1, limit)],
                        "_limit": limit, "_trial_number": members[i]["_trial_number"]})
    return out


def _study_searcher(plan: Plan, records: List[common.Record], opt_storage, limit: int = 1):
    """One Ray searcher for the whole study, so one Tuner (and one pool of reused actors) runs it all:
    per cell an ``OptunaSearch`` (TPE over ``space.distributions``) for the remaining search trials,
    then, as soon as a cell's search has ended, its final jobs; faithful studies get every missing grid
    point x seed at once; final jobs of one shape go to one trial as a population of up to ``limit``
    members. Returns FINISHED when nothing is left."""
    from ray.tune.search import Searcher

    from uwbench.sweeps.storage import study_name

    mode = "max" if plan.objective.direction == "maximize" else "min"

    class StudySearcher(Searcher):
        def __init__(self):
            super().__init__(metric="objective", mode=mode)
            self.records = list(records)
            self.remaining: Dict[str, int] = {}
            self.searchers: Dict[str, Any] = {}
            self.finals: List[Dict[str, Any]] = []
            self.live: Dict[str, Dict[str, Any]] = {}  # trial id -> its config
            for cell in plan.cells:
                done = [r for r in self.records if r.cell == cell.id and r.role == "trial"]
                self.remaining[cell.id] = max(0, plan.budget.n_trials - len(done)) if plan.mode == "tuned" else 0
                if self.remaining[cell.id] > 0:
                    self.searchers[cell.id] = _numbered_optuna_search(
                        space=space.distributions(plan.search), **_objectives(plan),
                        sampler=planning.tpe_sampler(plan, cell.id),
                        study_name=study_name(plan, cell.id, "search") + ".ray", storage=opt_storage)
                else:
                    self.finals += _final_configs(plan, self.records, cell.id, limit)

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
            costs = [o.metric for o in plan.objectives[1:]]
            values = (value, *(result.get(k) for k in costs)) if costs and value is not None else None
            self.records.append(common.Record(
                cell=cell_id, role="trial", status=status, value=value, test=result.get("test"),
                eval=result.get("eval"), params={k: config[k] for k in plan.search}, seed=None,
                number=int(config["_trial_number"]), values=values))
            if self.remaining[cell_id] == 0 and not any(c["_cell"] == cell_id and c["_kind"] == "search"
                                                        for c in self.live.values()):
                self.finals += _final_configs(plan, self.records, cell_id, limit)

        def save_to_dir(self, *args, **kwargs):  # resuming reads MLflow, not Tune's searcher state
            pass

        def restore_from_dir(self, *args, **kwargs):
            pass

    return StudySearcher()


def _per_cell_scheduler(plan: Plan):
    """Pruning per cell (trials of different cells are different models: never compared): one ASHA (or
    median stopping rule) per cell for search trials; final runs are never stopped."""
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, MedianStoppingRule, TrialScheduler

    mode = "max" if plan.objective.direction == "maximize" else "min"

    def make(cell_id: str):
        p = planning.pruning_for(plan, cell_id)  # in evaluations: one Tune iteration per evaluation
        if p.type == "asha":
            return ASHAScheduler(time_attr="training_iteration", metric="objective", mode=mode,
                                 max_t=p.n_evals + 1, grace_period=min(p.min_evals, p.n_evals + 1),
                                 reduction_factor=p.reduction_factor)
        if p.type == "median":
            return MedianStoppingRule(time_attr="training_iteration", metric="objective", mode=mode,
                                      grace_period=max(1, p.warmup_evals),
                                      min_samples_required=max(1, p.n_startup_trials),
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
            return f"per-cell {plan.pruning.type} pruning over {len(self.by_cell)} cells"

    return PerCellScheduler()


def _prepare_env(address: Optional[str]) -> None:
    from uwbench import env

    env.apply()
    os.environ.pop("MLFLOW_EXPERIMENT_ID", None)  # Ray's MLflow helpers would prefer it
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no tables; our progress line instead
    os.environ.setdefault("RAY_CHDIR_TO_TRIAL_DIR", "0")  # relative data paths keep working in trials
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    host = (address or "127.0.0.1").rsplit(":", 1)[0].replace("ray://", "")
    if address is None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local cluster of our own
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
                    "with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 the client needs it too.")
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



# ---------------------------------------------------------------------------------------------
# The record (MLflow) and the engine
# ---------------------------------------------------------------------------------------------


def _records(plan: Plan, experiment_id: str, uri: str) -> List[common.Record]:
    """This sweep's ended child runs, from MLflow."""
    from uwbench.tracking.mlflow import find_runs

    objective = plan.objective.as_metric
    test_key, eval_key = objective.at("test").key, objective.at("best_eval").key
    out = []
    for r in find_runs(experiment_id, _children_filter(plan), uri):
        tags = r["tags"]
        status = tags.get("status")
        if tags.get("role") not in ("trial", "final") or status not in common.TERMINAL:
            continue
        if r["status"] == "RUNNING" or (r["status"] == "KILLED" and status != "pruned"):
            continue  # an interrupted run that a retry will re-open
        params = json.loads(tags.get("search_params") or "{}")
        finished = status == "finished"
        values = common.recorded_values(plan, r["metrics"], tags) if finished else None
        out.append(common.Record(
            cell=tags.get("cell"), role=tags["role"], status=status,
            value=r["metrics"].get(plan.objective.run_metric) if finished else None,
            test=r["metrics"].get(test_key) if finished else None,
            eval=r["metrics"].get(eval_key) if finished else None,
            params=params, seed=int(tags["seed"]) if tags.get("seed", "").lstrip("-").isdigit() else None,
            number=int(tags.get("trial_number", -1)), error=tags.get("error"), values=values))
    return out


def _members(trial) -> int:
    """The runs a Tune trial trains (a population's members, else 1): what the progress line counts."""
    return len((trial.config or {}).get("_members") or [None])


def _progress_callback(engine: "Backend", tick):
    from ray import tune

    class ProgressCallback(tune.Callback):
        def __getstate__(self):  # Tune saves its callbacks with the experiment; the progress line stays here
            return {}

        def on_trial_start(self, iteration, trials, trial, **info):
            engine.running += _members(trial)
            tick()

        def on_trial_recover(self, iteration, trials, trial, **info):  # its actor or node died: retried
            engine.retries += 1
            engine.note(f"trial {trial.trial_id} lost its worker or node; retrying it (it resumes its MLflow run "
                        "from its checkpoint)")

        def on_trial_complete(self, iteration, trials, trial, **info):
            engine.running = max(0, engine.running - _members(trial))
            tick()

        def on_trial_error(self, iteration, trials, trial, **info):
            engine.running = max(0, engine.running - _members(trial))
            tick()

    return ProgressCallback()


def _fault_of(error: BaseException) -> Optional[str]:
    """The fault of the machine a Ray trial's error carries (Ray wraps the trial's exception, or only its
    text), or None."""
    import re

    found = errors.fault(getattr(error, "cause", None) or error)
    if found is None:
        line = re.search(r"MachineFault: ([^\n]+)", str(error))
        found = line.group(1) if line else None
    return found


class Backend:
    name = "ray"

    def __init__(self, plan: Plan, options: planning.Options):
        if options.workers is not None and options.workers < 1:
            raise common.SweepError(f"the ray backend needs `--workers >= 1` (concurrent trials), got "
                                    f"{options.workers}")
        if options.max_retries < 0:
            raise common.SweepError(f"--max-retries must be >= 0, got {options.max_retries}")
        self.plan, self.options = plan, options
        self.running = 0
        self.retries = 0
        self.ctx: Optional[planning.Context] = None
        if plan.mode == "tuned":  # the searchers' storage: refused (or a torn journal repaired) before any run exists
            from uwbench.sweeps.storage import make_storage, storage_url

            make_storage(storage_url(plan, options.storage))
        _prepare_env(options.ray_address)

    @staticmethod
    def note(line: str) -> None:
        import sys

        print(line, file=sys.stderr, flush=True)

    def open(self, ctx: planning.Context) -> str:
        self.ctx = ctx
        if self.options.ray_address and ctx.uri.startswith("sqlite:///"):
            self.note(f"note: trials on other machines of the cluster cannot reach {ctx.uri}; give --tracking-uri "
                      "http://<mlflow server> for a multi-machine cluster")
        return f"Ray {self.options.ray_address or 'local'}"

    def recover(self) -> int:
        """Delete search-trial runs a killed sweep left RUNNING (the searcher numbers new trials afresh);
        final runs left RUNNING are resumed by their job key."""
        from uwbench.tracking.mlflow import delete_run, find_runs

        n = 0
        for r in find_runs(self.ctx.experiment_id, _children_filter(self.plan) + " and attributes.status = 'RUNNING'",
                           self.ctx.uri):
            role = r["tags"].get("role")
            if role == "trial":
                delete_run(r["run_id"], self.ctx.uri)
            n += role in ("trial", "final")  # a cell's parent run is RUNNING for the whole sweep: not a run of it
        return n

    def records(self):
        return _records(self.plan, self.ctx.experiment_id, self.ctx.uri), self.running

    def recorded_in(self) -> Optional[str]:
        """Its records are MLflow's own: they never disagree with the store."""
        return None

    def run(self, tick) -> None:
        from uwbench.env import runs_dir
        from uwbench.sweeps.storage import make_storage, storage_url

        plan, options = self.plan, self.options
        ray = _init_ray(options.ray_address, options.workers)
        from ray import tune

        resources_all = ray.cluster_resources()
        frac = gpu_fraction(options.gpus_per_trial, resources_all.get("GPU", 0.0), resources_all)
        resources = {"cpu": 1, "gpu": frac} if frac > 0 else {"cpu": 1}
        concurrency = options.workers or max(1, int(resources_all.get("CPU", 1)))
        opt_storage = make_storage(storage_url(plan, options.storage)) if plan.mode == "tuned" else None
        records, _ = self.records()
        limit = planning.population_limit(planning.population_setting(plan, options), "cuda" if frac > 0 else "cpu")
        searcher = _study_searcher(plan, records, opt_storage, limit)
        ctx = {"context": self.ctx, "device": "cuda" if frac > 0 else None}
        stamp = time.strftime("%Y%m%d-%H%M%S")
        tuner = tune.Tuner(
            tune.with_resources(tune.with_parameters(_trainable, ctx=ctx), resources),
            tune_config=tune.TuneConfig(search_alg=searcher, scheduler=_per_cell_scheduler(plan), num_samples=-1,
                                        max_concurrent_trials=concurrency, reuse_actors=True,
                                        trial_dirname_creator=lambda t: f"trial_{t.trial_id}"),
            run_config=tune.RunConfig(name=f"{plan.id}.{plan.profile}.{stamp}",
                                      storage_path=os.path.join(runs_dir(), "ray"), verbose=0,
                                      failure_config=tune.FailureConfig(max_failures=options.max_retries),
                                      callbacks=[_progress_callback(self, tick)]))
        results = tuner.fit()
        tick()
        for error in getattr(results, "errors", None) or []:  # a trial that met a fault of the machine (retried
            fault = _fault_of(error)  # up to --max-retries): stop on it, its runs left to the same command
            if fault is not None:
                raise errors.MachineFault(fault)

    def close(self) -> None:
        import sys

        if "ray" in sys.modules:
            import ray

            if ray.is_initialized():
                ray.shutdown()
