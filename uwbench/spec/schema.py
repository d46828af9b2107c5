"""The study-file schema (pydantic): every model forbids unknown keys and names the allowed ones.

The file format is documented in ``studies/README.md``; the validators here check what one file can
check alone (keys, ranges, modes, profiles); ``uwbench.spec.expand`` checks the settings against the
registered components.
"""
from __future__ import annotations

import json
import re
from typing import Annotated, Any, Dict, List, Literal, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic import field_validator, model_validator

from uwbench import metrics, suggest
from uwbench.config import KEY_PATTERN, SECTIONS

ID_PATTERN = r"^[a-z0-9][a-z0-9_]*$"
REQUIRED_PROFILES = ("cpu", "smoke")
BASE_PROFILE = "paper"  # the file as written; other profiles are overlays on it

Scalar = Union[StrictBool, StrictInt, StrictFloat, StrictStr, None]


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
                    hint = suggest.hint(key, allowed)
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
    """One objective: a metric and its direction. A study's ``objective`` is one of these (the task's
    measure) or a list of them: the task's measure first, then the costs it is traded against
    (``metrics.COSTS``: ``seconds_per_100``, ``compression_ratio``), which makes a multi-objective study."""

    metric: Literal[metrics.objective_keys(costs=True)] = "eval_accuracy"
    direction: Literal["maximize", "minimize"] = "maximize"

    @model_validator(mode="after")
    def _check(self):
        want = metrics.direction_of(self.metric)
        if self.direction != want:
            raise ValueError(f"objective {self.metric} must be paired with direction: {want}, got {self.direction}")
        return self

    @property
    def run_metric(self) -> str:
        """The MLflow metric of a finished run that holds the objective value."""
        return metrics.run_key_of(self.metric)

    @property
    def as_metric(self) -> metrics.Metric:
        """The objective as data (split, measure, direction)."""
        return metrics.get(self.metric)


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


PopulationSetting = Optional[Union[Literal["auto", "off"], StrictInt]]


def check_population(value: Any) -> Any:
    """A ``population`` setting: ``auto``, ``off`` (YAML reads a bare ``off`` as false, taken as ``off``) or a
    number of members >= 1; None where not given."""
    if value is False:
        return "off"
    if value is None or value in ("auto", "off") or (isinstance(value, int) and not isinstance(value, bool)
                                                      and value >= 1):
        return value
    raise ValueError(f"`population` must be auto, off or a number of members >= 1, got {value!r}")


class Profile(Strict):
    """An overlay on the study: sizes, budget and seeds for a machine or a test."""

    description: str = ""
    task: Dict[str, Scalar] = {}  # forced on every cell whose task has the key
    model: Dict[str, Scalar] = {}  # forced on every cell whose model has the key
    train: Dict[str, Scalar] = {}
    grid: Dict[str, List[Scalar]] = {}  # replace the values of a grid axis in every group that has it
    cells: Optional[List[str]] = None  # keep only the cells matching these patterns (fnmatch)
    seeds: Optional[List[int]] = None
    # faithful studies: the seeds of the cells matching a pattern (fnmatch), in place of ``seeds``, e.g.
    # more seeds for the cells whose spread is wide; a cell takes the first pattern it matches
    cell_seeds: Dict[str, List[int]] = {}
    # settings of the cells matching a pattern (fnmatch), over the profile's own, e.g. a longer budget for
    # the cells that learn slowest; a cell takes the first pattern it matches; the keys are strict
    cell_set: Dict[str, Sections] = {}
    final_seeds: Optional[List[int]] = None
    budget: Optional[Budget] = None
    pruning: Optional[Pruning] = None
    search: Dict[str, Param] = {}  # replace these entries of the search space
    # this profile's cell id -> the paper cell (a key of ``paper.values``) it stands in for, when the
    # profile renames cells (e.g. T=30 standing for the paper's T=50); the report puts that value beside it
    paper_cells: Dict[str, str] = {}
    # how a sweep trains a cell's runs of one shape (the study's ``population``, replaced): not what runs
    population: PopulationSetting = None

    @field_validator("population", mode="before")
    @classmethod
    def _population(cls, value):
        return check_population(value)


class OtherRunSet(Strict):
    label: str  # its column header in the report, e.g. "decoder writes (the released code)"
    snapshot: str  # its snapshot folder (runs.csv, curves.csv), relative to the study's report folder
    # the profile its runs were made with (default: the study's default profile): it is shown only beside a report
    # of that profile (a report of another profile has other cells, e.g. Table 1's T=100 columns)
    profile: Optional[str] = None


class Protocols(Strict):
    """Run sets of this study under other protocols, shown beside its own runs (``report/verdicts/protocols.py``)."""

    label: str  # this study's own runs, e.g. "read-only decoder (the paper's runs)"
    others: List[OtherRunSet] = Field(min_length=1)


class MoreColumns(Strict):
    """Another profile's run set whose cells are more columns of this study's table (Table 1's T=100 beside its
    T=50): the default profile's report shows the paper's whole table (``report/data/columns.py``)."""

    profile: str  # the profile its runs were swept with, e.g. paper100
    snapshot: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")  # its report folder inside the study's, e.g. t100

    @field_validator("snapshot")
    @classmethod
    def _inside(cls, value: str) -> str:
        if value in (".", ".."):
            raise ValueError(f"snapshot {value!r}: name a folder inside the study's report folder, e.g. t100")
        return value


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
    objective: Union[Objective, List[Objective]] = Objective()  # a list: multi-objective (``objectives``)
    budget: Optional[Budget] = None
    pruning: Pruning = Pruning()
    profiles: Dict[str, Profile]
    default_profile: str = BASE_PROFILE
    paper: Optional[Paper] = None
    notes: str = ""
    deviations: List[str] = []  # this study's departures from the paper (listed in studies/README.md)
    protocols: Optional[Protocols] = None  # earlier run sets under other protocols, shown beside this one
    more_columns: List[MoreColumns] = []  # other profiles' run sets that complete the default profile's table
    # how a sweep trains a cell's runs of one shape: together as populations of up to this many members (auto: as
    # many as pay on the device, ``sweeps/planning.population_limit``) or each alone (off). How to train,
    # not what: left out of the spec hash, and `uwbench sweep --population` overrides it
    population: PopulationSetting = None

    @field_validator("population", mode="before")
    @classmethod
    def _population(cls, value):
        return check_population(value)

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
        _check_objectives(self)
        for i, more in enumerate(self.more_columns):
            if more.profile not in self.profiles or more.profile == self.default_profile:
                others = ", ".join(sorted(p for p in self.profiles if p != self.default_profile))
                raise ValueError(f"more_columns[{i}].profile {more.profile!r}: must be a profile of this study other "
                                 f"than the default ({self.default_profile}); known: {others}")
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
                _check_faithful(prof.search, f"profiles.{name}.search", prof.budget, prof.final_seeds,
                                f"profiles.{name}.final_seeds")
            elif prof.final_seeds is not None:  # given, so it must be a list of seeds (`[]` is no final runs)
                _check_seeds(f"profiles.{name}.final_seeds", prof.final_seeds)
            for key in prof.search:
                if key not in self.search:
                    raise ValueError(f"profiles.{name}.search.{key}: not in the study's search space "
                                     f"(a profile replaces entries; known: {', '.join(self.search) or 'none'})")
            for section in SECTIONS:
                if "name" in getattr(prof, section):
                    raise ValueError(f"profiles.{name}.{section}.name: a profile cannot change the {section}")
            if prof.seeds is not None:
                _check_seeds(f"profiles.{name}.seeds", prof.seeds)
            if prof.cell_seeds and self.mode != "faithful":
                raise ValueError(f"profiles.{name}.cell_seeds: only a faithful study runs its cells over seeds "
                                 "(a tuned one re-runs its best config on `final_seeds`)")
            for pattern, seeds in prof.cell_seeds.items():
                _check_seeds(f"profiles.{name}.cell_seeds.{pattern}", seeds)
            for pattern, sections in prof.cell_set.items():
                for section in SECTIONS:
                    if "name" in getattr(sections, section):
                        raise ValueError(f"profiles.{name}.cell_set.{pattern}.{section}.name: a profile cannot "
                                         f"change the {section}")
                if "seed" in sections.train:
                    raise ValueError(f"profiles.{name}.cell_set.{pattern}.train.seed: a cell's seeds are the "
                                     "profile's `cell_seeds`")
        for section in SECTIONS:
            if "name" in getattr(self.fixed, section):
                raise ValueError(f"fixed.{section}.name is not allowed (use `task.name` or the groups' `model`)")
        return self

    @property
    def objectives(self) -> List[Objective]:
        """Every objective, the task's measure first (one entry for a single-objective study)."""
        return list(self.objective) if isinstance(self.objective, list) else [self.objective]

    @property
    def multi_objective(self) -> bool:
        return isinstance(self.objective, list)


MULTI_OBJECTIVE_PRUNING = ("a multi-objective study cannot be pruned (Optuna prunes single-objective trials "
                           "only, and Ray's schedulers need one metric): write `pruning: {type: none}`")


def _check_objectives(spec: "StudySpec") -> None:
    """A single objective is the task's measure; a list is that measure first, then distinct costs, in a
    tuned study with pruning off (the study's and every profile's)."""
    if not spec.multi_objective:
        if metrics.is_cost(spec.objective.metric):
            raise ValueError(f"objective {spec.objective.metric} is a cost: a single objective is the task's measure "
                             f"({', '.join(metrics.objective_keys())}); trade a cost against it with a list, e.g. "
                             f"`objective: [{{metric: eval_accuracy, direction: maximize}}, "
                             f"{{metric: {spec.objective.metric}, direction: minimize}}]`")
        return
    objs = spec.objective
    if len(objs) < 2:
        raise ValueError("an objective list needs at least two entries (the task's measure, then a cost); "
                         "a single objective is written as a mapping: `objective: {metric: ..., direction: ...}`")
    if metrics.is_cost(objs[0].metric):
        raise ValueError(f"objective[0] must be the task's measure ({', '.join(metrics.objective_keys())}), got the "
                         f"cost {objs[0].metric}; list the costs after it")
    for i, o in enumerate(objs[1:], start=1):
        if not metrics.is_cost(o.metric):
            raise ValueError(f"objective[{i}] {o.metric}: only the first objective is the task's measure; the others "
                             f"are costs: {', '.join(metrics.COSTS)}")
    keys = [o.metric for o in objs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"objective lists {keys} with a repeated metric")
    if spec.mode != "tuned":
        raise ValueError("a multi-objective `objective` list needs mode: tuned (the search finds the Pareto front; "
                         "a faithful study runs its grid and is chosen on the task's measure)")
    if spec.pruning.type != "none":
        raise ValueError(f"pruning.type is {spec.pruning.type!r}: {MULTI_OBJECTIVE_PRUNING}")
    for name, prof in spec.profiles.items():
        if prof.pruning is not None and prof.pruning.type != "none":
            raise ValueError(f"profiles.{name}.pruning.type is {prof.pruning.type!r}: {MULTI_OBJECTIVE_PRUNING}")


def _check_seeds(where: str, seeds: List[int]) -> None:
    """Every list of seeds, wherever it is given: not empty (no runs), no seed twice (two runs of one job)."""
    if not seeds:
        raise ValueError(f"{where} must list at least one seed, got []")
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise ValueError(f"{where} has repeated seeds {seeds} (listed more than once: "
                         f"{', '.join(map(str, repeated))}); list each seed once")


def _check_faithful(search, where, budget, final_seeds: Optional[List[int]],
                    seeds_where: str = "final_seeds") -> None:
    """A faithful study (or profile) runs its grid on ``seeds``: choice-only search, no budget, no final
    seeds (a profile's ``final_seeds`` is None unless written, so even ``[]`` there is refused)."""
    for key, param in search.items():
        if not isinstance(param, ChoiceParam):
            raise ValueError(f"{where}.{key}: mode: faithful runs the paper's grid, so every search entry must "
                             f"be `{{type: choice, values: [...]}}`, got type: {param.type}")
    if budget is not None:
        raise ValueError("budget applies to mode: tuned only (a faithful study runs every grid point x seed)")
    given = final_seeds if seeds_where == "final_seeds" else final_seeds is not None  # the study's default: []
    if given:
        raise ValueError(f"{seeds_where} applies to mode: tuned only (a faithful study runs its `seeds`), got "
                         f"{final_seeds}")

