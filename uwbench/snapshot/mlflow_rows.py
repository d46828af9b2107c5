"""MLflow's runs as snapshot rows: ``mlflow.search_runs`` rows normalised into ``columns()``, and a study's
runs read into a ``Snapshot``. No mlflow import here: MLflow is read through ``uwbench.tracking.mlflow``
(imported lazily)."""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional

import pandas as pd

from uwbench import axes
from uwbench.snapshot.columns import (CURVE_METRICS, INTERRUPTED, RESTORED_RUN_ID, STEPS_PARAM, all_columns,
                                      float_columns, int_columns)
from uwbench.snapshot.files import Snapshot
from uwbench.snapshot.text import curves_text, read_csv_text, runs_text, with_steps

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
        for col in all_columns():
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
