"""`uwbench train` with several runs as populations: the runs are opened (or found again), trained by
``training.population``, and printed one line each.

A population's members carry four tags beside a solo run's: ``population`` (this population's id),
``population_key`` (the command's settings for it: ``population.population_key``), ``population_size``
and ``population_member`` (the member's place). The same command finds the latest population with its
key that has an unfinished member (RUNNING after a kill, or interrupted with its checkpoint kept) and
resumes it: finished members are printed, not trained again; a member that diverged or was pruned stays
as it ended. With no unfinished population, the command trains a new one.
"""
from __future__ import annotations

import uuid
from typing import Dict, List, Optional

SETTLED = "settled"  # a member that ended for good (finished, diverged, pruned): not trained again


def train_populations(configs: List[dict], resolved: list, k: int, args) -> int:
    """Train ``configs`` in populations of at most ``k`` members; the exit code (1 if any member failed)."""
    codes = []
    for start in range(0, len(configs), k):
        codes.append(_one(configs[start:start + k], resolved[start:start + k], args, len(configs)))
    return max(codes)


def _one(configs: List[dict], resolved: list, args, total: int) -> int:
    from uwbench import axes
    from uwbench.tracking.mlflow import Run, git_sha
    from uwbench.tracking.ui import link_line
    from uwbench.training.population import population_key, train_population

    key = population_key(configs, args.experiment)
    found = _unfinished(key, len(configs), args)
    pid, previous, ended = found if found else (uuid.uuid4().hex[:12], {}, {})
    runs: List[Optional[Run]] = []
    for i, (config, r) in enumerate(zip(configs, resolved)):
        old = previous.get(i)
        if old == SETTLED:
            runs.append(None)
        elif old is not None:
            runs.append(Run(args.experiment, uri=args.tracking_uri, run_id=old))
        else:
            tags = {**axes.run_tags(r.as_dict()), "git_sha": git_sha(), "role": "single",
                    "population": pid, "population_key": key, "population_member": i,
                    "population_size": len(configs)}
            runs.append(Run(args.experiment, run_name=run_name(args, r, tags, total), tags=tags, uri=args.tracking_uri))
    todo = [i for i, run in enumerate(runs) if run is not None]
    if found:
        print(f"resuming population {pid}: {len(todo)} of {len(configs)} members unfinished")
    results = [None] * len(configs)
    if todo:
        trained = train_population([configs[i] for i in todo], [runs[i] for i in todo], progress=not args.no_progress,
                                   checkpoint_dir=args.checkpoint_dir,
                                   system_metrics=False if args.no_system_metrics else None,
                                   tags={"population": pid, "population_key": key,
                                         "population_size": len(configs)})
        for i, result in zip(todo, trained):
            results[i] = result
    failed = False
    for i, r in enumerate(resolved):
        tc = r.train
        label = f"seed {tc.seed}, lr {tc.lr:g}, clip {tc.clip:g} ({tc.clip_mode})"
        result = results[i]
        if result is None:
            print(f"{label}: ended before this command (MLflow run {ended.get(i, '?')})")
            continue
        if result.status == "finished":
            print(f"{label}: test {result.metric} {result.test:.4f} (best eval {result.best_eval:.4f} at update "
                  f"{result.best_step}; {result.seconds_per_100:.2f} s per 100 updates as a member of {len(todo)} on "
                  f"the {result.path} path); MLflow run {result.run_id}")
        else:
            failed = True
            print(f"{label}: {result.status.upper()}: {result.error}; MLflow run {result.run_id}")
    uri = runs[todo[0]].uri if todo else args.tracking_uri
    print(f"population {pid} (experiment {args.experiment!r}, {uri})")
    if todo:
        print(link_line(args.experiment, runs[todo[0]].experiment_id, args.tracking_uri))
    return 1 if failed else 0


def run_name(args, resolved, tags, n: int) -> str:
    """A run's MLflow name: --run-name, or model-writer-task-seed (with lr and clip when several runs)."""
    if args.run_name and n == 1:
        return args.run_name
    tc = resolved.train
    name = f"{resolved.model_name}-{tags['writer']}-{resolved.task_name}-s{tc.seed}"
    if n > 1:
        name += f"-lr{tc.lr:g}-clip{tc.clip:g}"
        if args.run_name:
            name = f"{args.run_name}-{name}"
    return name


def _unfinished(key: str, size: int, args):
    """The latest population with this key that has an unfinished member: (its id, member -> run id to
    resume or ``SETTLED``, member -> run id of the settled ones), or None."""
    from uwbench.tracking.mlflow import client, find_runs
    from uwbench.training.checkpoint import status

    exp = client(args.tracking_uri).get_experiment_by_name(args.experiment)
    if exp is None:
        return None
    rows = find_runs(exp.experiment_id, f"tags.population_key = '{key}'", uri=args.tracking_uri)
    by_pop: Dict[str, list] = {}
    for row in rows:
        by_pop.setdefault(row["tags"].get("population", ""), []).append(row)
    for pid, members in sorted(by_pop.items(), key=lambda kv: -max(r["start_time"] or 0 for r in kv[1])):
        plan: Dict[int, str] = {}
        ended: Dict[int, str] = {}
        open_members = 0
        for row in members:
            try:
                i = int(row["tags"].get("population_member", ""))
            except ValueError:
                continue
            ckpt = status(row["run_id"], args.checkpoint_dir)
            if row["status"] == "FINISHED" or (row["status"] in ("FAILED", "KILLED") and ckpt != "resumable"):
                plan[i] = SETTLED
                ended[i] = row["run_id"]
            else:  # RUNNING (a killed process) or interrupted with its checkpoint
                plan[i] = row["run_id"]
                open_members += 1
        if open_members:
            return pid, plan, ended
    return None
