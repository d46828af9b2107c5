"""`uwbench validate`: check study files (structure, every profile, the registered components)."""
from __future__ import annotations

HELP = "validate study files: prints OK, WAITS (a task or model not written yet) or ERROR per file"


def add_arguments(p) -> None:
    p.add_argument("studies", nargs="+", metavar="STUDY.yaml", help="study files, e.g. studies/*.yaml")


def run(args) -> int:
    from uwbench.spec import check

    errors = 0
    for path in args.studies:
        result = check(path)
        if result.status == "ok":
            print(f"OK     {path}: {result.message}")
        elif result.status == "waits":
            print(f"WAITS  {path}: {result.message}")
        else:
            errors += 1
            lines = result.message.splitlines()
            print(f"ERROR  {lines[0]}")
            for line in lines[1:]:
                print(f"       {line}")
    return 1 if errors else 0
