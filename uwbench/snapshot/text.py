"""The text form of a snapshot: the one place floats become strings (``format_value``), CSV written with it
and parsed back (``to_csv_text``, ``read_csv_text``), and the three files' texts with their rows sorted."""
from __future__ import annotations

import csv
import io
import math
from typing import Dict, Iterable, List, Mapping, Sequence

import numpy as np
import pandas as pd

from uwbench.snapshot.columns import CURVE_COLUMNS, OPTIONAL_COLUMNS, TRACE_COLUMNS, columns

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
    """``columns()``, and each optional column that some row has a value in, in ``OPTIONAL_COLUMNS`` order."""
    rows = sorted(rows, key=_sort_key)
    held = tuple(c for c in OPTIONAL_COLUMNS if any(format_value(r.get(c)) for r in rows))
    return to_csv_text(columns() + held, rows)


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

