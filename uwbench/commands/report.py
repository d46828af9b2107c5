"""`uwbench report`: the paper's tables and figures from recorded runs, into reports/<study>/."""
from __future__ import annotations

from uwbench.report import DEFAULT_OUT  # light: the package's __init__ imports nothing heavy
from uwbench.errors import UserError

HELP = "write a study's report (tables beside the paper's values, figures, HTML) from MLflow or runs.csv"


def add_arguments(p) -> None:
    p.add_argument("studies", nargs="*", metavar="STUDY.yaml", help="study files (e.g. studies/quickstart.yaml)")
    p.add_argument("--all", action="store_true",
                   help="every study in --studies-dir that has runs (in MLflow, else its committed runs.csv)")
    p.add_argument("--from-csv", metavar="RUNS_CSV",
                   help="rebuild from a report's runs.csv snapshot, without MLflow (e.g. reports/quickstart/runs.csv); "
                        "written beside the snapshot, in its folder, unless --out is given")
    p.add_argument("--source", choices=("auto", "mlflow", "csv"), default="auto",
                   help="where the runs come from: auto = MLflow if it has the study's experiment, else runs.csv")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///runs/mlflow.db)")
    p.add_argument("--out", help=f"reports folder: the report goes to OUT/<study id>/ (default {DEFAULT_OUT}/; with "
                                 "--from-csv, the snapshot's own folder)")
    p.add_argument("--studies-dir", default="studies", help="where study files are (default studies/)")
    p.add_argument("--profile", help="report the runs of this profile (default: the study's default profile if it "
                                     "has runs at the current spec hash, else the first profile that has)")
    p.add_argument("--backend", choices=("optuna", "ray"),
                   help="for a study swept by both backends: whose runs to report (default: the one with more "
                        "finished final runs; the two are never pooled)")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="report the runs of a sweep made with these --set values (give the sweep's own; they are "
                        "part of its spec hash)")
    p.add_argument("--no-traces", action="store_true", help="skip the memory traces (no checkpoint is loaded)")
    p.add_argument("--force", action="store_true",
                   help="replace a report folder that holds a report of another profile (refused without it: "
                        "e.g. --profile cpu over Table 1's committed paper50 report; or write with --out DIR)")
    p.add_argument("--index-only", action="store_true",
                   help="rebuild no report: rewrite only the index (<out>/README.md) and the results block of the "
                        "README.md beside <out>, from the reports already there")


def run(args) -> int:
    """Write the reports; a figure or HTML page rebuilt the same (by ``uwbench.report.rendering.compare``'s rule:
    text byte for byte, figures by pixels within a tolerance) keeps its old bytes, so rebuilding unchanged
    runs on another machine leaves the committed reports untouched."""
    from uwbench.report.rendering import compare
    from uwbench.spec.plugins import import_plugins

    import_plugins()  # $UWBENCH_PLUGINS: extra tasks, models, writers, as in `uwbench sweep`
    if args.out is not None:
        from uwbench.paths import user_folder

        user_folder(args.out, "--out")  # never /, a system folder or the home folder itself
    with compare.unchanged_kept(**_written_under(args)) as kept:
        code = _write(args)
    if kept:
        print(f"{len(kept)} figure(s) or page(s) drawn the same within the figure tolerance: kept their bytes")
    return code


def _written_under(args) -> dict:
    """Where the command writes (``compare.unchanged_kept``'s arguments): the report folders under ``--out``
    (default reports/), or the snapshot's own folder for ``--from-csv`` without ``--out``."""
    import os

    if args.from_csv and args.out is None:
        folder = os.path.dirname(os.path.abspath(args.from_csv))
        return {"root": os.path.dirname(folder), "folders": [folder]}
    return {"root": DEFAULT_OUT if args.out is None else args.out}


def _write(args) -> int:
    import glob
    import os
    import sys

    from uwbench.commands.sweep import overrides
    from uwbench.report import report_from_csv, report_study
    from uwbench.report.rendering import index as index_mod

    if args.index_only:
        if args.studies or args.all or args.from_csv or args.assignments:
            raise UserError("--index-only rebuilds no report: give no study files, no --all, --from-csv or --set")
        print(f"index: {index_mod.write_index(DEFAULT_OUT if args.out is None else args.out, args.studies_dir)}")
        return 0
    if args.from_csv:
        if args.studies or args.all or args.assignments:
            raise UserError("--from-csv rebuilds one report: give no study files, no --all and no --set with it")
        rep = report_from_csv(args.from_csv, out=args.out, studies_dir=args.studies_dir, force=args.force)
        _print(rep)
        return 0
    args.out = DEFAULT_OUT if args.out is None else args.out
    index_mod.check_index(args.out)  # before any report is written: the index goes there last
    paths = list(args.studies)
    if args.all:
        paths += sorted(glob.glob(os.path.join(args.studies_dir, "*.yaml")))
    if not paths:
        raise UserError("give study files (e.g. `uwbench report studies/quickstart.yaml`), --all, or --from-csv")
    from uwbench.leaderboard import steps as lb
    from uwbench.snapshot.folders import is_board_folder
    from uwbench import spec as spec_mod
    from uwbench.report.data.guard import ProfileClashError
    from uwbench.tracking import mlflow as tracking

    paths = list(dict.fromkeys(paths))
    done, refused = 0, []
    for path in paths:
        if args.all and path not in args.studies:
            try:
                sid = spec_mod.load(path).id
            except spec_mod.SpecError as exc:
                print(f"skipped {path}: {exc}")
                continue
            if os.path.abspath(path) == os.path.abspath(lb.SUITE) or is_board_folder(os.path.join(args.out, sid)):
                print(f"{sid}: the leaderboard's suite: `uwbench leaderboard --rebuild` writes its board")
                continue
            has_csv = os.path.exists(os.path.join(args.out, sid, "runs.csv"))
            in_mlflow = args.source != "csv" and tracking.experiment_exists(sid, args.tracking_uri)
            if not (has_csv or in_mlflow):
                print(f"{sid}: not run (no MLflow experiment, no {os.path.join(args.out, sid, 'runs.csv')})")
                continue
        try:
            rep = report_study(path, tracking_uri=args.tracking_uri, out=args.out, source=args.source,
                               traces=not args.no_traces, studies_dir=args.studies_dir, index=False,
                               profile=args.profile, backend=args.backend, overrides=overrides(args.assignments),
                               force=args.force)
        except ProfileClashError as exc:
            if len(paths) == 1:
                raise
            print(f"uwbench report: error: {exc}", file=sys.stderr)
            refused.append(path)
            continue
        _print(rep)
        done += 1
    index = index_mod.write_index(args.out, args.studies_dir)
    print(f"index: {index} ({done} report(s) written)")
    if refused:
        print(f"{len(refused)} report(s) not written: a report of another profile is in their folder "
              "(--out DIR or --force)", file=sys.stderr)
        return 2
    return 0


def _print(rep) -> None:
    import os

    n_run = int((rep.summary["state"] == "ok").sum())
    print(f"{rep.study.id}: {n_run}/{len(rep.summary)} cells run, status: {rep.status}")
    print(f"  {os.path.join(rep.folder, 'README.md')}  (open {os.path.join(rep.folder, 'report.html')} in a browser)")
