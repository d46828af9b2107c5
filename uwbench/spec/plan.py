"""What a study expands to: ``Cell`` (one point of a study's grid) and ``Plan`` (a study resolved for
one profile: its cells, seeds, search space, objective, budget, pruning and spec hash)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from uwbench.spec.schema import Budget, Objective, Pruning, StudySpec


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
    paper_cell: Optional[str] = None  # the paper cell whose value ``paper`` is, when not this one (``paper_cells``)
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
    objective: Objective  # the task's measure: the only objective, or the first of a multi-objective list
    budget: Optional[Budget]
    pruning: Pruning
    spec_hash: str
    waits_for: List[str] = field(default_factory=list)
    objectives: List[Objective] = field(default_factory=list)  # every objective, ``objective`` first
    overrides: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # ``--set``: {section: {key: value}}
    skipped_cells: List[str] = field(default_factory=list)  # cells of the study left out by ``--cells``
    cell_seeds: Dict[str, List[int]] = field(default_factory=dict)  # cell id -> its seeds, where not ``seeds``
    # the study's (or profile's) ``population``: auto, off, a number of members, or None (not given); how a sweep
    # trains, so not in ``spec_hash``
    population: Optional[Union[str, int]] = None

    def __post_init__(self):
        if not self.objectives:
            self.objectives = [self.objective]

    @property
    def multi_objective(self) -> bool:
        return len(self.objectives) > 1

    @property
    def directions(self) -> List[str]:
        return [o.direction for o in self.objectives]

    @property
    def id(self) -> str:
        return self.spec.id

    def grid_points(self) -> List[Dict[str, Any]]:
        """Faithful mode: every combination of the (choice-only) search space."""
        keys = list(self.search)
        combos = itertools.product(*(self.search[k].values for k in keys))
        return [dict(zip(keys, combo)) for combo in combos]

    def seeds_of(self, cell_id: str) -> List[int]:
        """The seeds a faithful cell runs: its own (a profile's ``cell_seeds``) or the study's."""
        return self.cell_seeds.get(cell_id, self.seeds)

    def all_seeds(self) -> List[int]:
        """Every seed some cell runs, in first-seen order."""
        out: List[int] = []
        for seeds in [self.seeds, *self.cell_seeds.values()]:
            out += [s for s in seeds if s not in out]
        return out

    def runs_per_cell(self, cell_id: Optional[str] = None) -> int:
        """Planned runs of a cell (without one: of a cell on the study's seeds); a multi-objective study
        re-runs every Pareto-optimal trial, so this is its least (one Pareto-optimal trial)."""
        if self.mode == "faithful":
            seeds = self.seeds_of(cell_id) if cell_id is not None else self.seeds
            return len(self.grid_points()) * len(seeds)
        return self.budget.n_trials + len(self.final_seeds)

    def n_runs(self) -> int:
        return sum(self.runs_per_cell(c.id) for c in self.cells)

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise KeyError(cell_id)
