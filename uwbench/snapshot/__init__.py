"""The recorded runs a report or a board is made from, and their snapshot (``runs.csv``, ``curves.csv``,
``traces.csv``): the one data format below ``sweeps`` (which restores a snapshot into MLflow and Optuna),
``report`` and ``leaderboard`` (which compute from it).

A report is a pure function of recorded runs (docs/design.md §1). MLflow rows are first normalised into a
fixed set of columns and written as text with a stable float format; the report is then computed from
that text, parsed back. So a report built from MLflow and one rebuilt from its committed snapshot
(``uwbench report --from-csv``) are the same bytes, and a rebuild of unchanged data gives no diff.

Snapshot files (UTF-8, ``\\n`` line ends, rows sorted):

- ``runs.csv``   one row per trial / final run (parent ``role=cell`` runs are left out): ``columns()``.
- ``curves.csv`` the learning curves of the final runs: ``run_id, metric, step, value``.
- ``traces.csv`` one recorded memory trace per traced cell (sample 0 of a test batch):
  ``cell, run_id, array, row, col, value`` (see ``uwbench.report.data.traces.trace_arrays``).

Modules: ``columns`` (the files' columns and the restore tags), ``text`` (the text form), ``check`` (a file
refused before use), ``files`` (``Snapshot``), ``mlflow_rows`` (MLflow's runs as rows), ``folders`` (a study
report's folder or a board's). This package exports the first five's public names.
"""
from uwbench.snapshot.check import SnapshotError, check_snapshot_text
from uwbench.snapshot.columns import (CURVE_COLUMNS, CURVE_METRICS, INTERRUPTED, METRIC_COLUMNS, RESTORED_RUN_ID,
                                      RESTORED_TRACE, TRACE_COLUMNS, all_columns, columns, float_columns, int_columns,
                                      numeric_columns)
from uwbench.snapshot.files import Snapshot
from uwbench.snapshot.mlflow_rows import from_mlflow, normalise_mlflow, restored_ids
from uwbench.snapshot.text import (curves_text, format_value, read_csv_text, runs_text, to_csv_text, traces_text,
                                   with_steps)

__all__ = ["CURVE_COLUMNS", "CURVE_METRICS", "INTERRUPTED", "METRIC_COLUMNS", "RESTORED_RUN_ID", "RESTORED_TRACE",
           "TRACE_COLUMNS", "Snapshot", "SnapshotError", "all_columns", "check_snapshot_text", "columns", "curves_text",
           "float_columns", "format_value", "from_mlflow", "int_columns", "normalise_mlflow", "numeric_columns",
           "read_csv_text", "restored_ids", "runs_text", "to_csv_text", "traces_text", "with_steps"]
