"""A sweep with populations against the same sweep with ``--population off``, side by side in one run.

    python benchmarks/population_sweep.py --out benchmarks/results/<date>-population-sweep.json
    python benchmarks/population_sweep.py --study studies/quickstart.yaml --profile cpu --workers 2 --repeats 1

Each side runs ``uwbench sweep STUDY --profile P --workers N --population SETTING --no-progress`` in a fresh
folder (its own ``UWBENCH_RUNS_DIR`` and SQLite MLflow store), the sides taking turns (auto, off, auto, ...)
so that a change in the machine's load falls on both. Per side it records:

- ``wall_s``: the command's wall time; ``cpu_s``: the user + system CPU time of the command and its children;
- ``train_s``: the runs' own training time summed (each run's ``train_seconds``: its updates, warm-up
  included; a population member's is its share of the population's time), and ``training_share``:
  ``train_s / (wall_s * cores)``, the share of the cores' time that went to training, with ``cores`` the
  sweep's ``--workers``;
- per cell: the best objective of its search trials and the mean test value of its final runs, and the
  number of search trials pruned (a population's members report together, so the median pruner has fewer
  finished trials to compare with);
- ``first_run_after_s``: from the command's start to its first run's (the set-up before any training), and
  ``after_last_run_s``: from its last run's end to the command's;
- the machine's load average before and after, so a reader can tell a quiet machine from a busy one.

With ``--time-limit S`` each side is a bounded look instead: the sweep is stopped (SIGTERM, its runs end
interrupted, to resume later) after S seconds, and the side records the updates its runs did in that time
(each run's last logged update), ``member_updates_per_s``, and from it the hours the whole profile would
take at that rate (its planned runs x updates per run). For a GPU machine:

    python benchmarks/population_sweep.py --study studies/table1_memorization.yaml --profile paper50 \
        --workers 1 --settings auto --time-limit 300 --set train.device=cuda --out runs/paper50-gpu.json

It writes the JSON to ``--out`` (and prints it). Nothing here is a test: the figures depend on the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_side(study: str, profile: str, workers: int, setting: str, time_limit: float = 0.0,
             sets=()) -> Dict[str, Any]:
    """One sweep in a fresh folder: its times, and what its runs recorded (with ``time_limit``, stopped then)."""
    folder = tempfile.mkdtemp(prefix=f"popsweep-{setting}-")
    uri = f"sqlite:///{folder}/mlflow.db"
    env = dict(os.environ, UWBENCH_RUNS_DIR=folder, MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1")
    cmd = [sys.executable, "-m", "uwbench", "sweep", study, "--profile", profile, "--workers", str(workers),
           "--population", setting, "--no-progress", "--tracking-uri", uri, *[a for v in sets for a in ("--set", v)]]
    load0 = os.getloadavg()
    c0, t0 = _children_cpu(), time.perf_counter()
    if time_limit:
        import signal

        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            proc.communicate(timeout=time_limit)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)  # the sweep ends its runs as interrupted (the same command resumes)
            proc.communicate(timeout=300)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
        out = {"setting": setting, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "time_limit_s": time_limit,
               "load_average_before": [round(x, 2) for x in load0]}
        out.update(_rate(uri, study, profile, time_limit, sets))
        shutil.rmtree(folder, ignore_errors=True)
        return out
    began = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall, cpu, ended = time.perf_counter() - t0, _children_cpu() - c0, time.time()
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    out = {"setting": setting, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
           "load_average_before": [round(x, 2) for x in load0],
           "load_average_after": [round(x, 2) for x in os.getloadavg()]}
    out.update(_recorded(uri, study, profile, wall, workers, began, ended))
    shutil.rmtree(folder, ignore_errors=True)
    return out


def _recorded(uri: str, study: str, profile: str, wall: float, workers: int, began: float,
              ended: float) -> Dict[str, Any]:
    import mlflow
    import pandas as pd

    from uwbench.spec import load_plan

    plan = load_plan(study, profile)
    objective = plan.objective.as_metric
    best_key, test_key = f"metrics.{objective.at('best_eval').key}", f"metrics.{objective.at('test').key}"
    mlflow.set_tracking_uri(uri)
    df = mlflow.search_runs(experiment_names=[plan.id])
    if df.empty:
        raise SystemExit(f"no runs recorded in {uri}")
    df = df[df["tags.role"].isin(["trial", "final"])]
    train = float(pd.to_numeric(df.get("metrics.train_seconds"), errors="coerce").fillna(0).sum())
    cells = {}
    for cell, rows in df.groupby("tags.cell"):
        trials, finals = rows[rows["tags.role"] == "trial"], rows[rows["tags.role"] == "final"]
        best = pd.to_numeric(trials.get(best_key, pd.Series(dtype=float)), errors="coerce")
        best = best.max() if plan.objective.direction == "maximize" else best.min()
        test = pd.to_numeric(finals.get(test_key, pd.Series(dtype=float)), errors="coerce").mean()
        cells[cell] = {f"best_search_{objective.at('eval').key}": None if best != best else round(float(best), 4),
                       f"final_{objective.at('test').key}_mean": None if test != test else round(float(test), 4),
                       "search_trials_pruned": int((trials["tags.status"] == "pruned").sum()),
                       "populations": int(rows["tags.population"].nunique()) if "tags.population" in rows else 0}
    first = df["start_time"].min().timestamp()
    last = df["end_time"].max().timestamp()
    return {"runs": int(len(df)), "train_s": round(train, 2),
            "training_share": round(train / (wall * workers), 3),
            "first_run_after_s": round(first - began, 2), "after_last_run_s": round(ended - last, 2),
            "cells": cells}


def _rate(uri: str, study: str, profile: str, seconds: float, sets) -> Dict[str, Any]:
    """The updates a bounded sweep's runs did, per second, and the whole profile's hours at that rate."""
    from mlflow.tracking import MlflowClient

    from uwbench.spec import load_plan

    plan = load_plan(study, profile)
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(plan.id)
    updates, runs = 0, 0
    for r in client.search_runs([exp.experiment_id]) if exp else []:
        if r.data.tags.get("role") not in ("trial", "final"):
            continue
        history = client.get_metric_history(r.info.run_id, "train_loss")
        updates += max((m.step for m in history), default=0)
        runs += 1
    steps = {c.id: int((c.config.get("train") or {}).get("steps") or 0) for c in plan.cells}
    for v in sets:  # a --set train.steps=N applies to every cell
        if v.startswith("train.steps="):
            steps = {k: int(v.split("=", 1)[1]) for k in steps}
    per_run = sum(steps.values()) / max(1, len(steps))
    rate = updates / seconds
    total = plan.n_runs() * per_run
    return {"runs_started": runs, "updates_done": updates, "member_updates_per_s": round(rate, 2),
            "planned_runs": plan.n_runs(), "updates_per_run": per_run,
            "estimated_profile_hours": round(total / rate / 3600, 2) if rate else None,
            "note": "updates counted to each run's last evaluation (updates after it are not logged)"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", default=os.path.join(ROOT, "studies", "quickstart.yaml"))
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="sweeps per side (the sides take turns)")
    ap.add_argument("--settings", default="auto,off", help="the --population settings compared")
    ap.add_argument("--out", default=None, help="the JSON file written")
    ap.add_argument("--time-limit", type=float, default=0.0, help="stop each sweep after this many seconds")
    ap.add_argument("--set", action="append", default=[], help="a --set for the sweep (repeatable)")
    args = ap.parse_args(argv)
    sides = []
    for r in range(args.repeats):
        for setting in args.settings.split(","):
            side = run_side(args.study, args.profile, args.workers, setting, args.time_limit, args.set)
            side["repeat"] = r
            sides.append(side)
            print(f"{setting}: wall {side['wall_s']} s, training share {side.get('training_share')}, "
                  f"member-updates/s {side.get('member_updates_per_s')}", file=sys.stderr)
    import torch

    result = {"date": time.strftime("%Y-%m-%d"), "command": " ".join(["python benchmarks/population_sweep.py", *(argv or sys.argv[1:])]),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
              "study": os.path.relpath(args.study, ROOT), "profile": args.profile, "workers": args.workers,
              "sides": sides}
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
