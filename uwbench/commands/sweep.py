"""`uwbench sweep`: run (or resume) a study with the Optuna or the Ray Tune backend, recorded in MLflow."""
from __future__ import annotations

HELP = "run or resume a study (studies/*.yaml) with Optuna (embedded) or Ray Tune (distributed)"


def add_arguments(p) -> None:
    p.add_argument("study", metavar="STUDY.yaml", help="the study file, e.g. studies/quickstart.yaml")
    p.add_argument("--backend", choices=["optuna", "ray"], default="optuna",
                   help="optuna: processes on this machine sharing an Optuna storage (default); ray: Ray Tune")
    p.add_argument("--profile", help="paper | cpu | smoke | ... (default: the study's default_profile)")
    p.add_argument("--workers", type=int,
                   help="optuna: worker processes, default 1 (0 runs the trials in this process); ray: concurrent "
                        "trials, default the cluster's CPU count")
    p.add_argument("--ray-address", help="ray: join this running cluster (e.g. 127.0.0.1:6380) instead of "
                                         "starting a local one")
    p.add_argument("--gpus-per-trial", type=float,
                   help="ray: GPU fraction per trial (default 0.25 when the cluster has GPUs, else 0)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///runs/mlflow.db)")
    p.add_argument("--storage", help="optuna: storage URL (sqlite:///..., postgresql://...) or journal file path "
                                     "(default runs/optuna/<study>.journal); ray: the journal of OptunaSearch")
    p.add_argument("--experiment", help="MLflow experiment name (default: the study id)")
    p.add_argument("--no-progress", action="store_true", help="no live progress line")


def _sweep(args) -> int:
    from uwbench.spec import load_plan
    from uwbench.sweeps.common import SweepError

    plan = load_plan(args.study, args.profile)
    if plan.waits_for:
        raise SweepError(f"{args.study}: study {plan.id} waits for {', '.join(plan.waits_for)}, which is not "
                         "registered yet (see `uwbench ls`)")
    if args.backend == "optuna":
        if args.ray_address or args.gpus_per_trial is not None:
            raise SweepError("--ray-address and --gpus-per-trial are for --backend ray; the optuna backend runs "
                             "on this machine with the study's train.device")
        from uwbench.sweeps.optuna_backend import sweep

        return sweep(plan, workers=1 if args.workers is None else args.workers, uri=args.tracking_uri, storage=args.storage,
                     experiment=args.experiment, progress=not args.no_progress)
    from uwbench.sweeps.ray_backend import sweep as ray_sweep

    return ray_sweep(plan, workers=args.workers, uri=args.tracking_uri, storage=args.storage,
                     experiment=args.experiment, progress=not args.no_progress, ray_address=args.ray_address,
                     gpus_per_trial=args.gpus_per_trial)


def run(args) -> int:
    """The sweep, then the link to its experiment's runs table in the MLflow UI."""
    from uwbench.spec import load
    from uwbench.tracking.ui import link_line

    code = _sweep(args)
    print(link_line(args.experiment or load(args.study).id, tracking_uri=args.tracking_uri))
    return code
