"""`uwbench data check`: which datasets are found where, and what to place where for the missing ones.

Nothing is downloaded, ever: the real-data tasks read local files (docs/data.md).
"""
from __future__ import annotations

HELP = "check the local datasets: what is found where, what to place where (nothing is downloaded)"

# modules whose data_status(data_dir) -> [DataStatus] describe their datasets
STATUS_MODULES = ("uwbench.tasks.pixels", "uwbench.tasks.documents")


def add_arguments(p) -> None:
    p.add_argument("action", choices=["check"], help="check: list found and missing datasets")
    p.add_argument("--data-dir", help="the data folder (default: $UWBENCH_DATA, else ./data)")


def run(args) -> int:
    import importlib

    from uwbench.tasks.realdata import root_hint

    statuses = []
    for module in STATUS_MODULES:
        statuses += importlib.import_module(module).data_status(args.data_dir)
    print(root_hint(args.data_dir))
    print("sinusoid, sinusoid_noisy and the synthetic tasks generate their data: nothing to place.\n")
    for s in statuses:
        mark = "found  " if s.found else "MISSING"
        print(f"{mark} {s.name:<16} {s.where}")
        print(f"        tasks: {', '.join(s.tasks)}")
        if not s.found:
            print(f"        place: {', '.join(s.missing)} in {s.where}")
            if s.note:
                print(f"        from:  {s.note}")
    missing = [s.name for s in statuses if not s.found]
    print(f"\n{len(statuses) - len(missing)} of {len(statuses)} found" +
          (f"; missing: {', '.join(missing)}" if missing else ""))
    return 0
