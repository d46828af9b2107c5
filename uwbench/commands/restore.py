"""`uwbench restore`: put a committed report's finished runs back into the MLflow store and the Optuna storage,
so that `uwbench sweep` on a machine that never held them resumes from them (``uwbench.sweeps.restore``)."""
from __future__ import annotations

HELP = ("put a report's finished runs (its runs.csv, curves.csv, traces.csv) back into MLflow and the Optuna "
        "storage, so a sweep on another machine resumes from them")


def add_arguments(p) -> None:
    p.add_argument("study", metavar="STUDY.yaml", help="the study file the report was made from")
    p.add_argument("--from", dest="folder", metavar="REPORT_DIR",
                   help="the report folder whose snapshot to restore (default reports/<study id>)")
    p.add_argument("--profile", help="the profile the runs were swept with (default: the study's default_profile)")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="the --set values the runs were swept with (repeatable)")
    p.add_argument("--cells", action="append", metavar="PATTERN", help="restore only these cells (glob, repeatable)")
    p.add_argument("--tracking-uri", help="the MLflow store the sweep will record in (default sqlite:///runs/mlflow.db)")
    p.add_argument("--storage", help="the Optuna storage the sweep will use (default runs/optuna/<study>.journal)")
    p.add_argument("--experiment", help="MLflow experiment name (default: the study id)")


def run(args) -> int:
    import os

    import optuna

    from uwbench.commands.sweep import overrides
    from uwbench.spec import load_plan
    from uwbench.sweeps.restore import restore

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    plan = load_plan(args.study, args.profile, overrides=overrides(args.assignments), cells=args.cells)
    folder = args.folder or os.path.join("reports", plan.id)
    print(f"restoring study {plan.id} (profile {plan.profile}, spec hash {plan.spec_hash}) from {folder}")
    result = restore(plan, folder, uri=args.tracking_uri, experiment=args.experiment, storage=args.storage)
    summary, *left_out = result.lines()
    print("\n".join(left_out + [summary]))
    if not result.written and not result.present:
        print(f"nothing restored: {folder} holds no finished final run of this run set")
    print(f"resume with: uwbench sweep {args.study}" + (f" --profile {args.profile}" if args.profile else "")
          + "".join(f" --set {a}" for a in args.assignments)
          + (f" --tracking-uri {args.tracking_uri}" if args.tracking_uri else "")
          + (f" --storage {args.storage}" if args.storage else ""))
    return 0
