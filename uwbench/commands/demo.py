"""`uwbench demo` (what `make demo` runs): the quickstart study swept with the Optuna backend on its
default profile (cpu: regular, uniform and cached uniform writing over memory sizes D, so over
compression ratios (D+1)/T; 48 runs, whose CPU time is the Compute line of reports/quickstart/README.md),
recorded in MLflow, then its report under reports/quickstart/ and how to look at both."""
from __future__ import annotations

import os

HELP = "run the demo: the quickstart study (Optuna, cpu profile) into MLflow, then its report (what `make demo` runs)"

QUICKSTART = os.path.join("studies", "quickstart.yaml")
EXPERIMENT = "quickstart"  # the quickstart study's id, its MLflow experiment


def add_arguments(p) -> None:
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///runs/mlflow.db)")
    p.add_argument("--profile", help="quickstart profile (default: its default profile, cpu)")
    p.add_argument("--workers", type=int, help="worker processes (default: 2, or 1 on a 1-core machine)")
    p.add_argument("--no-progress", action="store_true", help="no live progress line")


def _study_path() -> str:
    if os.path.exists(QUICKSTART):
        return QUICKSTART
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(here, QUICKSTART)


def demo_steps(args):
    """The demo as (title, step) pairs; each step returns an exit code. A step added here runs in order."""
    from uwbench.commands import report as report_cmd
    from uwbench.commands import sweep as sweep_cmd

    study = _study_path()
    workers = args.workers if args.workers is not None else min(2, os.cpu_count() or 1)
    argv = [study, "--backend", "optuna", "--workers", str(workers)]
    if args.profile:
        argv += ["--profile", args.profile]
    if args.tracking_uri:
        argv += ["--tracking-uri", args.tracking_uri]
    if args.no_progress:
        argv.append("--no-progress")
    steps = [("sweep the quickstart study", lambda: _call(sweep_cmd, argv))]
    report_argv = [study] + (["--tracking-uri", args.tracking_uri] if args.tracking_uri else [])
    if args.profile:
        report_argv += ["--profile", args.profile]
    steps.append(("write its report", lambda: _call(report_cmd, report_argv)))
    return steps


def _call(command_module, argv) -> int:
    import argparse

    p = argparse.ArgumentParser()
    command_module.add_arguments(p)
    return int(command_module.run(p.parse_args(argv)) or 0)


def run(args) -> int:
    for title, step in demo_steps(args):
        print(f"== {title}")
        code = step()
        if code:
            return code
    uri = args.tracking_uri or "sqlite:///runs/mlflow.db"
    print(f"\nThe runs are in MLflow ({uri}), experiment '{EXPERIMENT}': one parent run per cell, its trials "
          "and final runs nested under it.")
    print("The report is in reports/quickstart/: README.md (tables and figures), report.html (open it in a "
          "browser), runs.csv (the MLflow rows it used). Its accuracy_vs_ratio.png draws test accuracy "
          "against the compression ratio (D+1)/T, a curve per writer; time_reduction.png the training time "
          "saved against regular writing at each D.")
    from uwbench.tracking.ui import link_line

    print(link_line(EXPERIMENT, tracking_uri=args.tracking_uri))
    print("In its runs table, expand a cell to see its runs; filter with tags.role = 'final'; add columns "
          "(writer, memory_size, cache_size, lr, clip, test_accuracy, mean_seconds_per_100) from the "
          "Columns menu (docs/usage.md, \"The MLflow UI\").")
    return 0
