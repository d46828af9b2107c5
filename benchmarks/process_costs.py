"""What a sweep's fixed costs were before and after they were cut (docs/speed.md, "What a sweep spends
besides training"), each measured in fresh processes:

    python benchmarks/process_costs.py --repeats 5 --out benchmarks/results/<date>-process-costs.json

- ``store``: opening a new local MLflow store, by MLflow's own migrations of an empty file against
  uwbench's copy of its once-migrated empty store (``uwbench.tracking.mlflow.resolve_uri``), each in a process
  that has imported MLflow already;
- ``exit``: a process that has imported torch and MLflow, from its last statement to the moment its parent
  sees it gone, ending with ``sys.exit`` (the interpreter's teardown) against ``uwbench.shutdown.exit_now``.

Per case: every repeat's seconds and their median. It writes the JSON to ``--out`` (and prints it). Nothing
here is a test: the figures depend on the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

STORE = """
import sys, time
import mlflow
from mlflow import MlflowClient
from uwbench.tracking import mlflow as tracking
path, how = sys.argv[1], sys.argv[2]
t = time.perf_counter()
if how == "migrate":
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments(max_results=1)
else:
    tracking.resolve_uri(f"sqlite:///{path}")
print(time.perf_counter() - t)
"""

EXIT = """
import sys, time
import torch, mlflow
from uwbench.shutdown import exit_now
print(time.time(), flush=True)
if sys.argv[1] == "sys.exit":
    sys.exit(0)
exit_now(0)
"""


def _store(how: str, env) -> float:
    folder = tempfile.mkdtemp(prefix="process-costs-")
    out = subprocess.run([sys.executable, "-c", STORE, os.path.join(folder, "mlflow.db"), how], env=env,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _exit(how: str, env) -> float:
    proc = subprocess.Popen([sys.executable, "-c", EXIT, how], env=env, stdout=subprocess.PIPE, text=True)
    last = float(proc.stdout.readline())
    proc.wait()
    return time.time() - last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", help="write the JSON here")
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="process-costs-cache-")
    env = dict(os.environ, XDG_CACHE_HOME=cache, MLFLOW_DISABLE_TELEMETRY="true")
    _store("copy", env)  # makes the template once: what every later new store copies
    cases = {("store", "migrate"): _store, ("store", "copy"): _store,
             ("exit", "sys.exit"): _exit, ("exit", "exit_now"): _exit}
    results = {}
    for _ in range(args.repeats):  # the cases take turns, so a change in the machine's load falls on all
        for (kind, how), fn in cases.items():
            results.setdefault(kind, {}).setdefault(how, []).append(round(fn(how, env), 4))
    summary = {kind: {how: {"seconds": v, "median_s": round(statistics.median(v), 4)} for how, v in hows.items()}
               for kind, hows in results.items()}
    report = {"date": time.strftime("%Y-%m-%d"), "command": " ".join(["python", *sys.argv]),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "load_average": [round(x, 2) for x in os.getloadavg()]},
              "results": summary}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
