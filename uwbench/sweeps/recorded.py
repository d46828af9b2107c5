"""Runs recorded elsewhere: ``uwbench sweep --recorded FOLDER``.

A faithful study's runs are fixed by its spec hash: a cell, a grid point and a seed make the same run on
any machine. So when a sweep moves to a machine whose MLflow store and Optuna storage are empty (the old
machine is gone, its store with it), the finished runs already written to a snapshot (a report's or a
board's ``runs.csv``, which a session can commit) need not run again: ``mark`` takes them off the plan
(``Plan.recorded``), and the sweep runs the rest, each on its own seed and index as before. What the
sweep then records is only the rest; the snapshot's runs join it where the snapshot is merged (the
leaderboard's ``--record-baselines`` keeps the runs its board folder recorded, docs/extending.md).

Only a faithful study: a tuned study's final runs come from its search, which a snapshot does not hold.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Set, Tuple

from uwbench.selection import point_key
from uwbench.spec.plan import Plan


def _read(path: str):
    from uwbench.report.runs import Snapshot, check_snapshot_text

    csv = os.path.join(path, "runs.csv") if os.path.isdir(path) else path
    if not os.path.isfile(csv):
        raise FileNotFoundError(f"--recorded {path}: no such {'runs.csv' if os.path.isdir(path) else 'file'}; give "
                                "a folder holding a runs.csv (a report's or a board's) or the runs.csv itself")
    with open(csv, encoding="utf-8") as f:
        text = f.read()
    check_snapshot_text(csv, text)
    return Snapshot(text).runs


def mark(plan: Plan, path: str) -> int:
    """Take the finished final runs that ``path`` (a runs.csv, or a folder holding one) records for this plan
    (same study, spec hash and profile) off the plan: ``Plan.recorded``. Returns how many it took; a
    ValueError names the problem and the fix when the snapshot holds no run of this plan."""
    from uwbench.selection import finished_finals

    if plan.mode != "faithful":
        raise ValueError(f"--recorded: study {plan.id} is tuned; its final runs follow its search, which a runs.csv "
                         "does not hold: resume it from its own Optuna storage and MLflow store instead")
    runs = _read(path)
    mine = runs[runs["study"] == plan.id] if len(runs) else runs
    if len(mine) == 0:
        studies = sorted(set(runs["study"])) if len(runs) else []
        raise ValueError(f"--recorded {path}: no run of study {plan.id!r} (it holds "
                         f"{', '.join(studies) or 'no run'}); give the snapshot of this study")
    done = finished_finals(mine)
    same = done[(done["spec_hash"].astype(str) == plan.spec_hash) & (done["profile"].astype(str) == plan.profile)]
    if len(done) and len(same) == 0:
        made = sorted({f"{h} at profile {p}" for h, p in zip(done["spec_hash"], done["profile"])})
        raise ValueError(f"--recorded {path}: its runs of {plan.id} were made at spec hash {', '.join(made)}; this "
                         f"sweep is {plan.spec_hash} at profile {plan.profile}, whose runs differ (the study or its "
                         "profile changed): sweep without --recorded, or with the profile they were made at")
    have: Set[Tuple[str, int, str]] = set()
    for cell, seed, sp in zip(same["cell"], same["seed"], same["search_params"]):
        have.add((str(cell), int(seed), point_key(json.loads(sp) if isinstance(sp, str) and sp else {})))
    recorded: Dict[str, Set[Tuple[int, str]]] = {}
    for cell in plan.cells:
        for point in plan.grid_points():
            for seed in plan.seeds_of(cell.id):
                if (cell.id, int(seed), point_key(point)) in have:
                    recorded.setdefault(cell.id, set()).add((int(seed), point_key(point)))
    plan.recorded = recorded
    return sum(len(v) for v in recorded.values())
