"""`uwbench ls`: what tasks, models, controllers and writers exist."""
from __future__ import annotations

HELP = "list the registered tasks, models, controllers and writers"


def add_arguments(p) -> None:
    p.add_argument("kind", nargs="?", choices=["tasks", "models", "controllers", "writers"],
                   help="list only this kind")


def run(args) -> int:
    from uwbench.registry import CONTROLLERS, MODELS, TASKS, WRITERS

    kinds = {"tasks": TASKS, "models": MODELS, "controllers": CONTROLLERS, "writers": WRITERS}
    for name, registry in kinds.items():
        if args.kind and args.kind != name:
            continue
        print(f"{name}:")
        for entry in registry:
            print(f"  {entry.name:<22} {entry.help}")
    return 0
