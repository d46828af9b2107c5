"""The spec hash: a stable hash of what decides which runs a plan makes."""
from __future__ import annotations

import hashlib
import json

from uwbench.spec.plan import Plan


def plan_hash(plan: Plan) -> str:
    """A stable hash of everything that decides what runs (cells and their configs, seeds, search,
    objective(s), budget, pruning, mode, profile, ``--set`` overrides); titles, notes and paper values are left out, so fixing
    them does not start a new sweep."""
    payload = {
        "id": plan.spec.id,
        "profile": plan.profile,
        "mode": plan.mode,
        "cells": [[c.id, {s: {**c.inert.get(s, {}), **v} for s, v in c.config.items()}] for c in plan.cells],
        "seeds": plan.seeds,
        "final_seeds": plan.final_seeds,
        "search": {k: v.model_dump() for k, v in sorted(plan.search.items())},
        "objective": ([o.model_dump() for o in plan.objectives] if plan.multi_objective
                      else plan.objective.model_dump()),
        "budget": plan.budget.model_dump() if plan.budget else None,
        "pruning": plan.pruning.model_dump(),
    }
    if plan.cell_seeds:  # only when given, as the overrides
        payload["cell_seeds"] = plan.cell_seeds
    if plan.overrides:  # only when given, so the hash of a study run without --set is unchanged
        payload["overrides"] = plan.overrides
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
