"""`uwbench train`: one training run, or several as a population, recorded in MLflow.

Several values of ``--seed``, ``--lr`` or ``--clip`` train their product (seeds x lrs x clips, in that
order), each member its own MLflow run. ``--population`` says how: ``off`` one solo run after another,
``K`` populations of at most K members, ``auto`` (the default) ``AUTO_SIZE`` of this device
(``uwbench/training/population.py``). Killed, the same command resumes an unfinished population: its
members' runs carry the ``population_key`` of the command's settings.
"""
from __future__ import annotations

HELP = "train one model on one task (or a population: several seeds, lrs, clips) and record it in MLflow"

from uwbench.training.sizes import AUTO_SIZE  # noqa: E402 - members per population with --population auto
MULTI = ("seed", "lr", "clip")  # the flags that take several values

# CLI flag -> (run-config section, key). Flags left unset keep the component's own default.
FLAG_KEYS = {
    "seq_len": ("task", "seq_len"),
    "hidden_size": ("model", "hidden_size"),
    "controller": ("model", "controller"),
    "memory_size": ("model", "memory_size"),
    "writer": ("model", "writer"),
    "cache_size": ("model", "cache_size"),
    "steps": ("train", "steps"),
    "batch_size": ("train", "batch_size"),
    "lr": ("train", "lr"),
    "clip": ("train", "clip"),
    "eval_every": ("train", "eval_every"),
    "seed": ("train", "seed"),
    "device": ("train", "device"),
    "threads": ("train", "threads"),
}

DEFAULT_EXPERIMENT = "uwbench-train"


def add_arguments(p) -> None:
    p.add_argument("--task", help="task name (see `uwbench ls`); required unless --resume")
    p.add_argument("--model", help="model name (see `uwbench ls`); required unless --resume")
    p.add_argument("--seq-len", type=int, help="input length T (synthetic tasks)")
    p.add_argument("--hidden-size", type=int, help="controller units H")
    p.add_argument("--controller", help="ln_lstm | lstm | gru | rnn")
    p.add_argument("--memory-size", type=int, help="memory slots D (memory models)")
    p.add_argument("--writer", help="regular | uniform | cached_uniform | random (memory models)")
    p.add_argument("--cache-size", type=int, help="CUW interval and cache length L")
    p.add_argument("--steps", type=int, help="parameter updates")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float, nargs="+", help="learning rate (several: one run each)")
    p.add_argument("--clip", type=float, nargs="+", help="gradient clipping threshold (several: one run each)")
    p.add_argument("--eval-every", type=int, help="evaluate every N updates")
    p.add_argument("--seed", type=int, nargs="+", help="random seed (several: one run each)")
    p.add_argument("--population", default="auto", metavar="off|K|auto",
                   help="several runs: off trains them one after another, K in populations of at most K "
                        "members trained as one batched model, auto (default) as many as pay on this device")
    p.add_argument("--device", help="cpu | cuda | cuda:N | auto (default: a CUDA GPU when present)")
    p.add_argument("--threads", type=int, help="torch intra-op threads")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="any other setting, e.g. --set model.word_size=32 (repeatable)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///runs/mlflow.db)")
    p.add_argument("--experiment", default=DEFAULT_EXPERIMENT, help="MLflow experiment name")
    p.add_argument("--run-name", help="MLflow run name")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--resume", metavar="RUN_ID",
                   help="continue the interrupted MLflow run RUN_ID from its last checkpoint (its stored config; "
                        "config flags given too must match it)")
    p.add_argument("--checkpoint-dir", metavar="PATH",
                   help="where checkpoints are written and read (default $UWBENCH_CHECKPOINT_DIR or runs/checkpoints)")
    p.add_argument("--no-system-metrics", action="store_true",
                   help="do not log CPU, memory and GPU use (also UWBENCH_SYSTEM_METRICS=0)")


def run_configs_from_args(args) -> list:
    """One run config per member: the product of the several-valued flags (seeds x lrs x clips)."""
    import itertools

    from uwbench.config import ConfigError, merge, parse_assignments

    if not args.task or not args.model:
        raise ConfigError("the run needs --task and --model (or --resume RUN_ID to continue an interrupted run)")
    flags: dict = {"task": {"name": args.task}, "model": {"name": args.model}}
    for flag, (section, key) in FLAG_KEYS.items():
        value = getattr(args, flag, None)
        if value is not None and flag not in MULTI:
            flags.setdefault(section, {})[key] = value
    flags.setdefault("train", {}).setdefault("device", "auto")  # --set train.device=... still wins
    base = merge(flags, parse_assignments(args.assignments))
    choices = [[(flag, v) for v in _values(args, flag)] for flag in MULTI]
    configs = []
    for combo in itertools.product(*choices):
        train = dict(base.get("train") or {})
        train.update({FLAG_KEYS[flag][1]: v for flag, v in combo if v is not None})
        configs.append({**base, "train": train})
    return configs


def _values(args, flag) -> list:
    value = getattr(args, flag, None)
    if value is None:
        return [None]
    values = value if isinstance(value, list) else [value]
    if len(set(values)) != len(values):
        from uwbench.config import ConfigError

        raise ConfigError(f"--{flag} values must differ (each is one run), got {' '.join(map(str, values))}")
    return values


def run_config_from_args(args) -> dict:
    """The run config of a single run (``--resume``'s flags: one value each)."""
    from uwbench.config import ConfigError

    configs = run_configs_from_args(args)
    if len(configs) != 1:
        raise ConfigError(f"--resume continues one run: give one value of --seed, --lr and --clip, got {len(configs)} "
                          "runs' worth")
    return configs[0]


def population_size(setting: str, device_type: str, n: int) -> int:
    """Members per population from ``--population`` (off: 1)."""
    from uwbench.config import ConfigError

    if setting == "off":
        return 1
    if setting == "auto":
        return max(1, min(n, AUTO_SIZE.get(device_type, 1)))
    try:
        k = int(setting)
    except ValueError:
        k = 0
    if k < 1:
        raise ConfigError(f"--population must be off, auto or a number of members >= 1, got {setting!r}")
    return k


def run(args) -> int:
    from uwbench.spec.plugins import import_plugins

    import_plugins()  # $UWBENCH_PLUGINS: extra tasks, models, writers, as in `uwbench sweep`
    from uwbench import axes
    from uwbench.tracking.mlflow import Run, git_sha
    from uwbench.training.config import resolve_run
    from uwbench.training.loop import check_run

    if args.resume:
        return resume(args)
    configs = run_configs_from_args(args)
    resolved = [resolve_run(c) for c in configs]  # validate before anything is recorded
    device = None
    for r in resolved:
        device = check_run(r)  # the device exists, the tensors fit: also before the run exists
    from uwbench.commands.train_population import run_name, train_populations

    k = population_size(args.population, device.type, len(configs))
    if len(configs) == 1 or k == 1:
        codes = []
        for config, r in zip(configs, resolved):
            tags = {**axes.run_tags(r.as_dict()), "git_sha": git_sha(), "role": "single"}
            mlrun = Run(args.experiment, run_name=run_name(args, r, tags, len(configs)), tags=tags, uri=args.tracking_uri)
            codes.append(_train_and_print(config, mlrun, args))
        return max(codes)
    return train_populations(configs, resolved, k, args)


def resume(args) -> int:
    """``--resume RUN_ID``: the run's stored config (or the flags' config, which must match it), the same
    MLflow run re-opened, training continued from the checkpoint."""
    from uwbench.tracking.mlflow import Run
    from uwbench.training.checkpoint import Checkpoint, stored_config
    from uwbench.training.config import resolve_run
    from uwbench.training.loop import check_run

    config = stored_config(args.resume, args.checkpoint_dir)
    given = [flag for flag in ("task", "model", *FLAG_KEYS) if getattr(args, flag, None) is not None]
    if given or args.assignments:
        config = run_config_from_args(args)
        resolved = resolve_run(config)
        # refused here, before the run is re-opened, when it differs from the stored config
        Checkpoint(args.resume, resolved.as_dict(), resolved.train.checkpoint_every, args.checkpoint_dir).load()
    check_run(resolve_run(config))  # e.g. a checkpoint of a GPU run resumed on a machine without one
    mlrun = Run(args.experiment, uri=args.tracking_uri, run_id=args.resume)
    args.experiment = mlrun.client.get_experiment(mlrun.experiment_id).name
    print(f"resuming MLflow run {args.resume}")
    return _train_and_print(config, mlrun, args)


def _train_and_print(config, mlrun, args) -> int:
    from uwbench.tracking.ui import link_line
    from uwbench.training.loop import train

    try:
        result = train(config, run=mlrun, progress=not args.no_progress, checkpoint_dir=args.checkpoint_dir,
                       system_metrics=False if args.no_system_metrics else None)
    except KeyboardInterrupt:
        print(f"interrupted; continue from the last checkpoint with `uwbench train --resume {mlrun.run_id}`"
              + (f" --tracking-uri {args.tracking_uri}" if args.tracking_uri else ""))
        raise
    if result.status != "finished":
        print(f"run FAILED: {result.error}")
        print(f"MLflow run id: {result.run_id} (experiment {args.experiment!r}, {mlrun.uri})")
        return 1
    print(f"test {result.metric}: {result.test:.4f}  (best eval {result.best_eval:.4f} at update {result.best_step}; "
          f"{result.seconds_per_100:.2f} s per 100 updates on the {result.path} path; "
          f"{result.num_parameters:,} parameters)")
    if result.path_reason:
        print(f"not on the native path: {result.path_reason}")
    print(f"MLflow run id: {result.run_id} (experiment {args.experiment!r}, {mlrun.uri})")
    print(link_line(args.experiment, mlrun.experiment_id, args.tracking_uri))
    return 0
