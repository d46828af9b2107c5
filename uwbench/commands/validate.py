"""`uwbench validate`: check study files (structure, every profile, the registered components)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

HELP = "validate study files: prints OK, WAITS (a task or model not written yet) or ERROR per file"


def add_arguments(p) -> None:
    p.add_argument("studies", nargs="+", metavar="STUDY.yaml", help="study files, e.g. studies/*.yaml")


def run(args) -> int:
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


@dataclass
class Check:
    path: str
    status: str  # ok | waits | error
    message: str
    plan: Optional[Any] = None  # the default profile's ``uwbench.spec.Plan``


def check(path: str) -> Check:
    """Validate a study file and every one of its profiles (also ``uwbench.spec.check``)."""
    from uwbench.spec import BASE_PROFILE, SpecError, expand, load

    try:
        spec = load(path)
        plans = {name: expand(spec, name, path) for name in sorted({BASE_PROFILE, *spec.profiles})}
    except SpecError as exc:
        return Check(path, "error", str(exc))
    except FileNotFoundError as exc:
        return Check(path, "error", f"{path}: {exc.strerror}")
    plan = plans[spec.default_profile]
    waits = sorted({w for p in plans.values() for w in p.waits_for})
    sizes = ", ".join(f"{name} {len(p.cells)} cells/{p.n_runs()} runs" for name, p in plans.items())
    if waits:
        return Check(path, "waits", f"{spec.id}: waits for {', '.join(waits)} (not registered yet); "
                                    f"structure valid ({sizes})", plan)
    mode = spec.mode if not spec.multi_objective else (
        f"{spec.mode}, Pareto over {' / '.join(o.metric for o in spec.objectives)} (pruning off; every "
        "Pareto-optimal trial is re-run, so the run counts are minimums)")
    return Check(path, "ok", f"{spec.id}: {mode}, {sizes}; spec hash {plan.spec_hash}", plan)

