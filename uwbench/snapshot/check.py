"""A snapshot file checked before anything is computed from it: ``check_snapshot_text`` refuses one that
cannot be what ``uwbench report`` wrote (``SnapshotError``, naming the file, the line and the column)."""
from __future__ import annotations

import csv
import io
import math
import os
import re
from typing import Dict, List, Tuple

from uwbench import metrics
from uwbench.errors import UserError
from uwbench.snapshot.columns import CURVE_COLUMNS, ID_COLUMNS, TRACE_COLUMNS, numeric_columns

# What a snapshot file must hold to be read at all: the columns every version of uwbench wrote (newer axis
# and metric columns may be missing from an older snapshot and read as empty), and the columns that are
# numbers wherever they are not empty.
REQUIRED = {
    "runs.csv": ID_COLUMNS + metrics.keys("test"),
    "curves.csv": CURVE_COLUMNS,
    "traces.csv": TRACE_COLUMNS,
}


def numeric_of(name: str) -> Tuple[str, ...]:
    """The numeric columns of the snapshot file ``name``."""
    return {"runs.csv": numeric_columns(), "curves.csv": ("step", "value"),
            "traces.csv": ("row", "col", "value")}[name]


class SnapshotError(UserError):
    """A snapshot file cannot be what ``uwbench report`` wrote; the message names the file, the column (and the
    line) and what to do."""


def check_snapshot_text(path: str, text: str) -> None:
    """Refuse a snapshot file, before anything is computed or written from it (``SnapshotError``, naming the
    file, the line and the column), with a required column missing, a line of another width, a value that is
    not a number in a numeric column, or an impossible one: nan (or, in runs.csv, an infinity), an accuracy
    outside [0, 1], a negative time or MSE, a study that is no study id, a run id on two lines, a finished
    run without a test value."""
    from uwbench.spec.schema import ID_PATTERN  # a study id names the report's folder: one plain name

    name = os.path.basename(path)
    rows = list(csv.reader(io.StringIO(text)))
    fix = ("rebuild the report from MLflow (`uwbench report STUDY.yaml`) or restore the file from the report it "
           "came from")
    if not rows:
        if name == "runs.csv":
            raise SnapshotError(f"{path} is empty: a snapshot has a header line at least; {fix}")
        return
    header = rows[0]
    missing = [c for c in REQUIRED[name] if c not in header]
    if missing:
        raise SnapshotError(f"{path} has no column {', '.join(repr(c) for c in missing)} (a {name} snapshot has "
                            f"{', '.join(REQUIRED[name])}, ...): it is not a snapshot written by uwbench report, or "
                            f"it was edited; {fix}")
    numeric = [(i, c) for i, c in enumerate(header) if c in numeric_of(name)]
    finite = name == "runs.csv"  # a curve may hold a diverged run's inf; nothing in runs.csv may
    ranges = [(i, c, VALUE_RANGES[name][c]) for i, c in enumerate(header) if c in VALUE_RANGES.get(name, {})]
    col = {c: i for i, c in enumerate(header)}
    seen: Dict[str, int] = {}
    metric_col = col.get("metric")
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise SnapshotError(f"{path}, line {line}: {len(row)} values for {len(header)} columns; {fix}")
        for i, column in numeric:
            text = row[i]
            if text == "":
                continue
            try:
                value = float(text)
            except ValueError:
                raise SnapshotError(f"{path}, line {line}: column {column!r} holds {text!r}, not a number; "
                                    f"correct or remove that row, or {fix}") from None
            if value != value or (finite and value in (math.inf, -math.inf)):
                raise SnapshotError(f"{path}, line {line}: column {column!r} holds {text!r}, not a finite number "
                                    f"(uwbench writes a missing value as an empty field); correct or remove that "
                                    f"row, or {fix}")
        for i, column, (low, high, what) in ranges:
            text = row[i]
            if text == "" or (column == "value" and row[metric_col] not in ACCURACY_COLUMNS):
                continue
            if not low <= float(text) <= high:
                raise SnapshotError(f"{path}, line {line}: column {column!r} holds {text!r}, but {what} must hold; "
                                    f"correct or remove that row, or {fix}")
        if name == "runs.csv":
            _check_run_row(path, line, row, col, seen, ID_PATTERN, fix)


def _check_run_row(path: str, line: int, row: List[str], col: Dict[str, int], seen: Dict[str, int],
                   id_pattern: str, fix: str) -> None:
    """The rules of one runs.csv row that read several of its columns (``check_snapshot_text``)."""
    where = f"{path}, line {line}"
    study = row[col["study"]]
    if study and not re.match(id_pattern, study):
        raise SnapshotError(f"{where}: column 'study' holds {study!r}, not a study id (`{id_pattern}` must match: "
                            f"lower-case letters, digits and '_', the name of a study file); {fix}")
    run_id = row[col["run_id"]]
    if run_id and run_id in seen:
        raise SnapshotError(f"{where}: column 'run_id' holds {run_id!r}, the run of line {seen[run_id]} again "
                            f"(each run is one row); remove one of the two, or {fix}")
    seen[run_id] = line
    if row[col["status"]] == "finished" and all(row[col[c]] == "" for c in TEST_COLUMNS):
        raise SnapshotError(f"{where}: a finished run ({run_id or 'no run id'}) has no test value (column "
                            f"{' and '.join(repr(c) for c in TEST_COLUMNS)} empty); correct its status or value, "
                            f"or {fix}")


ACCURACY_COLUMNS = tuple(metrics.metric(s, "accuracy").key for s in metrics.SPLITS)
TEST_COLUMNS = metrics.keys("test")
# What a recorded value can be, per snapshot file: (lowest, highest, the rule as the error states it).
VALUE_RANGES: Dict[str, Dict[str, Tuple[float, float, str]]] = {
    "runs.csv": {
        **{c: (0.0, 1.0, "0 <= accuracy <= 1") for c in metrics.keys("test", "best_eval") if c in ACCURACY_COLUMNS},
        **{c: (0.0, math.inf, f"{c} >= 0") for c in metrics.keys("test", "best_eval") if c not in ACCURACY_COLUMNS},
        **{c: (0.0, math.inf, f"{c} >= 0 (a time)") for c in ("mean_seconds_per_100", "mean_cpu_seconds_per_100",
                                                              "train_seconds", "eval_seconds")},
    },
    "curves.csv": {
        "step": (0.0, math.inf, "step >= 0"),
        "value": (0.0, 1.0, "0 <= accuracy <= 1"),  # of an accuracy's curve only (``_bounded_curve``)
    },
}
