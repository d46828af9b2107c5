"""`uwbench trace`: replay a recorded run and trace the updates around a fall (``uwbench/training/trace.py``)."""
from __future__ import annotations

HELP = "replay a recorded run and trace the gradients around a fall in its curve, on the run's path and the reference paths"


def add_arguments(p) -> None:
    p.add_argument("run_id", metavar="RUN_ID", nargs="?",
                   help="the MLflow run to replay (its config.json and curve are read)")
    p.add_argument("--from", dest="start", type=int, metavar="UPDATE",
                   help="first traced update (the replay runs every update before it untraced)")
    p.add_argument("--to", dest="stop", type=int, metavar="UPDATE",
                   help="last traced update; the replay ends there")
    p.add_argument("--branches", nargs="+", metavar="DIR",
                   help="instead of a replay: put traces written before (their folders; the first names the run) "
                        "side by side in --out: branches.csv, branches.md, branches.png")
    p.add_argument("--tracking-uri", help="MLflow tracking URI holding the run (default sqlite:///runs/mlflow.db)")
    p.add_argument("--out", help="folder for the trace's files (default runs/traces/<run id>)")
    p.add_argument("--compare-every", type=int, default=25,
                   help="recompute every N-th traced update's gradient on the reference paths (and every spike); "
                        "default 25")
    p.add_argument("--spike-factor", type=float, default=10.0,
                   help="an update is a spike when its largest gradient norm exceeds this many times the "
                        "window's median so far (default 10)")
    p.add_argument("--paths", nargs="+", metavar="PATH",
                   help="reference paths to recompute compared updates on: torch32 torch64 native64 "
                        "(default: all that apply to the run; torch64 is the reference)")
    p.add_argument("--threads", type=int,
                   help="torch intra-op threads (default: the run's recorded torch_threads, for an exact replay)")
    p.add_argument("--save-state", metavar="PATH",
                   help="save the trainer's state at the last evaluation before --from, to branch from it later")
    p.add_argument("--from-state", metavar="PATH",
                   help="start from a state saved with --save-state instead of replaying from the first update")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="train.KEY=VALUE",
                   help="with --from-state: continue with this setting changed (train.lr, train.clip, "
                        "train.clip_mode; repeatable), on the same weights and batches")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    import json
    import os
    import tempfile

    from uwbench.config import ConfigError
    from uwbench.tracking import mlflow as tracking
    from uwbench.report.rendering import falls
    from uwbench.training import trace as tr

    if args.branches:
        if not args.out:
            raise ConfigError("--branches needs --out, the folder for branches.csv, branches.md and branches.png")
        missing = [d for d in args.branches if not os.path.isfile(os.path.join(d, "meta.json"))]
        if missing:
            raise ConfigError(f"not a trace folder (no meta.json): {', '.join(missing)}; write one with "
                              "`uwbench trace RUN_ID --from ... --to ...`")
        with open(os.path.join(args.branches[0], "meta.json")) as f:
            source = json.load(f).get("source", "")  # the first folder names the run
        print("wrote " + ", ".join(falls.write_branches(args.branches, args.out, source)))
        return 0
    if not args.run_id or args.start is None or args.stop is None:
        raise ConfigError("give RUN_ID, --from and --to (or --branches DIR... to compare traces)")
    uri = tracking.resolve_uri(args.tracking_uri)
    record = tracking.get_run(args.run_id, uri)
    if record is None:
        raise ConfigError(f"no run {args.run_id} in {uri}; pass the store that holds it with --tracking-uri")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = tracking.download_artifact(args.run_id, "config.json", uri, tmp)
        except Exception as exc:  # noqa: BLE001 - an MLflow error of any kind: the run has no config to replay
            raise ConfigError(f"run {args.run_id} has no config.json artifact to replay ({exc}); only runs "
                              "recorded by `uwbench train` or `uwbench sweep` can be traced") from None
        with open(path) as f:
            config = json.load(f)
    from uwbench.tasks import build_task
    from uwbench.training.config import resolve_run
    from uwbench.training.record import MetricKeys

    resolved = resolve_run(config)
    key = MetricKeys(build_task(resolved.task_name, resolved.task_cfg).metric).eval
    recorded = {step: value for _, _, step, value in tracking.metric_histories([args.run_id], [key], uri)}
    from uwbench.config import parse_assignments

    sets = parse_assignments(args.assignments)
    if set(sets) - {"train"}:
        raise ConfigError(f"a branch can change only train.* settings, got {', '.join(sorted(set(sets) - {'train'}))}.*")
    changes = dict(sets.get("train", {}))
    state = None
    if args.from_state:
        import torch

        if not os.path.isfile(args.from_state):
            raise ConfigError(f"--from-state {args.from_state}: no such file; write one with --save-state")
        state = torch.load(args.from_state, map_location="cpu", weights_only=True)
    elif changes:
        raise ConfigError("--set changes a branch: give the state to branch from with --from-state "
                          "(write it with --save-state on a first trace)")
    threads = args.threads
    if threads is None and record["tags"].get("torch_threads", "").isdigit():
        threads = int(record["tags"]["torch_threads"])
    source = f"run {record['name'] or args.run_id} ({args.run_id})"
    if changes:
        source += " branched with " + ", ".join(f"train.{k}={v}" for k, v in sorted(changes.items()))
    print(f"replaying {source} to update {args.stop}, tracing {args.start}-{args.stop}"
          + (f" on {threads} thread(s)" if threads else ""))
    result = tr.trace(config, args.start, args.stop, compare_every=args.compare_every,
                      spike_factor=args.spike_factor, paths=args.paths, recorded_curve=recorded or None,
                      threads=threads, progress=not args.no_progress, save_state=args.save_state, state=state,
                      changes=changes)
    out = args.out or os.path.join("runs", "traces", args.run_id)
    written = falls.write_outputs(result, out, source)
    print(tr.summary(result, source), end="")
    if args.save_state:
        written.append(args.save_state)
    print("wrote " + ", ".join(written))
    return 0
