"""Study specs: one YAML file per paper table or figure, validated and expanded into cells (docs/design.md §5).

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

Modules: ``schema`` (the pydantic models: every one forbids unknown keys, and errors name the file, the
key path and the allowed values), ``load`` (YAML), ``errors``, ``plugins`` (``$UWBENCH_PLUGINS``),
``plan`` (``Cell``, ``Plan``), ``expand`` (cells for one profile, checked against the registered
components; a study whose task or model is not registered yet is valid but *waits*), ``hash`` and
``check`` (a file and all its profiles, what ``uwbench validate`` prints).
"""
from __future__ import annotations

from uwbench.spec.check import Check, check
from uwbench.spec.errors import SpecError, format_validation_error
from uwbench.spec.expand import expand, load_plan
from uwbench.spec.hash import plan_hash
from uwbench.spec.load import load, parse, read_yaml
from uwbench.spec.plan import Cell, Plan
from uwbench.spec.plugins import PLUGINS_ENV, import_plugins
from uwbench.spec.schema import (BASE_PROFILE, ID_PATTERN, KEY_PATTERN, REQUIRED_PROFILES, SECTIONS, Budget,
                                 ChoiceParam, FloatParam, Group, IntParam, Objective, Paper, Param, Profile,
                                 Pruning, Scalar, Sections, Strict, StudySpec)


__all__ = ["BASE_PROFILE", "ID_PATTERN", "KEY_PATTERN", "PLUGINS_ENV", "REQUIRED_PROFILES", "SECTIONS", "Budget",
           "Cell", "Check", "ChoiceParam", "FloatParam", "Group", "IntParam", "Objective", "Paper", "Param", "Plan",
           "Profile", "Pruning", "Scalar", "Sections", "SpecError", "Strict", "StudySpec", "check", "expand",
           "format_validation_error", "import_plugins", "load", "load_plan", "parse", "plan_hash", "read_yaml"]
