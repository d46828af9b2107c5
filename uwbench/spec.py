"""Study specs: one YAML file per paper table or figure, validated and expanded into cells (DESIGN.md §4).

A study names a question, the paper artifact it reproduces, a task, groups of cells (a model plus a grid
over settings such as the writer, controller, memory size or sequence length), settings fixed for every
cell, a search space, the objective, seeds, a budget, pruning, profiles and the paper's reported value
per cell. The file format is documented in ``studies/README.md``; in short::

    id: table1_memorization          # also the MLflow experiment name
    mode: faithful | tuned           # the paper's grid over seeds | TPE search, then best config re-run
    task: {name: copy, seq_len: 50}  # the study's task (a grid axis ``task.name`` may vary it)
    fixed: {task: {}, model: {}, train: {}}          # every cell, where the component has the key
    cells:                            # groups; each expands to the product of its grid
      - {model: dnc, name: dnc_uw, label: DNC+UW, set: {model: {writer: uniform}},
         grid: {task.name: [copy, reverse], task.seq_len: [50, 100]}}
    search: {train.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}}
    profiles: {cpu: {...}, smoke: {...}}            # overlays; ``paper`` is the file as written

Every pydantic model forbids unknown keys; errors name the file, the key path and the allowed values.
A study whose task or model is not registered yet is valid but *waits* (``Plan.waits_for``).
"""
from __future__ import annotations

import copy
import difflib
import fnmatch
import hashlib
import importlib
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Dict, List, Literal, Mapping, Optional, Tuple, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic import ValidationError, field_validator, model_validator

from uwbench.config import ConfigError

SECTIONS = ("task", "model", "train")
KEY_PATTERN = re.compile(r"^(task|model|train)\.[a-z_][a-z0-9_]*$")
ID_PATTERN = r"^[a-z0-9][a-z0-9_]*$"
REQUIRED_PROFILES = ("cpu", "smoke")
BASE_PROFILE = "paper"  # the file as written; other profiles are overlays on it
PLUGINS_ENV = "UWBENCH_PLUGINS"  # comma-separated modules imported before validation and in workers

Scalar = Union[StrictBool, StrictInt, StrictFloat, StrictStr, None]


class SpecError(ConfigError):
    """An invalid study file; the message names the file, the key path and what is allowed."""


# ---------------------------------------------------------------------------------------------
# YAML: PyYAML follows YAML 1.1, where ``1e-4`` (no dot) is a string; studies mean a number.
# ---------------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)[eE][-+]?\d+$"),
    list("-+0123456789."),
)


def read_yaml(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=_Loader)


# ---------------------------------------------------------------------------------------------
# The schema
# ---------------------------------------------------------------------------------------------


class Strict(BaseModel):
    """Base: unknown keys are an error that lists the allowed keys (and a close match)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            allowed = sorted(cls.model_fields)
            for key in data:
                if key not in cls.model_fields:
                    close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.5)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise ValueError(f"unknown key {key!r}{hint}; allowed keys: {', '.join(allowed)}")
        return data


def _check_range(low, high, log: bool) -> None:
    """The bounds of a float or int search range (Optuna's rules)."""
    if not low < high:
        raise ValueError(f"`low < high` must hold, got low={low}, high={high}")
    if log and low <= 0:
        raise ValueError(f"a log-scale range needs `low > 0`, got low={low}")


class FloatParam(Strict):
    type: Literal["float"]
    low: float
    high: float
    log: bool = False
    step: Optional[float] = None

    @model_validator(mode="after")
    def _check(self):
        _check_range(self.low, self.high, self.log)
        if self.log and self.step is not None:
            raise ValueError("`log` and `step` cannot both be set (Optuna's rule)")
        if self.step is not None and self.step <= 0:
            raise ValueError(f"`step > 0` must hold, got {self.step}")
        return self


class IntParam(Strict):
    type: Literal["int"]
    low: int
    high: int
    log: bool = False
    step: int = 1

    @model_validator(mode="after")
    def _check(self):
        _check_range(self.low, self.high, self.log)
        if self.log and self.step != 1:
            raise ValueError("`log` needs `step: 1` (Optuna's rule)")
        if self.step < 1:
            raise ValueError(f"`step >= 1` must hold, got {self.step}")
        return self


class ChoiceParam(Strict):
    type: Literal["choice"]
    values: List[Union[StrictBool, StrictInt, StrictFloat, StrictStr]] = Field(min_length=1)

    @field_validator("values")
    @classmethod
    def _unique(cls, values):
        if len({json.dumps(v) for v in values}) != len(values):
            raise ValueError(f"choice values must be distinct, got {values}")
        return values


Param = Annotated[Union[FloatParam, IntParam, ChoiceParam], Field(discriminator="type")]


class Sections(Strict):
    """Settings per run-config section (the keys of each component's config dataclass)."""

    task: Dict[str, Scalar] = {}
    model: Dict[str, Scalar] = {}
    train: Dict[str, Scalar] = {}


class Objective(Strict):
    metric: Literal["eval_accuracy", "test_accuracy", "eval_mse", "test_mse"] = "eval_accuracy"
    direction: Literal["maximize", "minimize"] = "maximize"

    @model_validator(mode="after")
    def _check(self):
        want = "maximize" if self.metric.endswith("accuracy") else "minimize"
        if self.direction != want:
            raise ValueError(f"objective {self.metric} must be paired with direction: {want}, got {self.direction}")
        return self

    @property
    def run_metric(self) -> str:
        """The MLflow metric of a finished run that holds the objective value."""
        kind, name = self.metric.split("_", 1)
        return f"best_eval_{name}" if kind == "eval" else f"test_{name}"


class Budget(Strict):
    n_trials: int = Field(ge=1)


class Pruning(Strict):
    """``median``: stop a trial below the median of earlier ones at the same step (Optuna MedianPruner,
    Ray MedianStoppingRule); ``asha``: asynchronous successive halving (Optuna SuccessiveHalvingPruner,
    Ray ASHAScheduler); ``none``. Steps are counted in evaluations (every ``train.eval_every`` updates)."""

    type: Literal["median", "asha", "none"] = "median"
    n_startup_trials: int = Field(default=3, ge=0)  # median: trials that are never pruned
    warmup_evals: int = Field(default=1, ge=0)  # median: evaluations before a trial can be pruned
    min_evals: int = Field(default=1, ge=1)  # asha: evaluations in the first rung (grace period)
    reduction_factor: int = Field(default=3, ge=2)  # asha


class Group(Strict):
    model: str
    name: Optional[str] = Field(default=None, pattern=ID_PATTERN)  # cell-id prefix (default: the model)
    label: Optional[str] = None  # display name; may use {task.x}/{model.x}/{train.x} placeholders
    set: Sections = Sections()  # this group's settings (strict: the group's model must have the key)
    grid: Dict[str, Union[List[Scalar], List[Dict[str, Scalar]]]] = {}

    @model_validator(mode="after")
    def _check(self):
        if "name" in self.set.model:
            raise ValueError("set.model.name is not allowed: the group's `model` names the model")
        for axis, values in self.grid.items():
            if not values:
                raise ValueError(f"grid axis {axis!r} has no values")
            linked = isinstance(values[0], dict)
            if linked:
                if KEY_PATTERN.match(axis):
                    raise ValueError(f"grid axis {axis!r} lists mappings, so it is a linked axis and must be "
                                     "a plain name (e.g. `dataset`), not a section.key path")
                for entry in values:
                    if not isinstance(entry, dict) or "id" not in entry:
                        raise ValueError(f"every entry of linked grid axis {axis!r} needs an `id`, got {entry!r}")
                    for key in entry:
                        if key != "id" and not KEY_PATTERN.match(key):
                            raise ValueError(f"linked grid axis {axis!r}: key {key!r} must be section.key "
                                             f"with section one of {', '.join(SECTIONS)}")
            else:
                if not KEY_PATTERN.match(axis):
                    raise ValueError(f"grid axis {axis!r} must be section.key with section one of "
                                     f"{', '.join(SECTIONS)} (or a linked axis: a list of mappings)")
                if axis == "model.name":
                    raise ValueError("grid axis model.name is not allowed: use one group per model")
                if any(isinstance(v, dict) for v in values):
                    raise ValueError(f"grid axis {axis!r} mixes values and mappings")
                if len({json.dumps(v) for v in values}) != len(values):
                    raise ValueError(f"grid axis {axis!r} has repeated values {values}")
        return self


class Paper(Strict):
    """The paper's reported numbers, for the report (never used to train)."""

    source: str  # e.g. "Table 1"
    metric: Literal["test_accuracy", "test_mse", "training_time_reduction"]
    unit: Literal["percent", "fraction", "mse"]
    values: Dict[str, float] = {}  # cell id -> value
    notes: str = ""


class Profile(Strict):
    """An overlay on the study: sizes, budget and seeds for a machine or a test."""

    description: str = ""
    task: Dict[str, Scalar] = {}  # forced on every cell whose task has the key
    model: Dict[str, Scalar] = {}  # forced on every cell whose model has the key
    train: Dict[str, Scalar] = {}
    grid: Dict[str, List[Scalar]] = {}  # replace the values of a grid axis in every group that has it
    cells: Optional[List[str]] = None  # keep only the cells matching these patterns (fnmatch)
    seeds: Optional[List[int]] = None
    final_seeds: Optional[List[int]] = None
    budget: Optional[Budget] = None
    pruning: Optional[Pruning] = None
    search: Dict[str, Param] = {}  # replace these entries of the search space


class StudySpec(Strict):
    id: str = Field(pattern=ID_PATTERN)
    title: str
    question: str
    artifact: str  # the paper table or figure, e.g. "Table 1"
    mode: Literal["faithful", "tuned"]
    task: Dict[str, Scalar]
    fixed: Sections = Sections()
    cells: List[Group] = Field(min_length=1)
    seeds: List[int] = Field(default=[0], min_length=1)
    final_seeds: List[int] = []
    search: Dict[str, Param] = {}
    objective: Objective = Objective()
    budget: Optional[Budget] = None
    pruning: Pruning = Pruning()
    profiles: Dict[str, Profile]
    default_profile: str = BASE_PROFILE
    paper: Optional[Paper] = None
    notes: str = ""
    deviations: List[str] = []  # this study's departures from the paper (listed in studies/README.md)

    @model_validator(mode="after")
    def _check(self):
        if "name" not in self.task:
            raise ValueError("task.name is required (the study's task, e.g. `task: {name: copy}`)")
        for key in self.search:
            if not KEY_PATTERN.match(key):
                raise ValueError(f"search key {key!r} must be section.key with section one of {', '.join(SECTIONS)}")
            if key in ("task.name", "model.name", "train.seed"):
                raise ValueError(f"search key {key!r} cannot be searched (use cell groups or seeds)")
        for name in REQUIRED_PROFILES:
            if name not in self.profiles:
                raise ValueError(f"profiles.{name} is required (every study defines: {', '.join(REQUIRED_PROFILES)})")
        for name in self.profiles:
            if not re.match(ID_PATTERN, name):
                raise ValueError(f"profile name {name!r} must match {ID_PATTERN}")
        known = sorted({BASE_PROFILE, *self.profiles})
        if self.default_profile not in known:
            raise ValueError(f"default_profile {self.default_profile!r} is not a profile; known: {', '.join(known)}")
        _check_seeds("seeds", self.seeds)
        if self.mode == "tuned":
            if not self.search:
                raise ValueError("mode: tuned needs a `search` space")
            if self.budget is None:
                raise ValueError("mode: tuned needs `budget: {n_trials: N}` (trials per cell)")
            if not self.final_seeds:
                raise ValueError("mode: tuned needs `final_seeds` (the best config of each cell is re-run on them)")
            _check_seeds("final_seeds", self.final_seeds)
        else:
            _check_faithful(self.search, "search", self.budget, self.final_seeds)
        for name, prof in self.profiles.items():
            if self.mode == "faithful":
                _check_faithful(prof.search, f"profiles.{name}.search", prof.budget, prof.final_seeds or [])
            for key in prof.search:
                if key not in self.search:
                    raise ValueError(f"profiles.{name}.search.{key}: not in the study's search space "
                                     f"(a profile replaces entries; known: {', '.join(self.search) or 'none'})")
            for section in SECTIONS:
                if "name" in getattr(prof, section):
                    raise ValueError(f"profiles.{name}.{section}.name: a profile cannot change the {section}")
            if prof.seeds is not None:
                _check_seeds(f"profiles.{name}.seeds", prof.seeds)
        for section in SECTIONS:
            if "name" in getattr(self.fixed, section):
                raise ValueError(f"fixed.{section}.name is not allowed (use `task.name` or the groups' `model`)")
        return self


def _check_seeds(where: str, seeds: List[int]) -> None:
    if not seeds:
        raise ValueError(f"{where} must list at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{where} has repeated seeds {seeds}")


def _check_faithful(search, where, budget, final_seeds) -> None:
    for key, param in search.items():
        if not isinstance(param, ChoiceParam):
            raise ValueError(f"{where}.{key}: mode: faithful runs the paper's grid, so every search entry must "
                             f"be `{{type: choice, values: [...]}}`, got type: {param.type}")
    if budget is not None:
        raise ValueError("budget applies to mode: tuned only (a faithful study runs every grid point x seed)")
    if final_seeds:
        raise ValueError("final_seeds applies to mode: tuned only (a faithful study runs its `seeds`)")


# ---------------------------------------------------------------------------------------------
# Loading and error messages
# ---------------------------------------------------------------------------------------------


def _loc(loc: Tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part) in ("float", "int", "choice", "function-after[_check(), FloatParam]"):
            continue  # discriminated-union tags pydantic adds to the path
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def format_validation_error(exc: ValidationError, path: str) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = err["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        lines.append(f"{path}: {_loc(loc)}: {msg}")
    return "\n".join(lines)


def import_plugins() -> None:
    """Import the modules named in ``$UWBENCH_PLUGINS`` (they register extra tasks or models); done
    before validation and in every sweep worker, so a plugin component works in every process."""
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        importlib.import_module(name)


def parse(data: Any, path: str = "<study>") -> StudySpec:
    if not isinstance(data, Mapping):
        raise SpecError(f"{path}: a study file is a mapping of keys (id, title, ...), got {type(data).__name__}")
    try:
        return StudySpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, path)) from None


def load(path: str) -> StudySpec:
    """Read and validate the structure of a study file (components are checked by ``plan``)."""
    try:
        data = read_yaml(path)
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from None
    spec = parse(data, path)
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem != spec.id:
        raise SpecError(f"{path}: id: a study file is named by its id, so id must be {stem!r}, got {spec.id!r}")
    return spec


# ---------------------------------------------------------------------------------------------
# Expansion into cells
# ---------------------------------------------------------------------------------------------

AXIS_ORDER = {"model.writer": 0, "model.controller": 1, "task.name": 2, "task.seq_len": 5,
              "model.memory_size": 6, "model.cache_size": 7, "model.hidden_size": 8}
AXIS_PREFIX = {"task.seq_len": "T", "model.memory_size": "D", "model.cache_size": "L", "model.hidden_size": "H"}


@dataclass(frozen=True)
class Cell:
    """One point of a study's grid: a model on a task with settings; searched or run over seeds."""

    id: str
    label: str
    group: str
    model: str
    task: str
    axes: Dict[str, Any]  # this cell's grid values, by axis
    config: Dict[str, Dict[str, Any]]  # the run config before search params and seed
    paper: Optional[float] = None
    # shared settings (fixed, profile) that do not apply to this cell's parts, e.g. a cache size given to
    # every cell of a model whose writer here has none: left out of ``config``, kept in the plan's hash
    inert: Dict[str, Dict[str, Any]] = field(default_factory=dict)


@dataclass
class Plan:
    """A study resolved for one profile: what a sweep runs."""

    spec: StudySpec
    profile: str
    path: str
    cells: List[Cell]
    mode: str
    seeds: List[int]
    final_seeds: List[int]
    search: Dict[str, Any]
    objective: Objective
    budget: Optional[Budget]
    pruning: Pruning
    spec_hash: str
    waits_for: List[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.spec.id

    def grid_points(self) -> List[Dict[str, Any]]:
        """Faithful mode: every combination of the (choice-only) search space."""
        keys = list(self.search)
        combos = itertools.product(*(self.search[k].values for k in keys))
        return [dict(zip(keys, combo)) for combo in combos]

    def runs_per_cell(self) -> int:
        if self.mode == "faithful":
            return len(self.grid_points()) * len(self.seeds)
        return self.budget.n_trials + len(self.final_seeds)

    def n_runs(self) -> int:
        return self.runs_per_cell() * len(self.cells)

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise KeyError(cell_id)


def _token(axis: str, value: Any) -> str:
    if isinstance(value, bool):
        text = axis.rsplit(".", 1)[-1] if value else "no_" + axis.rsplit(".", 1)[-1]
    elif axis in AXIS_PREFIX:
        text = f"{AXIS_PREFIX[axis]}{value}"
    elif axis in ("model.writer", "model.controller", "task.name"):
        text = str(value)
    else:
        text = f"{axis.rsplit('.', 1)[-1]}{value}"
    return re.sub(r"[^A-Za-z0-9_.]+", "", text)


def _axis_rank(axis: str) -> Tuple[int, str]:
    if "." not in axis:  # linked axes (e.g. a dataset bundle) read best right after the task
        return (3, axis)
    return (AXIS_ORDER.get(axis, 9), axis)


def _set_path(config: Dict[str, Dict[str, Any]], path: str, value: Any) -> None:
    section, key = path.split(".", 1)
    config.setdefault(section, {})[key] = value


class _Section:
    """``{model.writer}`` in label templates."""

    def __init__(self, values: Mapping[str, Any]):
        self.__dict__.update(values)

    def __getattr__(self, name):  # unknown keys render empty rather than fail
        return ""


def _fields_of(registry, name: str, values: Optional[Mapping[str, Any]] = None) -> Optional[set]:
    """The config keys of a registered component (None if it is not registered yet): with ``values``,
    those of the parts they choose (a model's writer); without, those of any choice."""
    from uwbench.config import section_keys

    if name not in registry:
        return None
    cfg = registry.entry(name).config
    return section_keys(cfg, values) if cfg else set()


def _train_fields() -> set:
    import dataclasses

    from uwbench.training.config import TrainConfig

    return {f.name for f in dataclasses.fields(TrainConfig)}


def expand(spec: StudySpec, profile: Optional[str] = None, path: str = "<study>") -> Plan:
    """Resolve ``spec`` for ``profile`` (default: the study's default profile) and expand its cells.

    Checks every setting against the registered components: keys must exist and values must be
    accepted by the components' config dataclasses. Components not registered yet make the plan
    *wait* (``plan.waits_for``) instead of failing."""
    from uwbench.registry import MODELS, TASKS
    from uwbench.training.config import resolve_run

    import_plugins()
    profile = profile or spec.default_profile
    known_profiles = sorted({BASE_PROFILE, *spec.profiles})
    if profile not in known_profiles:
        raise SpecError(f"{path}: profile {profile!r} is not defined; known profiles: {', '.join(known_profiles)}")
    prof = spec.profiles.get(profile, Profile())
    where = f"{path}: profiles.{profile}"

    def fail(msg: str) -> SpecError:
        return SpecError(f"{path}: {msg}")

    # grid replacements from the profile
    groups = [g.model_copy(deep=True) for g in spec.cells]
    for axis, values in prof.grid.items():
        hit = False
        for g in groups:
            if axis in g.grid:
                g.grid[axis] = list(values)
                hit = True
        if not hit:
            raise SpecError(f"{where}.grid.{axis}: no group has this grid axis "
                            f"(axes: {', '.join(sorted({a for g in spec.cells for a in g.grid})) or 'none'})")

    train_fields = _train_fields()
    waits: List[str] = []
    cells: List[Cell] = []
    seen: Dict[str, str] = {}
    lenient_hits: Dict[Tuple[str, str, str], bool] = {}  # (origin, section, key) -> applied somewhere

    for gi, group in enumerate(groups):
        gwhere = f"cells[{gi}]"
        axes = sorted(group.grid, key=_axis_rank)
        value_lists = [group.grid[a] for a in axes]
        for combo in itertools.product(*value_lists) if axes else [()]:
            cfg: Dict[str, Dict[str, Any]] = {"task": dict(spec.task), "model": {"name": group.model}, "train": {}}
            cell_axes: Dict[str, Any] = {}
            tokens = [group.name or group.model]
            # the group's settings and grid values are strict: checked against the components below
            for section in SECTIONS:
                cfg[section].update(getattr(group.set, section))
            for axis, value in zip(axes, combo):
                if isinstance(value, dict):
                    cell_axes[axis] = value["id"]
                    tokens.append(re.sub(r"[^A-Za-z0-9_.]+", "", str(value["id"])))
                    for key, v in value.items():
                        if key != "id":
                            _set_path(cfg, key, v)
                else:
                    cell_axes[axis] = value
                    tokens.append(_token(axis, value))
                    _set_path(cfg, axis, value)
            task_name, model_name = cfg["task"]["name"], group.model
            task_fields = _fields_of(TASKS, task_name)
            model_fields = _fields_of(MODELS, model_name)
            for kind, name, fields in (("task", task_name, task_fields), ("model", model_name, model_fields)):
                if fields is None and f"{kind} {name}" not in waits:
                    waits.append(f"{kind} {name}")
            # fixed settings and profile overlays apply where the component has the key
            overlays = [("fixed", spec.fixed.task, spec.fixed.model, spec.fixed.train)]
            overlays.append((f"profiles.{profile}", prof.task, prof.model, prof.train))
            base = {s: dict(cfg[s]) for s in SECTIONS}
            id_paths = {a for a in axes if "." in a}  # scalar axes: their values name the cell
            for origin, t, m, tr in overlays:
                for section, values, fields in (("task", t, task_fields), ("model", m, model_fields),
                                                ("train", tr, train_fields)):
                    for key, value in values.items():
                        marker = (origin, section, key)
                        lenient_hits.setdefault(marker, False)
                        if fields is None or key in fields:
                            lenient_hits[marker] = True
                            # precedence: the values in a cell's id > profile > the group's set and
                            # linked axes > fixed (a profile changes a named value through `grid`)
                            if f"{section}.{key}" in id_paths:
                                continue
                            if origin == "fixed" and key in base[section]:
                                continue
                            cfg[section][key] = value
            inert = _split_inert(cfg, base, overlays, model_fields and _fields_of(MODELS, model_name, cfg["model"]))
            cell_id = "-".join(tokens)
            if cell_id in seen:
                raise fail(f"{gwhere}: cell id {cell_id!r} is produced twice (also by {seen[cell_id]}); give the "
                           "groups distinct `name`s")
            seen[cell_id] = gwhere
            ns = {s: _Section({k: v for k, v in cfg[s].items()}) for s in SECTIONS}
            try:
                label = (group.label or group.name or group.model).format_map(ns)
            except (KeyError, ValueError, IndexError) as exc:
                raise fail(f"{gwhere}.label: cannot fill {group.label!r}: {exc}") from None
            cells.append(Cell(id=cell_id, label=label, group=group.name or group.model, model=model_name,
                              task=task_name, axes=cell_axes, config=cfg, inert=inert))

    # strict keys: check every cell whose components are registered
    for cell in cells:
        _check_names(cell.config, f"cell {cell.id}", fail)
        if cell.task in TASKS and cell.model in MODELS:
            try:
                resolve_run(cell.config)
            except ConfigError as exc:
                raise fail(f"cell {cell.id}: {exc}") from None

    for (origin, section, key), hit in lenient_hits.items():
        if not hit:
            known = sorted(train_fields) if section == "train" else sorted(
                {f for c in cells for f in (_fields_of(TASKS if section == "task" else MODELS,
                                                       c.task if section == "task" else c.model) or ())})
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise fail(f"{origin}.{section}.{key}: no cell's {section} has the key {key!r}{hint}; "
                       f"allowed: {', '.join(known)}")

    if prof.cells is not None:
        for pattern in prof.cells:
            if not any(fnmatch.fnmatchcase(c.id, pattern) for c in cells):
                raise SpecError(f"{where}.cells: pattern {pattern!r} matches no cell; cells: "
                                f"{', '.join(c.id for c in cells)}")
        cells = [c for c in cells if any(fnmatch.fnmatchcase(c.id, p) for p in prof.cells)]

    search = dict(spec.search)
    search.update(prof.search)
    _check_search(search, cells, train_fields, fail)

    paper_values = spec.paper.values if spec.paper else {}
    all_ids = set(seen)
    for cid in paper_values if profile == BASE_PROFILE else ():  # profiles may rename cells (smaller grids)
        if cid not in all_ids:
            close = difflib.get_close_matches(cid, sorted(all_ids), n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise fail(f"paper.values.{cid}: no such cell{hint}; cells: {', '.join(sorted(all_ids))}")
    cells = [Cell(**{**c.__dict__, "paper": paper_values.get(c.id)}) for c in cells]

    mode = spec.mode
    seeds = list(prof.seeds if prof.seeds is not None else spec.seeds)
    final_seeds = list(prof.final_seeds if prof.final_seeds is not None else spec.final_seeds)
    budget = prof.budget or spec.budget
    pruning = prof.pruning or spec.pruning
    if mode == "tuned" and set(seeds) & set(final_seeds):
        raise fail(f"final_seeds {final_seeds} must be fresh: they overlap the search seeds {seeds}")
    plan = Plan(spec=spec, profile=profile, path=path, cells=cells, mode=mode, seeds=seeds, final_seeds=final_seeds,
                search=search, objective=spec.objective, budget=budget, pruning=pruning, spec_hash="",
                waits_for=waits)
    plan.spec_hash = plan_hash(plan)
    return plan


def _split_inert(cfg: Dict[str, Dict[str, Any]], base, overlays, model_keys) -> Dict[str, Dict[str, Any]]:
    """Move the shared (fixed, profile) model settings that the cell's model has for some writer but not
    for its own (``model_keys``) out of ``cfg``; the group's own settings (``base``) stay, so a wrong one
    is an error."""
    if not model_keys:
        return {}
    shared = {key for _, _, m, _ in overlays for key in m if key not in base["model"]}
    moved = {key: cfg["model"].pop(key) for key in sorted(shared) if key in cfg["model"] and key not in model_keys}
    return {"model": moved} if moved else {}


def _named_registries():
    """Model settings whose values name registered components (checked with a did-you-mean)."""
    from uwbench.registry import CONTROLLERS, WRITERS

    return {"writer": WRITERS, "controller": CONTROLLERS}


def _check_names(config, where: str, fail) -> None:
    for key, registry in _named_registries().items():
        value = config.get("model", {}).get(key)
        if isinstance(value, str) and value not in registry:
            raise fail(f"{where}: model.{key}: {registry.unknown_message(value)}")


def _check_search(search, cells, train_fields, fail) -> None:
    """Each searched key must exist for every cell, and its bounds must be accepted by the config."""
    from uwbench.registry import MODELS, TASKS
    from uwbench.training.config import resolve_run

    for key, param in search.items():
        section, name = key.split(".", 1)
        for cell in cells:
            registry = {"task": TASKS, "model": MODELS}.get(section)
            comp = cell.task if section == "task" else cell.model
            fields = train_fields if section == "train" else _fields_of(registry, comp, cell.config[section])
            if fields is None:
                continue
            if name not in fields:
                close = difflib.get_close_matches(name, sorted(fields), n=1, cutoff=0.5)
                hint = f" (did you mean {section}.{close[0]}?)" if close else ""
                raise fail(f"search.{key}: {section} {comp!r} of cell {cell.id} has no key {name!r}{hint}; "
                           f"allowed: {', '.join(sorted(fields))}")
            if cell.task in TASKS and cell.model in MODELS:
                probes = param.values if isinstance(param, ChoiceParam) else [param.low, param.high]
                for value in probes:
                    cfg = copy.deepcopy(cell.config)
                    cfg[section][name] = value
                    _check_names(cfg, f"search.{key}: value {value!r} for cell {cell.id}", fail)
                    try:
                        resolve_run(cfg)
                    except ConfigError as exc:
                        raise fail(f"search.{key}: value {value!r} is not accepted for cell {cell.id}: {exc}") from None


def plan_hash(plan: Plan) -> str:
    """A stable hash of everything that decides what runs (cells and their configs, seeds, search,
    objective, budget, pruning, mode, profile); titles, notes and paper values are left out, so fixing
    them does not start a new sweep."""
    payload = {
        "id": plan.spec.id,
        "profile": plan.profile,
        "mode": plan.mode,
        "cells": [[c.id, {s: {**c.inert.get(s, {}), **v} for s, v in c.config.items()}] for c in plan.cells],
        "seeds": plan.seeds,
        "final_seeds": plan.final_seeds,
        "search": {k: v.model_dump() for k, v in sorted(plan.search.items())},
        "objective": plan.objective.model_dump(),
        "budget": plan.budget.model_dump() if plan.budget else None,
        "pruning": plan.pruning.model_dump(),
    }
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def load_plan(path: str, profile: Optional[str] = None) -> Plan:
    return expand(load(path), profile, path)


# ---------------------------------------------------------------------------------------------
# `uwbench validate`
# ---------------------------------------------------------------------------------------------


@dataclass
class Check:
    path: str
    status: str  # ok | waits | error
    message: str
    plan: Optional[Plan] = None


def check(path: str) -> Check:
    """Validate a study file and every one of its profiles."""
    try:
        spec = load(path)
        plans = {name: expand(spec, name, path) for name in sorted({BASE_PROFILE, *spec.profiles})}
    except SpecError as exc:
        return Check(path, "error", str(exc))
    except FileNotFoundError as exc:
        return Check(path, "error", f"{path}: {exc.strerror}")
    plan = plans[spec.default_profile]
    waits = sorted({w for p in plans.values() for w in p.waits_for})
    sizes = ", ".join(f"{name} {len(p.cells)} cells/{p.n_runs()} runs" for name, p in plans.items())
    if waits:
        return Check(path, "waits", f"{spec.id}: waits for {', '.join(waits)} (not registered yet); "
                                    f"structure valid ({sizes})", plan)
    return Check(path, "ok", f"{spec.id}: {spec.mode}, {sizes}; spec hash {plan.spec_hash}", plan)

