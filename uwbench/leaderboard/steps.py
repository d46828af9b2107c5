"""The steps of `uwbench leaderboard`: a plugin in, its contract checked, its cells swept, its board out.

1. ``load_plugin``: import the plugin (a module name or a ``.py`` file) and name it in ``$UWBENCH_PLUGINS``
   (its folder on ``PYTHONPATH``), so every sweep worker imports it too.
2. the contract (``contract``, beside this module) is checked before anything runs.
3. ``writer_study``: a study file for the new row alone, written under ``<runs>/leaderboard/``: the
   suite's file (``studies/leaderboard.yaml``) with its cell groups replaced by one group, the new writer
   (or model) on the suite's grid of tasks and memory sizes. Every other setting, the seeds and the
   profiles are the suite's, so its cells are the baselines' twins. It is swept like any study
   (``sweeps.driver.sweep``: MLflow, resume, ``--workers``), under its own id ``<suite id>_<row>``.
4. ``study_snapshot``: its runs (one profile, the current spec hash) from MLflow, as a snapshot.
5. ``merge`` with the recorded baselines (``reports/leaderboard/runs.csv`` and ``curves.csv``; never
   re-run) after ``check_comparable``, and ``write_board``: the snapshot and the board files.

Recording the baselines (``--record-baselines``) can span several machines or sessions: each new machine
puts the folder's recorded runs back into its stores with ``uwbench restore`` before it sweeps the rest, and
the record refuses a store that lacks some of them (``unrestored``) rather than drop them. Until every
planned baseline run is recorded (``missing_runs``) it writes only runs.csv, curves.csv and progress.md
(``write_progress``); then it writes the board, and only when at least ``board.MIN_CONVERGED`` of its
baseline cells converged (``board.check_committable``): the rule a committed board meets; the columns with
a baseline cell not converged are marked † and not counted.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from uwbench import atomic, env
from uwbench.errors import NotFoundError, UserError
from uwbench.snapshot.folders import PROGRESS_FILE

if TYPE_CHECKING:  # heavy imports (pandas, matplotlib) stay inside the functions: `uwbench --help` is instant
    from uwbench.leaderboard.board import Board
    from uwbench.snapshot import Snapshot

SUITE = os.path.join("studies", "leaderboard.yaml")
BOARD_DIR = os.path.join("reports", "leaderboard")
SNAPSHOT_FILES = ("runs.csv", "curves.csv")
# what a new row's finished runs must share with the baselines'
SAME = ("profile", "steps", "lr", "clip", "clip_mode", "decoder_write")


def work_dir() -> str:
    """Where the generated study files and, by default, the new boards go: ``<runs>/leaderboard``."""
    return os.path.join(env.runs_dir(), "leaderboard")


def load_plugin(ref: str) -> str:
    """Import the plugin ``ref`` (``mypkg.mywriter`` or ``path/to/mywriter.py``) and add it to
    ``$UWBENCH_PLUGINS`` (a file's folder to ``sys.path`` and ``PYTHONPATH``); returns the module name."""
    from uwbench.spec.plugins import PLUGINS_ENV

    name = ref
    if ref.endswith(".py") or os.sep in ref:
        if not os.path.isfile(ref):
            raise NotFoundError(f"--plugin {ref}: no such file; give a .py file or an importable module name")
        folder = os.path.dirname(os.path.abspath(ref))
        name = os.path.splitext(os.path.basename(ref))[0]
        if folder not in sys.path:
            sys.path.insert(0, folder)
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([folder] + paths))
    try:
        importlib.import_module(name)
    except ImportError as exc:
        raise UserError(f"--plugin {ref}: the module {name!r} cannot be imported ({exc}); put its folder on "
                         "PYTHONPATH or give the .py file's path") from exc
    named = [m for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]
    os.environ[PLUGINS_ENV] = ",".join(dict.fromkeys(named + [name]))
    return name


def row_name(model: str, writer: str) -> str:
    """The new row's name (its cell group): ``<model>_<writer>``, or the model alone with regular writing."""
    raw = model if writer == "regular" else f"{model}_{writer}"
    return re.sub(r"[^a-z0-9_]+", "_", raw.lower()).strip("_") or "row"


def _suite_grid(data: Mapping[str, Any], path: str) -> Dict[str, Any]:
    grids = {json.dumps(g.get("grid", {}), sort_keys=True) for g in data["cells"]}
    if len(grids) != 1:
        raise UserError(f"{path}: the suite's cell groups must share one grid (the board's columns), got {len(grids)}")
    return dict(data["cells"][0].get("grid", {}))


def suite_model_keys(data: Mapping[str, Any]) -> set:
    """The model settings the suite gives every row (fixed, profiles, grid): a new row may not change them."""
    keys = set((data.get("fixed") or {}).get("model", {}) or {})
    for prof in (data.get("profiles") or {}).values():
        keys |= set((prof or {}).get("model", {}) or {})
    keys |= {k.split(".", 1)[1] for k in _suite_grid(data, "") if k.startswith("model.")}
    return keys | {"name", "writer"}


def writer_study(suite: str, name: str, model: str, writer: str, settings: Mapping[str, Any],
                 folder: Optional[str] = None) -> str:
    """Write the new row's study file (module docstring, step 3); returns its path."""
    import yaml

    from uwbench.spec.load import read_yaml

    data = read_yaml(suite)
    if "-" in name or not re.fullmatch(r"[a-z0-9][a-z0-9_]*", name):
        raise UserError(f"row name {name!r}: use lower-case letters, digits and '_' (no '-'), e.g. my_writer")
    if name in {g.get("name", g["model"]) for g in data["cells"]}:
        raise UserError(f"row name {name!r} is a baseline row of {suite}; give the new row another --name")
    fixed = sorted(set(settings) & suite_model_keys(data))
    if fixed:
        raise UserError(f"--set model.{fixed[0]}: the suite sets {', '.join(fixed)} for every row (a fair board "
                         "shares them); --set gives only the writer's or the model's own settings")
    grid = _suite_grid(data, suite)
    data.update(id=f"{data['id']}_{name}", title=f"{data['title']} | the row {name}",
                cells=[{"model": model, "name": name, "label": name,
                        "set": {"model": {"writer": writer, **dict(settings)}}, "grid": grid}])
    data.pop("paper", None)
    folder = folder or work_dir()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{data['id']}.yaml")
    header = f"# Generated by `uwbench leaderboard` from {suite}: the row {name} alone (do not edit)\n"
    return atomic.write_text(path, header + yaml.safe_dump(data, sort_keys=False, width=110))


def study_snapshot(path: str, profile: Optional[str], uri: Optional[str]) -> "Snapshot":
    """A study's runs of one profile at its current spec hash, read from MLflow (``study.select_run_set``);
    a run restored from the board folder keeps the board's run id (``snapshot.from_mlflow(snapshot_ids=True)``)."""
    from uwbench import spec as spec_mod
    from uwbench import snapshot as snap_mod
    from uwbench.report.data import study as study_mod

    spec = spec_mod.load(path)
    profile = profile or spec.default_profile
    return snap_mod.from_mlflow(spec.id, uri, select=lambda rows: study_mod.select_run_set(
        rows, spec, profile, path)[0], snapshot_ids=True)


def _records(frame) -> List[Dict[str, Any]]:
    import numpy as np

    out = []
    for rec in frame.to_dict("records"):
        out.append({k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in rec.items()})
    return out


def merge(base: Optional["Snapshot"], add: "Snapshot") -> "Snapshot":
    """``base``'s runs and curves with those of ``add``'s studies replaced by ``add``'s."""
    from uwbench.snapshot import Snapshot, curves_text, runs_text

    if base is None:
        return Snapshot(add.runs_csv, add.curves_csv)
    studies = set(add.runs["study"])
    runs = [r for r in _records(base.runs) if r["study"] not in studies] + _records(add.runs)
    kept = {r["run_id"] for r in runs} - set(add.runs["run_id"])
    curves = [c for c in _records(base.curves) if c["run_id"] in kept] + _records(add.curves)
    return Snapshot(runs_text(runs), curves_text(curves))


def _run_keys(frame) -> set:
    """(cell, seed, grid point) of each run of a runs frame: a run's identity within one spec hash."""
    from uwbench.selection import point_key

    return {(c, int(s), point_key(json.loads(p) if isinstance(p, str) and p else {}))
            for c, s, p in zip(frame["cell"], frame["seed"], frame["search_params"])}


def unrestored(base: Optional["Snapshot"], add: "Snapshot") -> List[Tuple[str, int]]:
    """The finished baseline runs (cell, seed) the board folder ``base`` records at ``add``'s spec hash and
    profile that ``add`` (the suite's runs from one MLflow store) lacks: recording ``add`` would drop them.
    A sweep on a new machine puts them back first with ``uwbench restore`` (``sweeps/restore.py``)."""
    if base is None or len(add.runs) == 0:
        return []
    made = {(str(st), str(h), str(p)) for st, h, p in zip(add.runs["study"], add.runs["spec_hash"], add.runs["profile"])}
    old = _finished(base)
    if len(old) == 0:
        return []
    old = old[[(str(st), str(h), str(p)) in made for st, h, p in zip(old["study"], old["spec_hash"], old["profile"])]]
    return sorted((c, s) for c, s, _ in _run_keys(old) - _run_keys(_finished(add)))


def missing_runs(snap: "Snapshot", suite: str, profile: Optional[str]) -> Tuple[List[Tuple[str, int]], int]:
    """The suite's planned baseline runs (cell, seed) that ``snap`` holds no finished final run of, at the
    suite's current spec hash and ``profile`` (what a sweep still has to run before the board is written),
    and how many runs the suite plans. Without ``profile``: the one the snapshot's baseline runs were made at,
    else the suite's default."""
    from uwbench.selection import point_key
    from uwbench.sweeps import planning

    plan = _suite_plan(snap, suite, profile)
    done = _finished(snap, {plan.id})
    have = _run_keys(done[(done["spec_hash"].astype(str) == plan.spec_hash)
                          & (done["profile"].astype(str) == plan.profile)])
    jobs = [(cell.id, job) for cell in plan.cells for job in planning.final_jobs(plan, cell.id, [])]
    return [(c, j.seed) for c, j in jobs if (c, j.seed, point_key(j.params)) not in have], len(jobs)


def write_progress(snap: "Snapshot", folder: str, suite: str, profile: Optional[str], missing: List[Tuple[str, int]],
                   total: int) -> List[str]:
    """The baselines recorded so far: runs.csv, curves.csv and ``progress.md`` (per row, the runs recorded of
    the suite's, their CPU core-hours, its cells converged so far by the board's regime rule; the cells still
    to run; how to go on), no board yet."""
    from uwbench.leaderboard import board as board_mod
    from uwbench.tabular import Table, to_markdown
    from uwbench.leaderboard.board import MIN_CONVERGED, row_of
    from uwbench.report.analysis.compute import cpu_seconds
    from uwbench.sweeps import planning

    plan = _suite_plan(snap, suite, profile)
    done = _finished(snap, {plan.id})
    secs = cpu_seconds(done) if len(done) else None
    settled: Dict[str, List] = {}  # row -> [converged, cells with a finished run, the others' positions]
    for b in (board_mod.build(snap).baseline_cells if len(done) else []):
        if b.cell is not None:
            entry = settled.setdefault(b.row, [0, 0, []])
            entry[0], entry[1] = entry[0] + b.converged, entry[1] + 1
            if not b.converged:
                entry[2].append(f"{b.position.label} ({b.state})")
    rows = []
    for group in dict.fromkeys(row_of(c.id) for c in plan.cells):
        planned = sum(len(planning.final_jobs(plan, c.id, [])) for c in plan.cells if row_of(c.id) == group)
        mine = done["cell"].map(row_of) == group if len(done) else []
        left = sorted({c for c, _ in missing if row_of(c) == group})
        conv, seen, others = settled.get(group, [0, 0, []])
        rows.append([group, f"{planned - sum(row_of(c) == group for c, _ in missing)} of {planned}",
                     f"{float(secs[mine].sum()) / 3600:.2f}" if secs is not None else "0.00",
                     f"{conv} of {seen}" + (f": not {', '.join(others)}" if others else ""),
                     ", ".join(left) or "none"])
    table = Table(title="progress", columns=["Row", "Runs recorded", "CPU core-hours",
                                                     "Cells converged so far (of those with a run)",
                                                     "Cells with runs to go"], rows=rows)
    text = (f"# Leaderboard: baselines being recorded\n\n<!-- generated by `uwbench leaderboard --record-baselines`; "
            f"do not edit -->\n\n**{total - len(missing)} of {total} baseline runs recorded** (`{suite}`, profile "
            f"`{plan.profile}`, spec hash `{plan.spec_hash}`), in `runs.csv` and `curves.csv` beside this file. The "
            f"board (`board.md`) is written when every run is recorded and at least {MIN_CONVERGED:.0%} of the "
            "baseline cells converged. To go on, on any machine:\n\n```bash\n"
            f"uwbench restore {suite} --from {folder}   # the recorded runs back into MLflow and Optuna\n"
            f"uwbench sweep {suite} --workers 2   # the rest\n"
            "uwbench leaderboard --record-baselines\n```\n\n" + to_markdown(table)
            + "\nCells converged so far: the regime rule of the board (docs/design.md §10) on the seeds recorded so "
              f"far, a forecast of the {MIN_CONVERGED:.0%} rule, which the board applies to every seed.\n")
    out = write_snapshot(snap, folder)
    return out + [atomic.write_text(os.path.join(folder, PROGRESS_FILE), text)]


def _suite_plan(snap: "Snapshot", suite: str, profile: Optional[str]):
    """The suite's plan at ``profile``; without one, at the one profile the snapshot's finished baseline runs
    were made at, else the suite's default."""
    from uwbench.spec import load, load_plan

    if profile is None:
        made = {str(p) for p in _finished(snap, {load(suite).id})["profile"]} - {"", "nan"}
        profile = made.pop() if len(made) == 1 else None
    return load_plan(suite, profile)


def write_snapshot(snap: "Snapshot", folder: str) -> List[str]:
    """Only the snapshot files (runs.csv, curves.csv) into ``folder``: the baselines recorded so far."""
    os.makedirs(folder, exist_ok=True)
    return [atomic.write_text(os.path.join(folder, name), text)
            for name, text in zip(SNAPSHOT_FILES, (snap.runs_csv, snap.curves_csv))]


def read_board(folder: str) -> Optional["Snapshot"]:
    """The snapshot a board folder holds (None when it has no runs.csv)."""
    from uwbench.snapshot import Snapshot

    return Snapshot.from_dir(folder) if os.path.exists(os.path.join(folder, "runs.csv")) else None


def _finished(snap: "Snapshot", studies: Optional[set] = None):
    from uwbench.selection import finished_finals

    r = finished_finals(snap.runs)
    return r[r["study"].isin(studies)] if studies is not None else r


def check_comparable(base: "Snapshot", add: "Snapshot", suite_id: str) -> None:
    """The new row's runs and the baselines' share ``SAME`` and the board's columns; else a ValueError
    naming the difference and the fix."""
    ours, theirs = _finished(add), _finished(base, {suite_id})
    if len(theirs) == 0:
        raise UserError(f"the board's runs.csv holds no finished baseline run of the suite {suite_id!r}: sweep the "
                         "suite and record it first (docs/extending.md, \"The leaderboard\")")
    column = lambda f: [(t, int(s), int(d)) for t, s, d in zip(f["task"], f["seq_len"], f["memory_size"])]  # noqa: E731
    ours, theirs = ours.assign(_column=column(ours)), theirs.assign(_column=column(theirs))
    extra = sorted(set(ours["_column"]) - set(theirs["_column"]))
    if extra:
        raise UserError(f"the new row has cells the baselines lack (task, T, D): {extra}; the suite changed since "
                         "the baselines were recorded: record them again")
    for col in SAME:  # per column: a profile's cell_set may give some columns other settings, every row alike
        for key, mine in ours.groupby("_column"):
            a, b = _values(mine[col]), _values(theirs.loc[theirs["_column"] == key, col])
            if a and a != b:
                where = f" at (task, T, D) {key}" if len(set(theirs["_column"])) > 1 else ""
                raise UserError(f"the new row's runs have {col} {', '.join(a)} and the baselines' {', '.join(b)}"
                                 f"{where}: a board compares runs made alike; run the row with the baselines' "
                                 f"{col} (e.g. --profile), or record baselines made with the row's")


def _values(series) -> List[str]:
    from uwbench.snapshot import format_value

    return sorted({format_value(v) for v in series} - {""})


def write_board(snap: "Snapshot", folder: str, title: str = "Leaderboard",
                min_converged: Optional[float] = None) -> Tuple["Board", List[str]]:
    """The snapshot (runs.csv, curves.csv) and every board file into ``folder``. With ``min_converged``,
    nothing is written unless at least that share of the baseline cells converged
    (``board.check_committable``: a ValueError naming the count and the cells)."""
    from uwbench.leaderboard import board as board_mod
    from uwbench.leaderboard import render as board_render

    board = board_mod.build(snap)
    if min_converged is not None:
        board_mod.check_committable(board, min_converged)
    files = write_snapshot(snap, folder)
    if os.path.exists(os.path.join(folder, PROGRESS_FILE)):  # the baselines are all in: the board replaces it
        os.remove(os.path.join(folder, PROGRESS_FILE))
    return board, files + board_render.write(board, folder, title)


def rebuild(folder: str) -> Tuple["Board", List[str]]:
    """Remake a board folder's files from its runs.csv and curves.csv alone (no MLflow). A figure or page
    that comes out the same by ``report.compare``'s rule keeps its old bytes, so rebuilding an unchanged
    board on any machine leaves it untouched in git."""
    from uwbench.report.rendering import compare

    snap = read_board(folder)
    if snap is None:
        raise NotFoundError(f"no runs.csv in {folder}: a board is built from its runs.csv and curves.csv")
    with compare.unchanged_kept(os.path.dirname(os.path.abspath(folder))):
        return write_board(snap, folder)
