"""The sweep engines behind ``uwbench.sweeps.driver`` (the protocol is in the driver's docstring): each
module holds only what is specific to its engine. Imported on use (Ray is slow to import)."""
from __future__ import annotations

import importlib

from uwbench.sweeps.common import SweepError

MODULES = {
    "optuna": "uwbench.sweeps.backends.optuna",  # worker processes on any number of machines, one Optuna storage
    "ray": "uwbench.sweeps.backends.ray",  # Ray Tune, on a local Ray or a cluster
}


class _Backends:
    names = tuple(MODULES)

    def get(self, name: str):
        if name not in MODULES:
            raise SweepError(f"unknown sweep backend {name!r}; use one of {', '.join(MODULES)}")
        return importlib.import_module(MODULES[name]).Backend


BACKENDS = _Backends()
