"""The recorded runs a report is made from, and their snapshot (``runs.csv``, ``curves.csv``, ``traces.csv``).

A report is a pure function of recorded runs (docs/design.md §1). MLflow rows are first normalised into a
fixed set of columns and written as text with a stable float format; the report is then computed from
that text, parsed back. So a report built from MLflow and one rebuilt from its committed snapshot
(``uwbench report --from-csv``) are the same bytes, and a rebuild of unchanged data gives no diff.

Snapshot files (UTF-8, ``\\n`` line ends, rows sorted):

- ``runs.csv``   one row per trial / final run (parent ``role=cell`` runs are left out): ``columns()``.
- ``curves.csv`` the learning curves of the final runs: ``run_id, metric, step, value``.
- ``traces.csv`` one recorded memory trace per traced cell (sample 0 of a test batch):
  ``cell, run_id, array, row, col, value`` (see ``uwbench.report.figures.trace_arrays``).

No mlflow import here: MLflow is read through ``uwbench.tracking.mlflow`` (imported lazily).
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from uwbench import atomic, axes, metrics

RESTORED_RUN_ID = "restored_run_id"  # the tag (and Optuna user attr) of a restored run: the run id its snapshot names

# The columns of runs.csv, in order: ``columns()``. Each is read from a tag first, then from the flattened
# config params (the axis's config path, ``uwbench.axes.param_paths``), then from the metrics.
ID_COLUMNS = ("study", "cell", "role", "status", "seed", "trial_number", "run_id")
INTERRUPTED = ("running", "killed")  # MLflow statuses of a run that is not over: it resumes
META_COLUMNS = ("search_params", "device", "num_parameters", "spec_hash", "git_sha", "profile", "backend",
                "overrides")  # overrides: a --set sweep's values, JSON {section: {key: value}}
# Times: wall seconds per 100 updates (what the tables compare) and the run's own CPU seconds per 100 (steadier
# on a shared machine: it leaves out the waiting for a core); torch_threads: the run's intra-op threads.
METRIC_COLUMNS = metrics.keys("test", "best_eval") + ("mean_seconds_per_100", "mean_cpu_seconds_per_100",
                                                      "train_seconds", "eval_seconds", "torch_threads")
# steps: the updates a run made (the last step of its learning curve; the configured budget for a run without
# one), so a reader sees each run's budget
BUDGET_COLUMNS = ("steps",)
STEPS_PARAM = "params.train.steps"
ID_INT_COLUMNS = ("trial_number", "num_parameters", "steps")  # the integer columns that are not axes


def axis_columns() -> Tuple[str, ...]:
    """The run axes (``uwbench.axes``) that are not identity columns: task, model, ..., lr, clip."""
    return axes.csv_columns(exclude=ID_COLUMNS)


def columns() -> Tuple[str, ...]:
    return ID_COLUMNS + axis_columns() + BUDGET_COLUMNS + META_COLUMNS + METRIC_COLUMNS


def int_columns() -> Tuple[str, ...]:
    return axes.int_columns() + ID_INT_COLUMNS


def float_columns() -> Tuple[str, ...]:
    return axes.float_columns() + METRIC_COLUMNS


def numeric_columns() -> Tuple[str, ...]:
    return int_columns() + float_columns()


CURVE_METRICS = metrics.keys("eval") + ("train_loss", metrics.GRAD_NORM)
CURVE_COLUMNS = ("run_id", "metric", "step", "value")
TRACE_COLUMNS = ("cell", "run_id", "array", "row", "col", "value")

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


class SnapshotError(ValueError):
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

SORT_KEYS = ("study", "cell", "role", "seed", "trial_number", "run_id")
FLOAT_FORMAT = ".10g"  # 10 significant digits: parse(format(x)) formats back to the same text


# --------------------------------------------------------------------------------------------------
# Text form: the one place floats become strings
# --------------------------------------------------------------------------------------------------


def format_value(value) -> str:
    """Stable text for one value: '' for missing, integers without '.0', floats with 10 digits."""
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            return ""
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return format(v, FLOAT_FORMAT)
    if value is pd.NA or value is pd.NaT:
        return ""
    text = str(value)
    return "" if text in ("nan", "None", "<NA>") else text


def write_csv(path: str, columns: Sequence[str], rows: Iterable[Mapping]) -> None:
    """Write rows (dicts) as CSV with the stable text form; parent folders are created."""
    atomic.write_text(path, to_csv_text(columns, rows))


def to_csv_text(columns: Sequence[str], rows: Iterable[Mapping]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([format_value(row.get(c)) for c in columns])
    return buf.getvalue()


def read_csv_text(text: str, numeric: Sequence[str] = ()) -> pd.DataFrame:
    """Parse CSV text written by ``to_csv_text``: strings stay ``object`` (never StringDtype), named
    numeric columns become float (NaN where empty)."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return pd.DataFrame()
    header, body = rows[0], rows[1:]
    data = {c: [r[i] if i < len(r) else "" for r in body] for i, c in enumerate(header)}
    frame = pd.DataFrame({c: pd.Series(v, dtype=object) for c, v in data.items()})
    for c in numeric:
        if c in frame.columns:
            frame[c] = pd.to_numeric(frame[c].replace("", np.nan), errors="coerce").astype(float)
    for c in frame.columns:
        if c not in numeric:
            frame[c] = frame[c].astype(object)
    return frame


# --------------------------------------------------------------------------------------------------
# MLflow rows -> normalised rows
# --------------------------------------------------------------------------------------------------


def _first(record: Mapping, *keys):
    for key in keys:
        value = record.get(key)
        if value is None:
            continue
        if isinstance(value, float) and math.isnan(value):
            continue
        if isinstance(value, str) and value in ("", "None", "nan"):
            continue
        return value
    return None


def normalise_mlflow(frame: pd.DataFrame, study_id: str) -> List[Dict]:
    """``mlflow.search_runs`` rows -> dicts with ``columns()`` (params and tags are strings: cast here).

    Parent cell runs (``role=cell``) are left out. ``status`` is the trainer's tag (finished | failed |
    pruned); a run still going has none and gets MLflow's own status in lower case (e.g. ``running``).
    An interrupted run (ended KILLED, to be resumed) or one resumed and going again (RUNNING) carries
    the interruption's ``failed`` tag: it reads ``killed`` or ``running``, not failed.
    """
    out = []
    if frame is None or len(frame) == 0:
        return out
    for record in frame.to_dict("records"):
        role = _first(record, "tags.role")
        if role == "cell":
            continue
        row: Dict = {"run_id": record.get("run_id")}
        params = axes.param_paths()
        for col in columns():
            if col == "run_id":
                continue
            keys = [f"tags.{col}"]
            if col in params:
                keys.append(f"params.{params[col]}")
            if col == "steps":
                keys.append(STEPS_PARAM)
            keys.append(f"metrics.{col}")
            row[col] = _first(record, *keys)
        row["study"] = row["study"] or study_id
        row["cell"] = row["cell"] or _first(record, "tags.mlflow.runName") or row["run_id"]
        row["role"] = role or "final"
        mlflow_status = str(_first(record, "status") or "unknown").lower()
        if row["status"] is None or (row["status"] == "failed" and mlflow_status in INTERRUPTED):
            row["status"] = mlflow_status  # still going, or interrupted: its "failed" tag is an interruption's
        if row["writer"] is None and row["model"] is not None:
            row["writer"] = "none"
        out.append(_cast(row))
    return out


def _cast(row: Dict) -> Dict:
    for c in int_columns():
        v = row.get(c)
        if v is not None:
            try:
                row[c] = int(float(v))
            except (TypeError, ValueError):
                row[c] = None
    for c in float_columns():
        v = row.get(c)
        if v is not None:
            try:
                row[c] = float(v)
            except (TypeError, ValueError):
                row[c] = None
    if row.get("compression_ratio") is None:
        row["compression_ratio"] = axes.compression_ratio(row)
    return row


def _sort_key(row: Mapping):
    key = []
    for c in SORT_KEYS:
        v = row.get(c)
        if c in ("seed", "trial_number"):
            key.append((0, float(v)) if v is not None and not (isinstance(v, float) and math.isnan(v)) else (1, 0.0))
        else:
            key.append(str(v or ""))
    return key


def with_steps(rows: List[Dict], curves: pd.DataFrame) -> List[Dict]:
    """Each run's ``steps``: the last step of its learning curve where it has one, else as recorded (the
    configured budget)."""
    last: Dict[str, int] = {}
    if len(curves):
        last = {str(k): int(v) for k, v in curves.groupby("run_id")["step"].max().items()}
    out = []
    for r in rows:
        r = dict(r)
        if str(r.get("run_id")) in last:
            r["steps"] = last[str(r.get("run_id"))]
        out.append(r)
    return out


def runs_text(rows: Iterable[Mapping]) -> str:
    return to_csv_text(columns(), sorted(rows, key=_sort_key))


def curves_text(rows: Iterable[Mapping]) -> str:
    rows = sorted(rows, key=lambda r: (str(r["run_id"]), str(r["metric"]), int(r["step"])))
    return to_csv_text(CURVE_COLUMNS, rows)


def traces_text(traces: Mapping[str, Mapping]) -> str:
    """``{cell: {"run_id": id, "arrays": {name: 2-D array}}}`` -> traces.csv text."""
    rows = []
    for cell in sorted(traces):
        entry = traces[cell]
        for name in sorted(entry["arrays"]):
            arr = np.atleast_2d(np.asarray(entry["arrays"][name], dtype=float))
            for (i, j), v in np.ndenumerate(arr):
                rows.append({"cell": cell, "run_id": entry["run_id"], "array": name, "row": i, "col": j,
                             "value": round(float(v), 6)})
    return to_csv_text(TRACE_COLUMNS, rows)


# --------------------------------------------------------------------------------------------------
# The snapshot a report is computed from
# --------------------------------------------------------------------------------------------------


class Snapshot:
    """The three snapshot texts and their parsed frames. Build with ``from_texts`` (the only way the
    report sees data, whichever the source)."""

    def __init__(self, runs: str, curves: str = "", traces: str = ""):
        self.curves_csv = curves or to_csv_text(CURVE_COLUMNS, [])
        self.traces_csv = traces or to_csv_text(TRACE_COLUMNS, [])
        self.curves = read_csv_text(self.curves_csv, ("step", "value"))
        numeric = numeric_columns()
        self.runs = read_csv_text(runs, numeric)
        for c in columns():
            if c not in self.runs.columns:  # an older snapshot: missing columns read as empty
                self.runs[c] = np.nan if c in numeric else ""
        if len(self.runs) and self.runs["steps"].isna().any():  # runs.csv without the updates made: from the curves
            rows = self.runs[list(columns())].to_dict("records")
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
            raise FileNotFoundError(f"no runs.csv in {folder}: build the report from MLflow first "
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


def restored_ids(frame) -> Dict[str, str]:
    """``{this store's run id: the snapshot's run id}`` of the runs in an MLflow frame that ``uwbench
    restore`` wrote (tagged ``RESTORED_RUN_ID``)."""
    column = f"tags.{RESTORED_RUN_ID}"
    if frame is None or len(frame) == 0 or column not in frame.columns:
        return {}
    return {str(run_id): str(orig) for run_id, orig in zip(frame["run_id"], frame[column])
            if isinstance(orig, str) and orig}


def from_mlflow(study_id: str, uri: Optional[str] = None, with_curves: bool = True, select=None,
                snapshot_ids: bool = False) -> Snapshot:
    """Read a study's runs (the experiment named by the study id) from MLflow into a ``Snapshot``.
    ``select(rows) -> rows`` keeps the runs the report is made of (see ``study.select_run_set``).
    ``snapshot_ids``: a run put back by ``uwbench restore`` keeps the run id of the snapshot it came from
    (its ``restored_run_id`` tag) instead of this store's, so recording a restored snapshot again changes
    nothing in it (the leaderboard's board folder; a study report keeps this store's ids, which its
    traces are looked up by)."""
    from uwbench.tracking import mlflow as tracking

    frame = tracking.search_runs([study_id], uri)
    rows = normalise_mlflow(frame, study_id)
    if select is not None:
        rows = select(rows)
    original = restored_ids(frame) if snapshot_ids else {}
    curves = []
    if with_curves:
        finals = [r["run_id"] for r in rows if r.get("role") == "final"]
        for run_id, metric, step, value in tracking.metric_histories(finals, CURVE_METRICS, uri):
            curves.append({"run_id": original.get(run_id, run_id), "metric": metric, "step": int(step),
                           "value": value})
    rows = [dict(r, run_id=original.get(r["run_id"], r["run_id"])) for r in rows]
    curves_csv = curves_text(curves)
    return Snapshot(runs_text(with_steps(rows, read_csv_text(curves_csv, ("step", "value")))), curves_csv)
