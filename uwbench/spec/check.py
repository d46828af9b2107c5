"""A study file checked whole: its structure and every one of its profiles against the registered
components (``uwbench validate`` prints the result)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from uwbench.spec.errors import SpecError
from uwbench.spec.expand import expand
from uwbench.spec.load import load
from uwbench.spec.schema import BASE_PROFILE


@dataclass
class Check:
    path: str
    status: str  # ok | waits | error
    message: str
    plan: Optional[Any] = None  # the default profile's ``uwbench.spec.Plan``


def check(path: str) -> Check:
    """Validate a study file and every one of its profiles."""
    try:
        spec = load(path)
        plans = {name: expand(spec, name, path) for name in sorted({BASE_PROFILE, *spec.profiles})}
    except SpecError as exc:
        return Check(path, "error", str(exc))
    except OSError as exc:  # missing, a folder, unreadable: this file's error, and the next file is checked
        return Check(path, "error", f"{path}: {exc.strerror or exc}")
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
