"""Reports: the paper's tables and figures regenerated from recorded runs (docs/design.md §10).

``report_study("studies/quickstart.yaml")`` reads the study's runs from MLflow (or, when MLflow has none,
from the committed ``reports/<id>/runs.csv``), and writes ``reports/<id>/`` and the index
``reports/README.md``; ``report_from_csv`` rebuilds a report from its ``runs.csv`` alone.

A report is a one-way pipeline of four subpackages, each importing only the ones before it
(``tests/repo/test_import_graph.py`` checks it):

- ``data``: what the report reads: the study as the report sees it (``study``), other run sets beside it
  (``protocols``), memory traces from checkpoints (``traces``), the profile guard of a folder (``guard``);
- ``analysis``: values computed from it: per-cell summaries (``summary``), how cells are named (``labels``),
  time (``timing``), cost (``compute``), the Pareto front (``pareto``), the search analysis (``search``);
- ``verdicts``: the paper's claims as data (``claims``), each cell's regime (``regime``), the tests
  (``stats``), the claims and orderings checked (``judge``) and run sets compared (``protocols``);
- ``rendering``: the only part that writes files: tables as text (``tables``, ``text``, ``verdict_tables``,
  ``protocols``, ``search``), figures (``figures``, ``search_figures``), the folder and its README
  (``render``), report.html (``page``), the index and the README's results block (``index``,
  ``readme_block``), a traced fall's files (``falls``) and the rebuild rule (``compare``).

Calculation returns values; rendering lays them out and writes them. The table type is ``uwbench.tabular``'s,
the PNG writer ``uwbench.png``'s, a present number ``uwbench.values.is_number``.

Layers: a report is computed from a snapshot (``uwbench.snapshot``, below); its search analysis reads the
Optuna storage a sweep kept (``uwbench.sweeps``, below); the leaderboard (``uwbench.leaderboard``) is above
and never imported here: a board's folder is only told apart (``snapshot.folders``) and left alone.
"""
from __future__ import annotations

import os
from typing import Callable, Optional

from uwbench.errors import NotFoundError, UserError

SOURCES = ("auto", "mlflow", "csv")
DEFAULT_OUT = "reports"  # where study reports go: <out>/<study id>/ and the index <out>/README.md


def report_study(path: str, tracking_uri: Optional[str] = None, out: str = DEFAULT_OUT, source: str = "auto",
                 traces: bool = True, studies_dir: Optional[str] = None, index: bool = True,
                 profile: Optional[str] = None, backend: Optional[str] = None,
                 log: Callable[[str], None] = print, storage: Optional[str] = None, overrides=None,
                 force: bool = False):
    """Build ``<out>/<id>/`` for the study file ``path``; returns the ``render.Report``.

    ``source``: ``mlflow`` (the experiment named by the study id must exist), ``csv`` (the committed
    ``<out>/<id>/runs.csv``), ``auto`` (MLflow when it has the experiment, else the CSV, else an empty
    report with every cell not run). ``traces``: record memory traces from checkpoints (MLflow only).
    ``profile``: whose runs to report (default: the study's default profile if it has runs, then the
    others; see ``data.study.select_run_set``). ``backend``: whose sweep (optuna | ray) to report when the
    study was swept by both (default: the one with more finished final runs; see ``data.study.one_backend``).
    ``storage``: the Optuna storage the sweep used (default: its default journal under runs/), read for the
    search analysis of a report made from MLflow (``uwbench.report.analysis.search``). ``overrides``: the
    ``--set`` values of the sweep to report (``{section: {key: value}}``, part of its spec hash). A folder
    holding a report of another profile is not replaced unless ``force`` (``uwbench.report.data.guard``).
    """
    from uwbench import spec as spec_mod
    from uwbench import snapshot as snap_mod
    from uwbench.paths import user_folder
    from uwbench.report.data import guard, study as study_mod
    from uwbench.report.rendering import index as index_mod, render

    if source not in SOURCES:
        raise UserError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    user_folder(out, "--out")  # never /, a system folder or the home folder itself
    spec = spec_mod.load(path)
    if overrides:  # a --set key no cell has, or a grid axis: the error `uwbench sweep --set` gives
        spec_mod.expand(spec, profile, path, overrides=overrides)
    study_id = spec.id
    folder = os.path.join(out, study_id)
    from uwbench.snapshot.folders import is_board_folder

    if is_board_folder(folder):  # its runs.csv is the board's (every row's runs, or the baselines so far)
        raise UserError(f"{folder} is a leaderboard folder (board.md or progress.md): a study report there would "
                         "replace the board's runs.csv; `uwbench leaderboard --rebuild` writes that folder, and a "
                         "study report of the suite goes elsewhere (--out DIR)")
    snap = None
    search_storage = None
    if source in ("auto", "mlflow"):
        from uwbench.tracking import mlflow as tracking

        if tracking.experiment_exists(study_id, tracking_uri):
            notes = []

            def select(rows):
                kept, note = study_mod.select_run_set(rows, spec, profile, path, backend, overrides)
                notes.append(note)
                return kept

            snap = snap_mod.from_mlflow(study_id, tracking_uri, select=select)
            for note in filter(None, notes):
                log(f"{study_id}: {note}")
            if traces:
                view = study_mod.load(path, snap.runs, overrides)
                found = _collect_traces(snap, [c.id for c in view.cells], tracking_uri, log)
                snap = snap_mod.Snapshot(snap.runs_csv, snap.curves_csv, snap_mod.traces_text(found))
            log(f"{study_id}: {len(snap.runs)} runs from MLflow ({tracking.resolve_uri(tracking_uri)})")
            from uwbench.report.analysis import search

            search_storage = storage or search.default_storage(study_id)
        elif source == "mlflow":
            raise NotFoundError(f"no MLflow experiment {study_id!r} at {tracking.resolve_uri(tracking_uri)}; "
                                    f"run `uwbench sweep {path}` first (or `--tracking-uri`)")
    if snap is None and source in ("auto", "csv"):
        if os.path.exists(os.path.join(folder, "runs.csv")):
            snap = snap_mod.Snapshot.from_dir(folder)
            log(f"{study_id}: {len(snap.runs)} runs from {os.path.join(folder, 'runs.csv')}")
        elif source == "csv":
            raise NotFoundError(f"no {os.path.join(folder, 'runs.csv')}: build the report from MLflow first")
    if snap is None:
        snap = snap_mod.Snapshot(snap_mod.runs_text([]))
        log(f"{study_id}: no runs yet (every cell is shown as not run)")
    _check_replaceable(folder, render.GENERATED, OTHER_OUT)
    guard.check(folder, snap.runs, force)
    view = study_mod.load(path, snap.runs, overrides)
    report = render.build_report(view, snap, folder, search_storage=search_storage)
    if index:
        index_mod.write_index(out, studies_dir or os.path.dirname(path) or ".")
    return report


from uwbench.report.data.guard import generated  # noqa: E402 - where the marker lives (below index and render)
SNAPSHOT_FILES = ("runs.csv", "curves.csv", "traces.csv")


def report_from_csv(csv_path: str, out: Optional[str] = None, studies_dir: str = "studies", index: bool = True,
                    log: Callable[[str], None] = print, force: bool = False):
    """Rebuild a report from a ``runs.csv`` snapshot (and its sibling curves.csv / traces.csv), no MLflow.

    The snapshot is checked before anything is written (``snapshot.check_snapshot_text``). ``out`` None: the
    report is written beside the snapshot, in its own folder, never anywhere else; the index of the folder
    above is rewritten only when that folder is a reports folder (its README.md is uwbench's index) and the
    snapshot's folder is named by its study; a folder with files of its own that the report would replace
    or remove (not a report folder) is refused. ``out`` given: ``<out>/<id>/`` and the index ``<out>/README.md``.
    A folder holding a report of another profile is not replaced unless ``force`` (``uwbench.report.data.guard``).
    """
    from uwbench import snapshot as snap_mod
    from uwbench.paths import user_folder
    from uwbench.report.data import guard
    from uwbench.report.data.study import study_for_snapshot
    from uwbench.report.rendering import index as index_mod, render

    if out is not None:
        user_folder(out, "--out")  # never /, a system folder or the home folder itself
    src = os.path.dirname(os.path.abspath(csv_path))
    if os.path.basename(csv_path) != "runs.csv":
        raise UserError(f"--from-csv expects a report's runs.csv, got {csv_path!r}")
    snap = snap_mod.Snapshot.from_dir(src)
    view = study_for_snapshot(snap, studies_dir, src)
    if out is None:
        folder, root = src, os.path.dirname(src)
        _check_replaceable(src, render.GENERATED, GIVE_OUT)
        index_root = root if os.path.basename(src) == view.id and generated(os.path.join(root, "README.md")) else None
    else:
        folder, index_root = os.path.join(out, view.id), out
        _check_replaceable(folder, render.GENERATED, OTHER_OUT)
        if index:
            index_mod.check_index(out)
    guard.check(folder, snap.runs, force)
    report = render.build_report(view, snap, folder)
    log(f"{view.id}: {len(snap.runs)} runs from {csv_path}")
    if index and index_root is not None:
        index_mod.write_index(index_root, studies_dir)
    return report


GIVE_OUT = "give --out FOLDER to write the report to FOLDER/<study id>/ instead"
OTHER_OUT = "give --out another folder, or move those files out of it"


def _check_replaceable(folder: str, patterns, fix: str = GIVE_OUT) -> None:
    """A report is written into ``folder`` only when that replaces nothing but a report: the folder holds the
    snapshot alone, or it is a report folder (its README.md generated). ``fix``: the way out the error names."""
    import glob

    if not os.path.isdir(folder) or generated(os.path.join(folder, "README.md")):
        return
    theirs = sorted({os.path.basename(p) for pattern in patterns for p in glob.glob(os.path.join(folder, pattern))}
                    - set(SNAPSHOT_FILES))
    if theirs:
        shown = ", ".join(theirs[:5]) + (f" and {len(theirs) - 5} more" if len(theirs) > 5 else "")
        raise UserError(f"{folder} is not a report folder and holds files a report would replace or remove "
                         f"({shown}); {fix}")


def _collect_traces(snap, cell_order, uri, log):
    from uwbench.report.data import traces as traces_mod

    targets = traces_mod.trace_targets(snap.runs, cell_order)
    if not targets:
        return {}
    return traces_mod.collect(snap.runs, cell_order, uri, log=log)
