"""Estimated CPU-core hours of each study's ``paper`` profile: eager, and on the default path.

    PYTHONPATH=. python benchmarks/paper_hours.py [--json PATH] [--measured reports/*/runs.csv]

With ``--measured``, the cost of a step on a run that does not take the native path is taken from the
given report snapshots instead:
per model and writer, the median of ``mean_seconds_per_100 / (100 x steps per sequence)`` over their
finished runs on the synthetic tasks (whose steps per sequence follow from T alone), at the lengths those
runs had (compiled where ``auto`` compiled them); the eager column keeps the constants below.

A rough model from the per-step costs measured on the 2-core CPU machine (benchmarks/README.md), at
one thread per run (one core each): one update costs ``steps per sequence x per-step cost`` (forward +
loss + backward, DNC and NTM 2.5 ms eager and 1.5 ms compiled per step, on the native path
``NATIVE_STEP_S``, the LSTM baseline 1.1 ms), every ``eval_every`` updates ``eval_batches`` forward
passes of a third of an update each (on the run's path where it is native, else eager), plus the
final test (not counted) and, for a compiled run, ``COMPILE_SECONDS`` of compilation. The default path
is the one ``uwbench train`` takes (training/compile_policy.py): native for the DNC and NTM with the
controllers the kernels implement, otherwise ``train.compile=auto``'s choice (the pixel studies' GRU). The
per-step costs were measured at the paper's sizes (batch 64, H = 100, N = 4, W = 64); wider
controllers, larger batches and bigger memories cost more per step, so the figures are a lower bound
for Table 3, whose memories are larger (N up to 60). Document classification (Table 4) has
variable lengths and needs its data to estimate; without the data its cells are left out.
"""
from __future__ import annotations

import argparse
import glob
import sys

EAGER_STEP_S = {"dnc": 2.5e-3, "ntm": 2.5e-3, "lstm": 1.1e-3}
COMPILED_STEP_S = {"dnc": 1.5e-3, "ntm": 1.5e-3}
# the native path: a round figure near the 2026-11-25 headline (0.80 and 0.81 ms per step, copy T = 50: ms per
# iteration / 102 steps; benchmarks/results/2026-11-25-native-headline-writers-trainer.json), not re-measured since
NATIVE_STEP_S = {"dnc": 0.81e-3, "ntm": 0.83e-3}
EVAL_FRACTION = 1 / 3  # a no-grad forward pass against forward + backward
# Tasks whose data may be missing here, with their fixed sequence length: 784 pixels and the class.
FIXED_STEPS = {"pixel_mnist": 785, "pixel_mnist_permuted": 785}


def seq_steps(task_name: str, task_cfg) -> int | None:
    import torch

    from uwbench.registry import TASKS

    try:
        task = TASKS.get(task_name)(task_cfg)
        probe = task.sample(1, torch.Generator().manual_seed(0))
        return int(probe.inputs.shape[1] + probe.decoder_inputs.shape[1])
    except Exception:  # noqa: BLE001 - a task that needs a dataset that is not here
        return FIXED_STEPS.get(task_name)


SYNTHETIC = ("copy", "reverse", "double", "add", "max")


def measured_step_costs(paths) -> dict:
    """{(model, writer): seconds per sequence step} from report snapshots (see the module doc)."""
    import statistics

    import pandas as pd

    from uwbench.registry import TASKS

    samples: dict = {}
    for path in paths:
        runs = pd.read_csv(path)
        runs = runs[(runs["status"] == "finished") & runs["mean_seconds_per_100"].notna() & runs["task"].isin(SYNTHETIC)]
        for _, r in runs.iterrows():
            cfg = TASKS.build_config(r["task"], {"seq_len": int(r["seq_len"])})
            steps = seq_steps(r["task"], cfg)
            writer = r["writer"] if isinstance(r["writer"], str) else "none"
            samples.setdefault((r["model"], writer), []).append(float(r["mean_seconds_per_100"]) / 100 / steps)
    return {k: statistics.median(v) for k, v in samples.items()}


def estimate(path: str, measured: dict | None = None):
    from uwbench.models.mann import MANN
    from uwbench.native.parts import declaration
    from uwbench.registry import CONTROLLERS

    # the controllers whose class declares a native kernel (uwbench/native/parts.py)
    NATIVE_CONTROLLERS = {name for name in CONTROLLERS.names() if declaration(CONTROLLERS.get(name)(1, 1)) is not None}
    from uwbench.spec import load_plan
    from uwbench.training.compile_policy import should_compile
    from uwbench.training.compile_policy import COMPILE_SECONDS
    from uwbench.training.config import resolve_run

    plan = load_plan(path, "paper")
    per_cell = plan.runs_per_cell()
    eager = auto = 0.0
    missing = []
    for cell in plan.cells:
        run = resolve_run(cell.config)
        steps = seq_steps(run.task_name, run.task_cfg)
        if steps is None:
            missing.append(cell.id)
            continue
        tc = run.train
        model = run.model_name if run.model_name in EAGER_STEP_S else "dnc"
        evals = (tc.steps // tc.eval_every) * tc.eval_batches * steps * EAGER_STEP_S[model] * EVAL_FRACTION
        e = tc.steps * steps * EAGER_STEP_S[model] + evals
        native = (run.model_name in NATIVE_STEP_S and tc.native is not False and tc.compile is not True
                  and getattr(run.model_cfg, "controller", None) in NATIVE_CONTROLLERS)
        saving = MANN.compiled_step_saving if model in COMPILED_STEP_S else 0.0
        compiled = not native and should_compile(tc.compile, saving, tc.steps, steps)
        step_s = (measured or {}).get((run.model_name, getattr(run.model_cfg, "writer", "none")))
        if native:
            a = (tc.steps * steps * NATIVE_STEP_S[model]
                 + evals * NATIVE_STEP_S[model] / EAGER_STEP_S[model])
        elif step_s is not None:
            a = tc.steps * steps * step_s + evals + (COMPILE_SECONDS if compiled else 0.0)
        elif compiled:
            a = tc.steps * steps * COMPILED_STEP_S[model] + evals + COMPILE_SECONDS
        else:
            a = e
        eager += e * per_cell
        auto += a * per_cell
    return {"study": plan.spec.id, "cells": len(plan.cells), "runs": plan.n_runs(),
            "eager_core_hours": round(eager / 3600, 1), "auto_core_hours": round(auto / 3600, 1),
            "cells_without_data": missing}


def main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--measured", nargs="+", metavar="RUNS_CSV", help="report snapshots to take the step costs from")
    args = p.parse_args(argv)
    measured = measured_step_costs(args.measured) if args.measured else None
    if measured:
        print("measured seconds per sequence step (default path): " + ", ".join(
            f"{m}/{w} {v * 1e3:.2f} ms" for (m, w), v in sorted(measured.items())))
    rows = [estimate(path, measured) for path in sorted(glob.glob("studies/*.yaml"))]
    print("| study | cells | runs | eager core-hours | default (auto) core-hours |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        note = f" ({len(r['cells_without_data'])} cells without data left out)" if r["cells_without_data"] else ""
        print(f"| {r['study']}{note} | {r['cells']} | {r['runs']} | {r['eager_core_hours']} | {r['auto_core_hours']} |")
    if args.json:
        from uwbench.bench.sections import write_json

        write_json(rows, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
