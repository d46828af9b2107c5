"""Run sets of one study under different protocols (a study's ``protocols:``), as the report reads them.

A study may name earlier run sets that differ from its own in a protocol setting, each a snapshot folder
(``runs.csv``, ``curves.csv``) inside the report folder, e.g. Tables 1 and 2 with the decoder that writes
every step (the authors' released code) beside their read-only decoder (the paper's runs,
docs/reference.md §5.4). ``load_others`` reads them; ``uwbench.report.verdicts.protocols`` compares them
with the study's own runs and ``uwbench.report.rendering.protocols`` puts them side by side in one table.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List

import pandas as pd

from uwbench.errors import NotFoundError
from uwbench.report.data.study import StudyView
from uwbench.snapshot import Snapshot

PROTOCOL_AXES = ("decoder_write", "clip_mode")  # the runs.csv columns that name a run's protocol


@dataclass(frozen=True)
class RunSet:
    label: str  # the column header, e.g. "read-only decoder (the paper's runs)"
    runs: pd.DataFrame
    curves: pd.DataFrame
    source: str = ""  # the snapshot folder, relative to the report folder ("" for the study's own runs)


def load_others(study: StudyView, folder: str) -> List[RunSet]:
    """The study's other run sets, read from their snapshot folders under the report ``folder``; an error
    names a folder that is not there."""
    out = []
    for label, sub in study.protocols_other:
        path = os.path.join(folder, sub)
        if not os.path.isfile(os.path.join(path, "runs.csv")):
            raise NotFoundError(f"the study's protocols name the run set {label!r} at {path}, which has no "
                                    "runs.csv: restore the folder from git, or remove it from `protocols:`")
        snap = Snapshot.from_dir(path)
        runs = snap.runs[snap.runs["study"].isin([study.id, ""])] if len(snap.runs) else snap.runs
        out.append(RunSet(label, runs, snap.curves, sub))
    return out


def protocol_text(runs: pd.DataFrame) -> str:
    """The protocol settings the runs share, e.g. 'decoder_write=false, clip_mode=per_tensor' ('' if none)."""
    parts = []
    for col in PROTOCOL_AXES:
        if col in runs.columns:
            values = sorted({str(v) for v in runs[col] if isinstance(v, str) and v not in ("", "none")})
            if values:
                parts.append(f"{col}={'/'.join(values)}")
    return ", ".join(parts)
