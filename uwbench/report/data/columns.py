"""Other profiles' run sets whose cells are more columns of a study's table (a study's ``more_columns``).

The paper's Table 1 has a T=50 and a T=100 column per task; the study sweeps them as two profiles (``paper50``,
``paper100``), each reported in its own folder. The default profile's report also shows the whole table: its
own cells and those of each run set named in ``more_columns``, read from that run set's report folder (its
``runs.csv``, relative to the study's report folder) and viewed through the study file at that profile's plan.
Each run set keeps its own cells; no cell pools runs of two run sets.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List

import pandas as pd

from uwbench.report.data import study as study_data
from uwbench.report.data.study import StudyView
from uwbench.snapshot import Snapshot


@dataclass(frozen=True)
class Columns:
    profile: str
    source: str  # the run set's folder, relative to the report folder that shows it
    study: StudyView  # the study viewed at that run set's plan (its cells, their paper values)
    runs: pd.DataFrame


def study_folder(study: StudyView, folder: str) -> str:
    """The study's report folder: ``folder`` itself, or its parent for a report in a folder of its own inside
    the study's (``reports/<id>/t100/``)."""
    folder = os.path.normpath(folder)
    return folder if os.path.basename(folder) == study.id else os.path.dirname(folder)


def load_more_columns(study: StudyView, folder: str) -> List[Columns]:
    """Each of the study's ``more_columns`` run sets that has runs of its profile in its ``runs.csv``, viewed at
    that profile; a run set not swept yet is left out (the whole table then has no such columns). Needs the
    study file (``study.path``)."""
    if not study.more_columns or not study.path:
        return []
    base = study_folder(study, folder)
    out = []
    for profile, sub in study.more_columns:
        path = os.path.join(base, sub)
        if not os.path.isfile(os.path.join(path, "runs.csv")):
            continue
        runs = Snapshot.from_dir(path).runs
        runs = runs[runs["study"].isin([study.id, ""]) & (runs["profile"] == profile)] if len(runs) else runs
        if not len(runs):
            continue
        out.append(Columns(profile, os.path.relpath(path, folder), study_data.load(study.path, runs=runs), runs))
    return out
