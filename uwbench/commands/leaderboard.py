"""`uwbench leaderboard`: benchmark a plugin writer (or memory model) against the paper's writers on the
leaderboard suite, with significance and time, in one command (docs/extending.md, "The leaderboard")."""
from __future__ import annotations

from uwbench import errors
from uwbench.errors import UserError

HELP = "rank a plugin writer or memory model against regular, UW, CUW and RW writing on the leaderboard suite"


def add_arguments(p) -> None:
    from uwbench.leaderboard import steps as lb

    p.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_FILE",
                   help="the plugin that registers the writer or model: a module (mypkg.mywriter) or a .py file "
                        "(repeatable); also named in $UWBENCH_PLUGINS for the sweep's workers")
    p.add_argument("--writer", help="the writer to benchmark (default: regular, with --model)")
    p.add_argument("--model", help="the memory model to benchmark, or to run --writer on (default: dnc)")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="model.KEY=VALUE",
                   help="a setting of the writer or the model itself (repeatable), e.g. --set model.every=2")
    p.add_argument("--name", help="the new row's name (default: <model>_<writer>, or the model with regular writing)")
    p.add_argument("--profile", help="the suite's profile (default: its default_profile, cpu); the baselines "
                                     "must have been run with the same")
    p.add_argument("--workers", type=int, help="sweep worker processes (default 1; 0 runs in this process)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///runs/mlflow.db)")
    p.add_argument("--checkpoint-dir", help="where runs keep mid-run checkpoints (default <runs dir>/checkpoints)")
    p.add_argument("--no-system-metrics", action="store_true", help="do not sample CPU and memory into each run")
    p.add_argument("--no-progress", action="store_true", help="no live progress line")
    p.add_argument("--out", help="the new board's folder (default <runs dir>/leaderboard/<row>)")
    p.add_argument("--board", default=lb.BOARD_DIR,
                   help=f"the committed board: where the baselines come from, what --commit-row, --show, --rebuild "
                        f"and --record-baselines use (default {lb.BOARD_DIR})")
    p.add_argument("--suite", default=lb.SUITE, help=f"the suite's study file (default {lb.SUITE})")
    p.add_argument("--min-converged", type=float, default=None, metavar="SHARE",
                   help="with --record-baselines: the share of baseline cells that must have converged for the "
                        "board to be written (default: the rule of a committed board, uwbench.leaderboard.board."
                        "MIN_CONVERGED); "
                        "a lower one only to try the commands, e.g. at --profile smoke, where nothing converges")
    p.add_argument("--commit-row", action="store_true",
                   help="also add the new row's runs to the committed board's runs.csv and rebuild it there")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--show", action="store_true", help="print the committed board")
    mode.add_argument("--rebuild", action="store_true",
                      help="remake the committed board's files from its runs.csv and curves.csv (no MLflow)")
    mode.add_argument("--record-baselines", action="store_true",
                      help="take the suite's runs (a `uwbench sweep` of --suite) from MLflow into the committed "
                           "board, keeping its other rows; only runs.csv and curves.csv until every baseline run "
                           "is recorded (a sweep over several machines: `uwbench restore` on each new one)")


def run(args) -> int:
    if args.min_converged is not None:
        if not args.record_baselines:
            raise UserError("--min-converged applies to --record-baselines alone (the rule for writing the "
                             "baselines)")
        if not 0.0 <= args.min_converged <= 1.0:
            raise UserError(f"--min-converged {args.min_converged:g}: give a share between 0 and 1 (0.8 is 80%)")
    if args.show or args.rebuild or args.record_baselines:
        if args.writer or args.model or args.plugin:
            raise UserError("--show, --rebuild and --record-baselines take no --plugin, --writer or --model")
        return _show(args) if args.show else _rebuild(args) if args.rebuild else _record(args)
    if not (args.writer or args.model):
        raise UserError("give --writer NAME (with --plugin MODULE for a plugin) or --model NAME; or --show, "
                         "--rebuild, --record-baselines")
    return _benchmark(args)


def _show(args) -> int:
    import os

    path = os.path.join(args.board, "board.md")
    if not os.path.exists(path) and os.path.exists(os.path.join(args.board, "runs.csv")):
        raise errors.NotFoundError(_in_progress(args))
    if not os.path.exists(path):
        raise errors.NotFoundError(f"no board at {path}: build it by recording the baselines (`uwbench sweep "
                                f"{args.suite} --workers 2`, then `uwbench leaderboard --record-baselines`), or "
                                "point --board at a board folder")
    with open(path, encoding="utf-8") as f:
        print(f.read(), end="")
    return 0


def _rebuild(args) -> int:
    import os

    from uwbench.leaderboard import steps as lb

    snap = lb.read_board(args.board)
    if snap is not None and not os.path.exists(os.path.join(args.board, "board.md")):
        missing, total = lb.missing_runs(snap, args.suite, args.profile)
        if 0 < len(missing) < total:  # the suite's baselines part-recorded: the README block only, no board yet
            print(f"{args.board}: the baselines are being recorded ({total - len(missing)} of {total} runs): no "
                  "board to rebuild until every run is")
            _refresh_readme(args.board)
            return 0
    board, files = lb.rebuild(args.board)
    print(f"rebuilt {args.board} from its runs.csv: {len(board.rows)} rows, {len(files)} files")
    _refresh_readme(args.board)
    return 0


def _refresh_readme(folder: str) -> None:
    """The board block of the README beside the board folder's parent, rewritten from the folder's files."""
    from uwbench.leaderboard import readme as board_readme

    path = board_readme.refresh(folder)
    if path:
        print(f"rewrote the board block of {path}")


def _record(args) -> int:
    from uwbench.leaderboard import steps as lb

    snap = lb.study_snapshot(args.suite, args.profile, args.tracking_uri)
    if len(snap.runs) == 0:
        raise UserError(f"MLflow holds no run of {args.suite} at profile {args.profile or 'default'}: sweep it "
                         f"first (`uwbench sweep {args.suite} --workers 2`)")
    from uwbench.leaderboard.board import MIN_CONVERGED

    minimum = MIN_CONVERGED if args.min_converged is None else args.min_converged
    base = lb.read_board(args.board)
    lost = lb.unrestored(base, snap)
    if lost:
        cells = sorted({c for c, _ in lost})
        raise UserError(f"{args.board} records {len(lost)} baseline runs of this suite that this MLflow store lacks, "
                         f"in {len(cells)} cells ({_few(cells)}): recording would drop them. Put them back first "
                         f"(`uwbench restore {args.suite} --from {args.board}`, with the sweep's --profile and "
                         "--tracking-uri), then sweep the rest and record again")
    merged = lb.merge(base, snap)
    missing, total = lb.missing_runs(merged, args.suite, args.profile)
    if missing:  # the runs are kept, so no machine runs them again; the board waits for the rest
        lb.write_progress(merged, args.board, args.suite, args.profile, missing, total)
        cells = sorted({c for c, _ in missing})
        print(f"baselines in progress: {total - len(missing)} of {total} runs recorded into {args.board} (runs.csv, "
              f"curves.csv, {lb.PROGRESS_FILE}); {len(missing)} to run, in {len(cells)} cells ({_few(cells)}). The "
              f"board is written when every run is: on any machine, put them back (`uwbench restore {args.suite} --from {args.board}`), "
              f"sweep the rest (`uwbench sweep {args.suite} --workers 2`) and record again"
              + (f"; --min-converged {args.min_converged:g} applies then" if args.min_converged is not None else ""))
        _refresh_readme(args.board)
        return 0
    board, _ = lb.write_board(merged, args.board, min_converged=minimum)
    n = len(board.baseline_cells)
    print(f"baselines recorded into {args.board}: {len(board.rows)} rows; {n - len(board.unconverged)} of {n} "
          f"baseline cells converged, {len(board.counted)} of {len(board.positions)} columns counted")
    _refresh_readme(args.board)
    return 0


def _in_progress(args) -> str:
    """What a board folder whose baselines are still being recorded says (runs.csv, no board yet)."""
    from uwbench.leaderboard import steps as lb

    missing, total = lb.missing_runs(lb.read_board(args.board), args.suite, args.profile)
    return (f"no board at {args.board} yet: its baselines are being recorded, {total - len(missing)} of {total} runs "
            f"so far (runs.csv); the board is written when every run is: put them back (`uwbench restore {args.suite} "
            f"--from {args.board}`), sweep the rest (`uwbench sweep {args.suite} --workers 2`), then `uwbench "
            "leaderboard --record-baselines`")


def _few(names, n: int = 4) -> str:
    return ", ".join(names[:n]) + (f", ... ({len(names) - n} more)" if len(names) > n else "")


def _settings(assignments) -> dict:
    from uwbench.commands.sweep import overrides

    values = overrides(assignments)
    other = sorted(set(values) - {"model"})
    if other:
        raise UserError(f"--set {other[0]}.*: the leaderboard takes only the writer's or the model's own settings "
                         "(model.KEY=VALUE); the task and training settings are the suite's, for every row alike")
    return values.get("model", {})


def _benchmark(args) -> int:
    import os

    from uwbench.leaderboard import steps as lb
    from uwbench.spec.plugins import import_plugins
    from uwbench.leaderboard import contract

    for ref in args.plugin:
        lb.load_plugin(ref)
    import_plugins()
    model, writer = args.model or "dnc", args.writer or "regular"
    settings = _settings(args.assignments)
    if args.model:
        contract.check_model(model)
    contract.check_writer(writer, model, settings)
    print(f"contract: writer {writer!r} on model {model!r} keeps it")
    base = lb.read_board(args.board)
    if base is None:
        raise errors.NotFoundError(f"no baselines at {os.path.join(args.board, 'runs.csv')}: sweep the suite "
                                f"(`uwbench sweep {args.suite} --workers 2`), then `uwbench leaderboard "
                                "--record-baselines`; or point --board at a folder that has them")
    if not os.path.exists(os.path.join(args.board, "board.md")):
        raise errors.NotFoundError(_in_progress(args))
    name = args.name or lb.row_name(model, writer)
    path = lb.writer_study(args.suite, name, model, writer, settings)
    print(f"study for the row {name}: {path}")
    _sweep(path, args)
    from uwbench.spec import load

    snap = lb.study_snapshot(path, args.profile, args.tracking_uri)
    lb.check_comparable(base, snap, load(args.suite).id)
    merged = lb.merge(base, snap)
    out = args.out or os.path.join(lb.work_dir(), name)
    board, _ = lb.write_board(merged, out)
    if name not in {r.name for r in board.rows}:
        print(f"the row {name} has no finished run, so it is not on the board: see the `error` tag of its runs in "
              f"MLflow (experiment {load(path).id!r})")
    if args.commit_row:
        lb.write_board(merged, args.board)
        print(f"row {name} added to {args.board}")
        _refresh_readme(args.board)
    from uwbench.leaderboard import render as board_render
    from uwbench.tabular import to_markdown

    print(to_markdown(board_render.board_table(board)), end="")
    if board.baseline_cells:  # how many baseline cells converged, and which columns count
        print(board_render.baselines_text(board).replace("**", ""))
    print(f"board: {os.path.join(out, 'board.md')}")
    return 0


def _sweep(path: str, args) -> None:
    from uwbench.spec import load_plan
    from uwbench.sweeps.backends.worker_processes import warm_up
    from uwbench.sweeps.driver import Options, sweep

    if args.workers != 0:
        warm_up()
    plan = load_plan(path, args.profile)
    options = Options(workers=args.workers, checkpoint_dir=args.checkpoint_dir,
                      system_metrics=not args.no_system_metrics)
    sweep(plan, "optuna", uri=args.tracking_uri, progress=not args.no_progress, options=options)
