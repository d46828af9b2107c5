"""The snapshot a report is computed from: the three texts and their parsed frames, read from a folder
(each file checked first) and written to one."""
from __future__ import annotations

import os
from typing import Dict, List

import numpy as np

from uwbench import atomic
from uwbench.errors import NotFoundError
from uwbench.snapshot.check import SnapshotError, check_snapshot_text
from uwbench.snapshot.columns import CURVE_COLUMNS, TRACE_COLUMNS, all_columns, numeric_columns
from uwbench.snapshot.text import read_csv_text, runs_text, to_csv_text, with_steps

class Snapshot:
    """The three snapshot texts and their parsed frames. Build with ``from_texts`` (the only way the
    report sees data, whichever the source)."""

    def __init__(self, runs: str, curves: str = "", traces: str = ""):
        self.curves_csv = curves or to_csv_text(CURVE_COLUMNS, [])
        self.traces_csv = traces or to_csv_text(TRACE_COLUMNS, [])
        self.curves = read_csv_text(self.curves_csv, ("step", "value"))
        numeric = numeric_columns()
        self.runs = read_csv_text(runs, numeric)
        for c in all_columns():
            if c not in self.runs.columns:  # an older snapshot: missing columns read as empty
                self.runs[c] = np.nan if c in numeric else ""
        if len(self.runs) and self.runs["steps"].isna().any():  # runs.csv without the updates made: from the curves
            rows = self.runs[list(all_columns())].to_dict("records")
            runs = runs_text(with_steps(rows, self.curves))
            self.runs = read_csv_text(runs, numeric)
        self.runs_csv = runs
        self.traces_frame = read_csv_text(self.traces_csv, ("row", "col", "value"))

    @classmethod
    def from_dir(cls, folder: str) -> "Snapshot":
        """Read ``runs.csv`` (required) and ``curves.csv`` / ``traces.csv`` (optional) from a folder, each
        checked first (``check_snapshot_text``)."""
        path = os.path.join(folder, "runs.csv")
        if not os.path.exists(path):
            raise NotFoundError(f"no runs.csv in {folder}: build the report from MLflow first "
                                    "(`uwbench report studies/<id>.yaml`)")

        def read(name):
            p = os.path.join(folder, name)
            if not os.path.exists(p):
                return ""
            try:
                with open(p, encoding="utf-8") as f:
                    text = f.read()
            except UnicodeDecodeError as exc:
                raise SnapshotError(f"{p} is not UTF-8 text ({exc.reason} at byte {exc.start}): not a snapshot "
                                    "written by uwbench report") from None
            check_snapshot_text(p, text)
            return text

        return cls(read("runs.csv"), read("curves.csv"), read("traces.csv"))

    def write(self, folder: str) -> List[str]:
        os.makedirs(folder, exist_ok=True)
        written = []
        for name, text in (("runs.csv", self.runs_csv), ("curves.csv", self.curves_csv),
                           ("traces.csv", self.traces_csv)):
            written.append(atomic.write_text(os.path.join(folder, name), text))
        return written

    def study_ids(self) -> List[str]:
        return sorted({s for s in self.runs["study"] if s})

    def traces(self) -> Dict[str, Dict]:
        """``{cell: {"run_id": id, "arrays": {name: 2-D array}}}`` from traces.csv."""
        out: Dict[str, Dict] = {}
        t = self.traces_frame
        if len(t) == 0:
            return out
        for (cell, run_id, name), g in t.groupby(["cell", "run_id", "array"], sort=True):
            rows = g["row"].astype(int).to_numpy()
            cols = g["col"].astype(int).to_numpy()
            arr = np.full((rows.max() + 1, cols.max() + 1), np.nan)
            arr[rows, cols] = g["value"].to_numpy(dtype=float)
            out.setdefault(cell, {"run_id": run_id, "arrays": {}})["arrays"][name] = arr
        return out

