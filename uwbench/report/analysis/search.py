"""Search analysis of a tuned study: per cell, how much each searched hyperparameter mattered and what the
search saw (parallel-coordinates, slice and contour figures of its trials).

The trials are read from the Optuna storage the sweep wrote (``trials_from_storage``) when the report is
built from MLflow and the storage is there, and from the snapshot's trial rows (``trials_from_runs``:
``role=trial``, the ``search_params`` JSON and the objective column) otherwise. Either way they become one
in-memory Optuna study (``build_study``: ``optuna.trial.create_trial`` + ``Study.add_trial``), and the
same functions compute the importance and draw the figures from it. A cell is read from the storage only
when the storage holds every finished trial of the snapshot (matched by MLflow run id) and nothing is
added from it, with objective values put through the snapshot's text form: so a report built with the
storage and its rebuild from ``runs.csv`` are the same bytes.

Importance: fANOVA (``optuna.importance.FanovaImportanceEvaluator``, a random forest with a fixed seed,
so a rebuild gives the same numbers), normalised to sum to 1 per cell. With a handful of trials it is
indicative only; the table says how many trials each estimate rests on.

Distributions (log scale, bounds, choices) come from the study file's search space at the runs' spec
hash; without the study file they are inferred from the values seen.
"""
from __future__ import annotations

import json
import os
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import pandas as pd

from uwbench import metrics
from uwbench.errors import UserError
from uwbench.report.analysis.labels import label_flags, model_label
from uwbench.report.data.study import StudyView
from uwbench.snapshot import format_value
from uwbench.tabular import slug
from uwbench.values import is_number

MIN_TRIALS = 2  # finished trials a cell needs for importance and figures
IMPORTANCE_SEED = 0


@dataclass(frozen=True)
class Kind:
    """One search figure: the optuna.visualization.matplotlib function and the searched parameters it needs."""

    name: str
    title: str
    plot: str  # function name in optuna.visualization.matplotlib
    min_params: int
    caption: str


KINDS = (
    Kind("parallel", "Parallel coordinates", "plot_parallel_coordinate", 1,
         "every finished trial as a line through its searched values and its objective"),
    Kind("slice", "Slice", "plot_slice", 1, "the objective against each searched parameter, one dot per trial"),
    Kind("contour", "Contour", "plot_contour", 2,
         "the objective interpolated over pairs of searched parameters, trials as dots"),
)


@dataclass(frozen=True)
class SearchTrial:
    number: int
    params: Dict[str, Any]
    value: float


@dataclass
class Objective:
    column: str  # the runs.csv column that holds a trial's objective value
    name: str  # e.g. eval_accuracy
    direction: str  # maximize | minimize


@dataclass
class CellSearch:
    cell: str
    label: str
    n_trials: int  # search trials recorded (any status)
    n_finished: int  # finished, with an objective value
    params: List[str] = field(default_factory=list)
    importance: Dict[str, float] = field(default_factory=dict)
    figures: List[Tuple[str, str]] = field(default_factory=list)  # (png name without .png, caption)
    notes: List[str] = field(default_factory=list)
    source: str = ""  # where the trials were read: "storage" or "runs" (never rendered: both give the same)
    drawings: List[Tuple[str, "Kind", str]] = field(default_factory=list)  # (png name, kind, title) to draw
    optuna_study: Any = field(default=None, repr=False, compare=False)  # the trials, in memory, to draw from


@dataclass
class SearchAnalysis:
    objective: Objective
    cells: List[CellSearch]

# --------------------------------------------------------------------------------------------------
# What the study searched: objective and distributions
# --------------------------------------------------------------------------------------------------


def _plans(study: StudyView) -> list:
    """The study file's plans for the profiles the runs were made with ([] without a study file)."""
    if not study.path or not os.path.exists(study.path):
        return []
    from uwbench import spec as spec_mod

    try:
        spec = spec_mod.load(study.path)
    except Exception:  # noqa: BLE001 - a study file that no longer loads: infer from the runs
        return []
    plans = []
    for profile in study.profiles or [spec.default_profile]:
        try:
            plans.append(spec_mod.expand(spec, profile, study.path))
        except Exception:  # noqa: BLE001 - a profile that does not expand made no runs
            continue
    return plans


def objective_of(study: StudyView, plans: Sequence = ()) -> Objective:
    """The objective the search optimised: the study file's, else the best evaluation of the study's metric."""
    for plan in plans:
        obj = plan.objective
        column = getattr(obj, "run_metric", None)
        if column:
            return Objective(column=column, name=obj.metric, direction=obj.direction)
    m = metrics.measure(study.metric)
    best_eval, objective = metrics.metric("best_eval", m.name), metrics.metric("eval", m.name)
    return Objective(column=best_eval.key, name=objective.key, direction=objective.direction)


def distributions_for(plans: Sequence, spec_hash: str, trials: Sequence[SearchTrial],
                      profile: str = "") -> Dict[str, Any]:
    """The search space at the runs' spec hash (the study file's); else, when the study file changed in a
    setting that is not searched, its profile's space if that space holds every value the trials took (so
    a new fixed setting does not change the analysis of the old runs); else one inferred from the values."""
    from uwbench.sweeps import space

    for plan in plans:
        if plan.spec_hash == spec_hash and plan.search:
            return space.distributions(plan.search)
    for plan in plans:
        if profile and plan.profile == profile and plan.search:
            dists = space.distributions(plan.search)
            if _holds(dists, trials):
                return dists
    return infer_distributions(trials)


def _holds(dists: Dict[str, Any], trials: Sequence[SearchTrial]) -> bool:
    """Whether every trial's params are exactly the space's names and each value lies in its distribution."""
    for t in trials:
        if set(t.params) != set(dists):
            return False
        for name, value in t.params.items():
            d = dists[name]
            if hasattr(d, "choices"):
                if value not in d.choices:
                    return False
            elif not (isinstance(value, (int, float)) and d.low <= value <= d.high):
                return False
    return True


def infer_distributions(trials: Sequence[SearchTrial]) -> Dict[str, Any]:
    """A space that holds every value seen: numbers (not bools) as a float or int range, the rest as choices."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    names = sorted({k for t in trials for k in t.params})
    out = {}
    for name in names:
        values = [t.params[name] for t in trials if name in t.params]
        if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            if all(isinstance(v, int) for v in values):
                out[name] = IntDistribution(min(values), max(values))
            else:
                out[name] = FloatDistribution(float(min(values)), float(max(values)))
        else:
            out[name] = CategoricalDistribution(sorted(set(values), key=lambda v: json.dumps(v, sort_keys=True)))
    return out


# --------------------------------------------------------------------------------------------------
# Trials: from the snapshot, or from the Optuna storage
# --------------------------------------------------------------------------------------------------


def canonical_value(value) -> float:
    """An objective value as the snapshot's text form holds it (10 significant digits)."""
    return float(format_value(float(value)))


def _params_of_row(row: Mapping) -> Dict[str, Any]:
    """A trial's searched values: the sweep's ``search_params`` tag (JSON, by config path)."""
    text = row.get("search_params")
    return json.loads(text) if isinstance(text, str) and text.strip() else {}


def finished_trial_rows(runs: pd.DataFrame, cell: str, objective: Objective) -> pd.DataFrame:
    rows = runs[(runs["cell"] == cell) & (runs["role"] == "trial")]
    col = rows[objective.column] if objective.column in rows.columns else pd.Series(float("nan"), index=rows.index)
    return rows[(rows["status"] == "finished") & col.notna()]


def trials_from_runs(rows: pd.DataFrame, objective: Objective) -> List[SearchTrial]:
    """The finished trials of one cell from its snapshot rows, in trial-number order."""
    out = []
    for r in rows.to_dict("records"):
        number = int(r["trial_number"]) if is_number(r.get("trial_number")) else -1
        out.append((number, str(r.get("run_id") or ""),
                    SearchTrial(number=number, params=_params_of_row(r), value=canonical_value(r[objective.column]))))
    return [t for _, _, t in sorted(out, key=lambda x: (x[0], x[1]))]


def _sweep_storage():
    """The sweeps' storage helpers (``storage_url``, ``make_storage``, ``study_name``): the one home of
    where a sweep keeps its Optuna studies and how it names them."""
    from uwbench.sweeps import storage

    return storage


def storage_study_name(study_id: str, profile: str, spec_hash: str, cell: str) -> str:
    """The name of a cell's search study in the Optuna storage (the sweep's naming)."""
    plan = types.SimpleNamespace(id=study_id, profile=profile, spec_hash=spec_hash)  # the fields it names
    return _sweep_storage().study_name(plan, cell, "search")


def default_storage(study_id: str) -> str:
    """Where ``uwbench sweep`` keeps a study's Optuna storage by default (a journal file under runs/)."""
    return _sweep_storage().storage_url(types.SimpleNamespace(id=study_id), None)


def open_storage(url: Optional[str]):
    """The Optuna storage at ``url`` (``journal:<path>`` or an RDB URL), or None when there is none; a
    missing journal file is never created, and a journal is read as it is (a report repairs nothing)."""
    if not url:
        return None
    if url.startswith("journal:") and not os.path.exists(url[len("journal:"):]):
        return None
    return _sweep_storage().make_storage(url, repair=False)


def trials_from_storage(storage, name: str, run_ids: Sequence[str]) -> Optional[List[SearchTrial]]:
    """The COMPLETE trials of the storage's study ``name`` whose MLflow run is one of ``run_ids``, in trial
    order; None when the study is not there or lacks one of those runs (the snapshot then decides)."""
    import optuna
    from optuna.trial import TrialState

    try:
        stored = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        return None
    wanted = set(run_ids)
    out = []
    for t in stored.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.user_attrs.get("mlflow_run_id") in wanted and t.values:  # several objectives: the first
            out.append(SearchTrial(number=t.number, params=dict(t.params), value=canonical_value(t.values[0])))
    if len(out) != len(wanted):
        return None
    return sorted(out, key=lambda t: t.number)


# --------------------------------------------------------------------------------------------------
# One in-memory study, its importance and figures
# --------------------------------------------------------------------------------------------------


def build_study(trials: Sequence[SearchTrial], distributions: Mapping[str, Any], direction: str):
    """An in-memory Optuna study holding ``trials`` (COMPLETE, with their params and objective values)."""
    import optuna
    from optuna.trial import create_trial

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.RandomSampler(seed=0))
    for t in trials:
        missing = sorted(set(t.params) - set(distributions))
        if missing:
            raise UserError(f"trial {t.number} has params {missing} outside the search space "
                             f"{sorted(distributions)}")
        dists = {k: distributions[k] for k in t.params}
        study.add_trial(create_trial(params=dict(t.params), distributions=dists, value=t.value))
    return study


def importance(study) -> Dict[str, float]:
    """fANOVA importance per searched parameter (seeded, normalised to sum 1), largest first."""
    import optuna

    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=IMPORTANCE_SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = optuna.importance.get_param_importances(study, evaluator=evaluator)
    return {k: float(v) for k, v in sorted(raw.items(), key=lambda kv: (-kv[1], kv[0]))}


# --------------------------------------------------------------------------------------------------
# The analysis
# --------------------------------------------------------------------------------------------------


def wanted(study: StudyView, runs: pd.DataFrame) -> bool:
    """Tuned studies get the section (and a study known only from its runs, when it has search trials)."""
    if study.mode == "tuned":
        return True
    return not study.mode and len(runs) > 0 and (runs["role"] == "trial").any()


def analyse(study: StudyView, summary: pd.DataFrame, runs: pd.DataFrame, storage: Optional[str] = None,
            log: Optional[Callable[[str], None]] = None) -> Optional[SearchAnalysis]:
    """The importance of every searched cell's parameters and the search figures it gets (drawn and written by
    ``uwbench.report.rendering.search``); None for a study that does not search. ``storage``: the Optuna
    storage URL to read trials from (None: the snapshot only)."""
    if not wanted(study, runs):
        return None
    plans = _plans(study)
    objective = objective_of(study, plans)
    store = open_storage(storage)
    flags = label_flags(summary) if len(summary) else {}
    cells: List[CellSearch] = []
    from_storage = 0
    for _, srow in summary.iterrows():
        cell = srow["cell"]
        all_trials = runs[(runs["cell"] == cell) & (runs["role"] == "trial")] if len(runs) else runs
        label = model_label(srow, **flags) if srow["model"] else cell
        entry = CellSearch(cell=cell, label=label, n_trials=len(all_trials), n_finished=0)
        cells.append(entry)
        if not len(all_trials):
            entry.notes.append("no search trials recorded")
            continue
        rows = finished_trial_rows(runs, cell, objective)
        trials = None
        if store is not None and len(rows) and _one_optuna_sweep(rows):
            first = rows.iloc[0]
            name = storage_study_name(study.id, str(first["profile"]), str(first["spec_hash"]), cell)
            trials = trials_from_storage(store, name, list(rows["run_id"]))
            from_storage += trials is not None
            entry.source = "storage" if trials is not None else ""
        if trials is None:
            trials = trials_from_runs(rows, objective)
            entry.source = "runs"
        entry.n_finished = len(trials)
        spec_hash = str(rows.iloc[0]["spec_hash"]) if len(rows) else ""
        profile = str(rows.iloc[0]["profile"]) if len(rows) else ""
        _analyse_cell(entry, trials, distributions_for(plans, spec_hash, trials, profile), objective)
    if log is not None and store is not None:
        log(f"{study.id}: search analysis of {from_storage}/{len(cells)} cells from the Optuna storage {storage}")
    return SearchAnalysis(objective=objective, cells=cells)


def _one_optuna_sweep(rows: pd.DataFrame) -> bool:
    return set(rows["backend"]) == {"optuna"} and rows["profile"].nunique() == 1 and rows["spec_hash"].nunique() == 1


def _analyse_cell(entry: CellSearch, trials: List[SearchTrial], distributions: Mapping[str, Any],
                  objective: Objective) -> None:
    if len(trials) < MIN_TRIALS:
        entry.notes.append(f"{len(trials)} finished search trial(s): importance and search figures need at "
                           f"least {MIN_TRIALS}")
        return
    study = build_study(trials, distributions, objective.direction)
    values = {}
    for t in trials:
        for k, v in t.params.items():
            values.setdefault(k, set()).add(v if isinstance(v, str) else canonical_value(v))
    constant = sorted(k for k, vs in values.items() if len(vs) == 1)
    entry.params = sorted(k for k in values if k not in constant)
    if constant:  # nothing to attribute to a setting no trial varied, and no axis to draw it on
        entry.notes.append("the same value in every finished trial, so left out of the importance and the "
                           "contour: " + ", ".join(f"{k} = {format_value(next(iter(values[k])))}" for k in constant))
    flat = len({t.value for t in trials}) == 1
    if flat:
        entry.notes.append(f"every finished trial reached the same objective ({trials[0].value:.6g}): no "
                           "importance to attribute, no contour to draw")
    elif len(entry.params) == 1:
        entry.importance = {entry.params[0]: 1.0}
        entry.notes.append(f"one searched parameter ({entry.params[0]}): its importance is 1 by definition; "
                           "no contour figure (it needs two)")
    elif entry.params:
        try:
            entry.importance = importance(study)
        except Exception as exc:  # noqa: BLE001 - e.g. fANOVA on trials whose objective did not vary
            entry.notes.append(f"importance not estimated from {len(trials)} trials (fANOVA: {exc})")
    else:
        entry.notes.append("the trials recorded no searched parameters")
        return

    entry.optuna_study = study
    for kind in KINDS:
        if len(entry.params) < kind.min_params or (flat and kind.name == "contour"):
            continue
        name = f"search_{slug(entry.cell)}_{kind.name}"
        title = f"{kind.title}: {entry.label}, {len(trials)} trials"
        entry.drawings.append((name, kind, title))
        entry.figures.append((name, f"{title}: {kind.caption}."))


def ranking(analysis: SearchAnalysis) -> Dict[str, List[str]]:
    """``{cell: [params, most important first]}`` (tests, and readers of the CSV)."""
    return {c.cell: list(c.importance) for c in analysis.cells if c.importance}


