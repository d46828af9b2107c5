"""The one search-space grammar (docs/design.md §7.2): a study's ``search`` entries compiled to Optuna
distributions. The Optuna backend suggests from them; Ray Tune uses the same distributions through
``OptunaSearch``, so both backends search exactly the same space.

    {type: float, low, high, log?, step?}  -> FloatDistribution
    {type: int,   low, high, log?, step?}  -> IntDistribution
    {type: choice, values: [...]}          -> CategoricalDistribution

Parameter names are the config paths (``train.lr``, ``model.cache_size``); ``apply`` writes sampled
values into a nested run config.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping

from uwbench.axes import SEED_PARAM
from uwbench.spec import ChoiceParam, FloatParam, IntParam


def to_distribution(param):
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(param, FloatParam):
        return FloatDistribution(param.low, param.high, log=param.log, step=param.step)
    if isinstance(param, IntParam):
        return IntDistribution(param.low, param.high, log=param.log, step=param.step)
    if isinstance(param, ChoiceParam):
        return CategoricalDistribution(list(param.values))
    raise TypeError(f"unknown search entry {param!r}")


def distributions(search: Mapping[str, Any]) -> Dict[str, Any]:
    """``{name: optuna distribution}`` in the spec's order."""
    return {name: to_distribution(param) for name, param in search.items()}


def grid_space(search: Mapping[str, Any], seeds: List[int]) -> Dict[str, List[Any]]:
    """The ``GridSampler`` search space of a faithful study: every choice, and the seeds."""
    space = {name: list(param.values) for name, param in search.items()}
    space[SEED_PARAM] = list(seeds)
    return space


def suggest(trial, search: Mapping[str, Any]) -> Dict[str, Any]:
    """Ask ``trial`` for every searched value (enqueued trials get their fixed values back)."""
    out = {}
    for name, param in search.items():
        if isinstance(param, FloatParam):
            out[name] = trial.suggest_float(name, param.low, param.high, log=param.log, step=param.step)
        elif isinstance(param, IntParam):
            out[name] = trial.suggest_int(name, param.low, param.high, log=param.log, step=param.step)
        else:
            out[name] = trial.suggest_categorical(name, list(param.values))
    return out


def apply(config: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """A copy of the nested run ``config`` with ``{"section.key": value}`` params written in (the
    ``seed`` parameter of faithful grids goes to ``train.seed``)."""
    out = copy.deepcopy({k: dict(v) for k, v in config.items()})
    for name, value in params.items():
        if name == SEED_PARAM:
            out.setdefault("train", {})["seed"] = int(value)
            continue
        section, key = name.split(".", 1)
        out.setdefault(section, {})[key] = value
    return out
