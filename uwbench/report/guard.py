"""No report replaces a committed report of another profile unless asked to (``--force``).

A report folder holds one run set (``study.select_run_set``): the runs of one profile, named in its
``runs.csv`` (``profile`` column). Rebuilding it from a run set that leaves out a profile the folder's runs
have (``uwbench report --profile cpu`` over Table 1's committed ``paper50`` report, or ``--all`` where the
local MLflow store has only the ``cpu`` runs) would replace one experiment's record with another's. That
is refused, naming the way out: another folder (``--out DIR``; ``make paper-cpu`` writes to
``runs/reports/``) or ``--force``. A folder without a ``runs.csv``, or whose runs name no profile (snapshots
from before the column), is not guarded.
"""
from __future__ import annotations

import os
from typing import Set

import pandas as pd


class ProfileClashError(ValueError):
    """The report would replace a report of another profile (a user error: the CLI prints one line)."""


def profiles(runs: pd.DataFrame) -> Set[str]:
    """The profiles named by a run table's ``profile`` column (empty where it has none)."""
    if runs is None or "profile" not in runs.columns:
        return set()
    return {str(p) for p in runs["profile"].dropna() if str(p).strip()}


def folder_profiles(folder: str) -> Set[str]:
    """The profiles of the runs a report folder holds (its ``runs.csv``); empty when it holds none."""
    path = os.path.join(folder, "runs.csv")
    if not os.path.exists(path):
        return set()
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, usecols=lambda c: c == "profile")
    except (ValueError, pd.errors.EmptyDataError):
        return set()
    return profiles(frame)


def check(folder: str, runs: pd.DataFrame, force: bool = False) -> None:
    """Raise ``ProfileClashError`` when writing a report of ``runs`` into ``folder`` would drop the runs of a
    profile the folder's report has, unless ``force``."""
    old, new = folder_profiles(folder), profiles(runs)
    dropped = sorted(old - new)
    if force or not old or not new or not dropped:
        return
    raise ProfileClashError(
        f"{folder} holds the report of profile {', '.join(sorted(old))}; a report of profile "
        f"{', '.join(sorted(new))} would replace it. Write it to another folder (--out DIR; `make paper-cpu` "
        f"writes to runs/reports/), or give --force to replace it")
