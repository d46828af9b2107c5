"""`uwbench sweep`: run (or resume, or join from another machine) a study with the Optuna or the Ray Tune
backend, recorded in MLflow."""
from __future__ import annotations

HELP = "run or resume a study (studies/*.yaml) with Optuna (embedded) or Ray Tune (distributed)"


def add_arguments(p) -> None:
    from uwbench.sweeps.planning import Options

    d = Options()
    p.add_argument("study", metavar="STUDY.yaml", help="the study file, e.g. studies/quickstart.yaml")
    p.add_argument("--backend", choices=["optuna", "ray"], default="optuna",
                   help="optuna: worker processes sharing an Optuna storage, on this and any other machine that "
                        "runs the same command (default); ray: Ray Tune")
    p.add_argument("--profile", help="paper | cpu | smoke | ... (default: the study's default_profile)")
    p.add_argument("--workers", type=int,
                   help="optuna: worker processes on this machine, default 1 (0 runs the trials in this process); "
                        "ray: concurrent trials, default the cluster's CPU count")
    p.add_argument("--ray-address", help="ray: join this running cluster (e.g. 127.0.0.1:6380) instead of "
                                         "starting a local one")
    p.add_argument("--gpus-per-trial", type=float,
                   help="GPUs per trial: a fraction shares a GPU, a whole number gives several. optuna: worker i "
                        "gets GPU i mod G of this machine (CUDA_VISIBLE_DEVICES) whenever it has GPUs; ray: default "
                        "0.25 when the cluster has GPUs, else 0")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///runs/mlflow.db; an http:// "
                                          "server for several machines)")
    p.add_argument("--storage", help="optuna: storage URL (postgresql+psycopg://..., sqlite:///...) or journal file "
                                     "path (default runs/optuna/<study>.journal); ray: the journal of OptunaSearch")
    p.add_argument("--experiment", help="MLflow experiment name (default: the study id)")
    p.add_argument("--checkpoint-dir", help="where runs keep mid-run checkpoints (default <runs dir>/checkpoints); "
                                            "a folder every machine or node can read, for multi-machine sweeps")
    p.add_argument("--heartbeat-interval", type=int, default=d.heartbeat_interval,
                   help=f"optuna: seconds between a running trial's heartbeats (default {d.heartbeat_interval})")
    p.add_argument("--grace-period", type=int, default=d.grace_period,
                   help="optuna: seconds without a heartbeat after which another machine takes over a trial "
                        f"(default {d.grace_period})")
    p.add_argument("--max-retries", type=int, default=d.max_retries,
                   help=f"times a trial whose worker, machine or node died is retried (default {d.max_retries})")
    p.add_argument("--no-system-metrics", action="store_true",
                   help="do not sample CPU, memory and GPU use into each run (on by default)")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="a setting for every cell, after the profile's, e.g. --set train.steps=200 (repeatable; part "
                        "of the spec hash, so a sweep with other --set values is another run set; tag `overrides`)")
    p.add_argument("--cells", action="append", metavar="PATTERN",
                   help="run only the cells whose id matches this glob, e.g. 'dnc-uniform-*' (repeatable); the runs "
                        "are the study's own, and its report names the cells not run yet")
    p.add_argument("--population", metavar="auto|off|K",
                   help="how a cell's runs of one shape train: together as populations of up to K members, "
                        "each member its solo run (optuna: final runs, and search trials when the search varies "
                        "only lr and clip, slots refilled as members end; ray: final runs), auto as many as pay "
                        "on the device (8 on a CPU, 256 on a GPU), off each alone (default: the study's "
                        "`population`, else auto)")
    p.add_argument("--no-progress", action="store_true", help="no live progress line")


def overrides(assignments) -> dict:
    """``--set`` items -> ``{section: {key: value}}``: parsed as ``uwbench train --set`` parses them
    (``uwbench.config.parse_assignments``), values read as a study file reads them."""
    from uwbench.config import parse_assignments
    from uwbench.spec.load import scalar

    return {section: {k: scalar(v) for k, v in values.items()}
            for section, values in parse_assignments(assignments).items()}


def _sweep(args) -> int:
    from uwbench.spec import load_plan
    from uwbench.sweeps.common import SweepError
    from uwbench.sweeps.driver import sweep
    from uwbench.sweeps.planning import Options, parse_population

    population = parse_population(args.population)  # refused before anything is recorded
    if args.backend == "optuna" and args.workers != 0:  # its workers' imports overlap this process's set-up
        from uwbench.sweeps.backends.worker_processes import warm_up

        warm_up()
    plan = load_plan(args.study, args.profile, overrides=overrides(args.assignments), cells=args.cells)
    if plan.skipped_cells:
        print(f"--cells: {len(plan.cells)} of {len(plan.cells) + len(plan.skipped_cells)} cells "
              f"({', '.join(c.id for c in plan.cells)})")
    if plan.waits_for:
        raise SweepError(f"{args.study}: study {plan.id} waits for {', '.join(plan.waits_for)}, which is not "
                         "registered yet (see `uwbench ls`)")
    options = Options(workers=args.workers, storage=args.storage, ray_address=args.ray_address,
                      gpus_per_trial=args.gpus_per_trial, checkpoint_dir=args.checkpoint_dir,
                      heartbeat_interval=args.heartbeat_interval, grace_period=args.grace_period,
                      max_retries=args.max_retries,
                      system_metrics=not args.no_system_metrics, population=population)
    return sweep(plan, args.backend, uri=args.tracking_uri, experiment=args.experiment, progress=not args.no_progress,
                 options=options)


def run(args) -> int:
    """The sweep, then the link to its experiment's runs table in the MLflow UI."""
    from uwbench.spec import load
    from uwbench.tracking.ui import link_line

    code = _sweep(args)
    print(link_line(args.experiment or load(args.study).id, tracking_uri=args.tracking_uri))
    return code
