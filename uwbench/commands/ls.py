"""`uwbench ls`: what tasks, models, controllers and writers exist, and the run axes runs are tagged by."""
from __future__ import annotations

HELP = "list the registered tasks, models, controllers, writers and run axes"


def add_arguments(p) -> None:
    p.add_argument("kind", nargs="?", choices=["tasks", "models", "controllers", "writers", "axes"],
                   help="list only this kind")


def run(args) -> int:
    from uwbench.spec.plugins import import_plugins

    import_plugins()  # $UWBENCH_PLUGINS: extra tasks, models, writers, as in `uwbench sweep`
    from uwbench.registry import CONTROLLERS, MODELS, TASKS, WRITERS

    kinds = {"tasks": TASKS, "models": MODELS, "controllers": CONTROLLERS, "writers": WRITERS}
    for name, registry in kinds.items():
        if args.kind and args.kind != name:
            continue
        print(f"{name}:")
        for entry in registry:
            print(f"  {entry.name:<22} {entry.help}")
    if args.kind in (None, "axes"):
        from uwbench import axes

        print("axes (run tags, runs.csv columns):")
        for line in axes.describe():
            print(f"  {line}")
    return 0
