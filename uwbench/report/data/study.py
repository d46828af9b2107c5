"""What a report needs to know about a study, whatever it was read from.

``StudyView`` is the report's narrow view of a study spec (``uwbench.spec``): id, title, question,
the cells with their axes and the paper's reported value, the spec hash and the deviations. It is built
from a loaded spec (``from_spec``), from a plain mapping (tests, fixtures: ``from_mapping``), or, for a
snapshot whose spec is gone, from the runs alone (``from_runs``).
"""
from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from uwbench import axes, metrics
from uwbench.errors import UserError
from uwbench.values import present

# Default tolerances (in the metric's report units): accuracy in percentage points, MSE relative.
DEFAULT_TOLERANCE = {"accuracy": 5.0, "mse": 0.25}


@dataclass
class CellView:
    id: str
    axes: Dict[str, Any] = field(default_factory=dict)
    paper: Optional[float] = None  # the paper's reported value, in report units (accuracy in %)
    label: str = ""  # the spec's display name
    paper_time_reduction: Optional[float] = None  # the paper's training-time reduction (%), if reported
    stands_for: Optional[str] = None  # the paper cell whose value ``paper`` is, when not this one
    task: Dict[str, Any] = field(default_factory=dict)  # the cell's resolved task settings (``name`` included)
    paper_steps: Optional[int] = None  # the updates the paper's profile gives the paper cell it stands for
    seeds: List[int] = field(default_factory=list)  # a faithful cell's planned seeds (its profile's), else empty


@dataclass
class StudyView:
    id: str
    title: str = ""
    question: str = ""
    task: str = ""
    mode: str = ""
    metric: str = "accuracy"  # accuracy | mse
    cells: List[CellView] = field(default_factory=list)
    spec_hash: str = ""
    path: str = ""  # the study file, relative to the working directory (for commands shown)
    deviations: List[str] = field(default_factory=list)
    profiles: List[str] = field(default_factory=list)
    default_profile: str = ""  # the study's default profile (a report of another names its --profile)
    tolerance: Optional[float] = None
    paper_ref: str = ""  # which table / figure of the paper the study reproduces
    paper_notes: str = ""
    objectives: List[Tuple[str, str]] = field(default_factory=list)  # (metric, direction): a multi-objective study
    protocol_label: str = ""  # this study's own runs under ``protocols:`` (report/protocols.py)
    protocols_other: List[Tuple[str, str]] = field(default_factory=list)  # (label, snapshot folder) of other run sets
    # (profile, snapshot folder) of other profiles' run sets whose cells are more columns of this report's table:
    # the study's ``more_columns``, given to the default profile's report only
    more_columns: List[Tuple[str, str]] = field(default_factory=list)
    whole_table_in: str = ""  # for a report of a ``more_columns`` profile: the default profile, whose report has them all

    def stand_ins(self) -> str:
        """'ours stands for theirs' of every cell whose paper value is another (renamed) cell's, or ''."""
        pairs = [f"{c.id} → {c.stands_for}" for c in self.cells if c.stands_for and c.stands_for != c.id]
        return ("the paper's value beside each of these cells is that of the paper's cell it stands for: "
                + ", ".join(pairs)) if pairs else ""

    @property
    def tol(self) -> float:
        return self.tolerance if self.tolerance is not None else DEFAULT_TOLERANCE.get(self.metric, 5.0)

    def cell(self, cell_id: str) -> Optional[CellView]:
        for c in self.cells:
            if c.id == cell_id:
                return c
        return None


def _num(value) -> Optional[float]:
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def from_mapping(data: Mapping[str, Any], path: str = "") -> StudyView:
    """A study from a plain mapping: ``{"id", "title", "question", "task", "mode", "metric",
    "spec_hash", "deviations", "tolerance", "cells": [{"id", <axes>..., "paper": value}]}``."""
    cells = []
    for c in data.get("cells", []):
        values = {k: c[k] for k in axes.cell_names() if c.get(k) is not None}
        cells.append(CellView(id=str(c["id"]), axes=values, paper=_num(c.get("paper")), label=str(c.get("label", "")),
                              paper_time_reduction=_num(c.get("paper_time_reduction"))))
    return StudyView(
        id=str(data["id"]), title=str(data.get("title", "")), question=str(data.get("question", "")),
        task=str(data.get("task", "")), mode=str(data.get("mode", "")),
        metric=str(data.get("metric", "accuracy")), cells=cells, spec_hash=str(data.get("spec_hash", "")),
        path=path or str(data.get("path", "")), deviations=[str(d) for d in data.get("deviations", [])],
        profiles=[str(p) for p in data.get("profiles", [])], tolerance=_num(data.get("tolerance")),
        paper_ref=str(data.get("paper_ref", "")),
        protocol_label=str((data.get("protocols") or {}).get("label", "")),
        protocols_other=[(str(o["label"]), str(o["snapshot"])) for o in (data.get("protocols") or {}).get("others", [])],
    )


def from_runs(study_id: str, runs) -> StudyView:
    """A study known only from its runs (no spec file): cells in sorted order, no paper values."""
    cells = []
    if len(runs):
        for cell_id, g in runs.groupby("cell", sort=True):
            first = g.iloc[0]
            values = {k: first[k] for k in axes.cell_names() if k in g.columns and present(first[k])}
            cells.append(CellView(id=str(cell_id), axes=values))
    from uwbench.selection import frame_measure

    metric = frame_measure(runs).name
    return StudyView(id=study_id, title=study_id, cells=cells, metric=metric)


# --------------------------------------------------------------------------------------------------
# Study files (uwbench.spec)
# --------------------------------------------------------------------------------------------------


def load(path: str, runs=None, overrides: Optional[Dict[str, Dict[str, Any]]] = None) -> StudyView:
    """Load a study file with ``uwbench.spec`` and view it. ``runs`` (a snapshot's runs frame) picks the
    profile(s) whose spec hash the runs carry (``overrides``: the sweep's ``--set`` values), else the
    profile the runs name; without runs the default profile is used."""
    from uwbench import spec as spec_mod

    return from_spec(spec_mod.load(path), path, runs, overrides)


def from_spec(spec, path: str = "", runs=None, overrides: Optional[Dict[str, Dict[str, Any]]] = None) -> StudyView:
    """View a ``uwbench.spec.StudySpec``: its cells come from the plan of the profile the runs were made
    with (matched by spec hash, with the sweep's ``--set`` ``overrides`` when given; else by the runs'
    profile), in the spec's order; paper values in report units."""
    names = _profile_names(spec)
    if overrides is None:
        overrides = runs_overrides(runs)
    plans = [p for _, p in _plans(spec, names, path, overrides)]
    hashes, profiles = set(), set()
    if runs is not None and len(runs) and "spec_hash" in runs.columns:
        hashes = {h for h in runs["spec_hash"] if isinstance(h, str) and h}
    if runs is not None and len(runs) and "profile" in runs.columns:
        profiles = {p for p in runs["profile"] if isinstance(p, str) and p}
    used = ([p for p in plans if p.spec_hash in hashes] or [p for p in plans if p.profile in profiles]
            or plans[:1])
    paper = getattr(spec, "paper", None)
    scale = 100.0 if (paper is not None and paper.unit == "fraction" and paper.metric == "test_accuracy") else 1.0
    time_paper = paper is not None and paper.metric == "training_time_reduction"
    measures = {metrics.get(spec.objectives[0].metric).measure.name}
    if paper is not None and paper.metric in metrics.keys("test"):
        measures.add(metrics.get(paper.metric).measure.name)
    metric = "mse" if "mse" in measures else "accuracy"
    from uwbench import spec as spec_mod

    base = next((p for name, p in _plans(spec, [spec_mod.BASE_PROFILE], path, overrides)), None)
    cells, seen = [], set()
    for plan in used:
        for c in plan.cells:
            if c.id in seen:
                continue
            seen.add(c.id)
            value = _num(c.paper)
            resolved = _resolved(c)
            paper_cell = _base_cell(base, c.paper_cell or c.id)
            cells.append(CellView(id=c.id, axes=axes.cell_axes(resolved), label=c.label,
                                  paper=None if (value is None or time_paper) else value * scale,
                                  paper_time_reduction=value if time_paper else None,
                                  stands_for=c.paper_cell if value is not None else None,
                                  task=dict(resolved.get("task", {})),
                                  paper_steps=_steps(_resolved(paper_cell)) if paper_cell is not None else None,
                                  seeds=list(plan.seeds_of(c.id)) if plan.mode == "faithful" else []))
    return StudyView(
        id=spec.id, title=spec.title.strip(), question=" ".join(spec.question.split()),
        task=str(spec.task.get("name", "")),
        mode=spec.mode, metric=metric, cells=cells,
        spec_hash=", ".join(f"{p.spec_hash} ({p.profile})" for p in used), path=path,
        deviations=[" ".join(d.split()) for d in spec.deviations], profiles=[p.profile for p in used],
        default_profile=spec.default_profile,
        paper_ref=" ".join(spec.artifact.split()) + (
            f"; paper values: {paper.source}" if paper is not None and paper.source and paper.source != spec.artifact
            else ""),
        paper_notes=" ".join(paper.notes.split()) if paper is not None else "",
        objectives=[(o.metric, o.direction) for o in spec.objectives] if spec.multi_objective else [],
        protocol_label=spec.protocols.label if spec.protocols is not None else "",
        protocols_other=[(o.label, o.snapshot) for o in spec.protocols.others
                         if (o.profile or spec.default_profile) in {p.profile for p in used}]
        if spec.protocols is not None else [],
        more_columns=[(m.profile, m.snapshot) for m in getattr(spec, "more_columns", [])]
        if [p.profile for p in used] == [spec.default_profile] else [],
        whole_table_in=spec.default_profile if any(m.profile in {p.profile for p in used}
                                                   for m in getattr(spec, "more_columns", [])) else "",
    )


def select_run_set(rows: List[Dict], spec, profile: Optional[str] = None, path: str = "",
                   backend: Optional[str] = None, overrides: Optional[Dict[str, Dict[str, Any]]] = None
                   ) -> Tuple[List[Dict], str]:
    """The runs one report is made of: one profile at its current spec hash (cell ids do not depend on
    the profile, so the smoke runs of a test and the cpu runs of the demo must not be averaged together),
    from one sweep backend (``one_backend``).

    ``profile`` given: that profile's runs, at the current spec hash when there are any (else the largest
    run set of that profile at an earlier hash, with a note). Otherwise the study's default profile, then
    ``paper``, then the other profiles (sorted), the first that has runs at its current spec hash; else
    the run set (one spec hash) with the most finished final runs, with a note naming the others.
    ``overrides``: the ``--set`` values of the sweep to report (``{section: {key: value}}``); they are
    part of the spec hash, so a ``--set`` sweep's runs are a run set of their own.
    Returns (rows, note); the note is '' when the selection is clean."""
    picked, note = _select_profile(rows, spec, profile, path, overrides)
    picked, backend_note = one_backend(picked, backend)
    return picked, "; ".join(filter(None, (note, backend_note)))


def one_backend(rows: List[Dict], backend: Optional[str] = None) -> Tuple[List[Dict], str]:
    """The runs of one sweep backend. The Optuna and the Ray sweep of one study each record their own
    trials and final seeds (their own parent runs), so pooling them would count each seed twice.

    ``backend`` given: its runs (an error names the backends there are when it has none). Otherwise the
    backend with the most finished final runs (ties: the first by name), with a note naming the others.
    Rows without a backend (runs not made by a sweep) are kept as they are."""
    if not rows:
        return rows, ""
    names = sorted({_backend(r) for r in rows} - {None})
    if backend is not None:
        if backend not in names:
            raise UserError(f"no runs of backend {backend!r} in this run set; backends with runs: "
                             f"{', '.join(names) or 'none'} (drop --backend, or sweep with --backend {backend})")
    elif len(names) <= 1:
        return rows, ""
    else:
        finished = {n: sum(1 for r in rows if _backend(r) == n and r.get("role") == "final"
                           and r.get("status") == "finished") for n in names}
        backend = max(names, key=lambda n: (finished[n], -names.index(n)))
    kept = [r for r in rows if _backend(r) in (backend, None)]
    others = [n for n in names if n != backend]
    note = (f"runs of the {', '.join(others)} sweep(s) left out (not pooled with {backend}'s: each sweep has its "
            f"own seeds); `uwbench report --backend {others[0]}` reports them instead") if others else ""
    return kept, note


def _backend(row: Dict) -> Optional[str]:
    b = row.get("backend")
    return b if isinstance(b, str) and b else None  # missing, '' or NaN: not made by a sweep


def _select_profile(rows: List[Dict], spec, profile: Optional[str], path: str,
                    overrides: Optional[Dict[str, Dict[str, Any]]] = None) -> Tuple[List[Dict], str]:
    names = _profile_names(spec)
    if profile is not None and profile not in names:
        raise UserError(f"profile {profile!r} is not defined in {path or spec.id}; known profiles: {', '.join(names)}")
    hashes = {name: plan.spec_hash for name, plan in _plans(spec, names, path, overrides)}
    for name in ([profile] if profile else names):
        picked = [r for r in rows if r.get("spec_hash") == hashes.get(name)]
        if picked:
            return picked, ""
    flag = f" with{set_flags(overrides)}" if overrides else ""
    if profile:
        mine = [r for r in rows if r.get("profile") == profile]
        if not mine:
            return [], ""
        picked, others = _largest_run_set(mine)
        return picked, (f"no runs of profile {profile}{flag} at the current spec hash {hashes.get(profile, '?')}: "
                        f"the report uses its runs at spec hash {picked[0].get('spec_hash') or '?'} "
                        f"({_n_runs(len(picked))} of an earlier version of the spec or of a --set sweep)"
                        + _others(others))
    if rows:
        picked, others = _largest_run_set(rows)
        return picked, (f"no runs{flag} at a current spec hash: the report uses the run set at spec hash "
                        f"{picked[0].get('spec_hash') or '?'} (profile {picked[0].get('profile') or '?'}, "
                        f"{_n_runs(len(picked))})" + _others(others))
    return rows, ""


def set_flags(overrides: Optional[Mapping[str, Mapping[str, Any]]]) -> str:
    """``{section: {key: value}}`` -> ' --set section.key=value ...' (sorted), the command-line form of a
    sweep's ``--set`` values; '' for none."""
    return "".join(f" --set {section}.{key}={value}" for section, kv in sorted((overrides or {}).items())
                   for key, value in sorted(kv.items()))


def runs_overrides(runs) -> Optional[Dict[str, Dict[str, Any]]]:
    """The ``--set`` values the runs were swept with (their ``overrides`` column, JSON), when they share one;
    else None. A report's runs share one spec hash, so a rebuild from runs.csv finds its sweep's values here."""
    import json

    if runs is None or not len(runs) or "overrides" not in runs.columns:
        return None
    values = {v for v in runs["overrides"] if isinstance(v, str) and v.strip()}
    if len(values) != 1:
        return None
    try:
        return json.loads(values.pop())
    except ValueError:
        return None


def _profile_names(spec) -> List[str]:
    from uwbench import spec as spec_mod

    return [spec.default_profile] + sorted({spec_mod.BASE_PROFILE, *spec.profiles} - {spec.default_profile})


def _plans(spec, names: Sequence[str], path: str, overrides: Optional[Dict[str, Dict[str, Any]]] = None):
    """(profile, plan) for each profile that expands (with ``overrides`` applied when given)."""
    from uwbench import spec as spec_mod

    out = []
    for name in names:
        try:
            out.append((name, spec_mod.expand(spec, name, path or f"{spec.id}.yaml", overrides=overrides)))
        except Exception:  # noqa: BLE001 - a profile that does not expand cannot have made runs
            continue
    return out


def _largest_run_set(rows: List[Dict]) -> Tuple[List[Dict], Dict[str, int]]:
    """Runs of one spec hash never mix with another's (other settings, other ``--set`` values): the
    hash with the most finished final runs (ties: the most runs, then the hash), and the others' sizes."""
    groups: Dict[str, List[Dict]] = {}
    for r in rows:
        h = r.get("spec_hash")
        groups.setdefault(h if isinstance(h, str) and h else "", []).append(r)

    def size(h):
        g = groups[h]
        return (sum(1 for r in g if r.get("role") == "final" and r.get("status") == "finished"), len(g), h)

    best = max(groups, key=size)
    return groups[best], {h: len(g) for h, g in groups.items() if h != best}


def _n_runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def _others(others: Dict[str, int]) -> str:
    if not others:
        return ""
    listed = ", ".join(f"{h or 'none'} ({_n_runs(n)})" for h, n in sorted(others.items()))
    return (f"; left out, not pooled with it: the run set(s) at spec hash {listed} (another version of the "
            "spec or other --set values: `uwbench report --profile P --set ...` with the sweep's values picks one)")


def _resolved(cell) -> Dict[str, Dict[str, Any]]:
    """A plan cell's config with the components' defaults filled in where they are registered."""
    cfg = {s: dict(v) for s, v in cell.config.items()}
    try:
        from uwbench.training.config import resolve_run

        cfg = resolve_run(cell.config).as_dict()
    except Exception:  # noqa: BLE001 - a component not registered yet: the spec's values only
        pass
    return cfg


def _base_cell(plan, cell_id: str):
    if plan is None:
        return None
    try:
        return plan.cell(cell_id)
    except KeyError:
        return None


def _steps(cfg: Mapping[str, Mapping[str, Any]]) -> Optional[int]:
    steps = cfg.get("train", {}).get("steps")
    return int(steps) if steps is not None else None


def find_study_file(study_id: str, studies_dir: str = "studies") -> Optional[str]:
    """The study file of that id: ``studies/<id>.yaml`` or any study file whose ``id`` matches."""
    direct = os.path.join(studies_dir, f"{study_id}.yaml")
    if os.path.exists(direct):
        return direct
    for path in sorted(glob.glob(os.path.join(studies_dir, "*.yaml"))):
        try:
            from uwbench import spec as spec_mod

            if spec_mod.parse(spec_mod.read_yaml(path), path).id == study_id:
                return path
        except Exception:  # noqa: BLE001 - a broken study file is not this study
            continue
    return None


def study_for_snapshot(snap, studies_dir: str = "studies", folder: str = "") -> StudyView:
    """The study a snapshot belongs to (its spec file when found, else a view from the runs); an empty
    snapshot belongs to the study its folder is named after."""
    ids = snap.study_ids() or ([os.path.basename(os.path.normpath(folder))] if folder else [])
    if len(ids) != 1:
        raise UserError(f"a runs.csv must hold exactly one study, got {ids or 'none'}")
    path = find_study_file(ids[0], studies_dir)
    return load(path, snap.runs) if path else from_runs(ids[0], snap.runs)
