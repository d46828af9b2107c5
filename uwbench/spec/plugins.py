"""Plugin modules: ``$UWBENCH_PLUGINS`` names modules that register extra tasks, models, writers or
axes; they are imported before a study is validated and in every sweep worker."""
from __future__ import annotations

import importlib
import os

PLUGINS_ENV = "UWBENCH_PLUGINS"  # comma-separated modules imported before validation and in workers


def import_plugins() -> None:
    """Import the modules named in ``$UWBENCH_PLUGINS`` (they register extra tasks or models); done
    before validation and in every sweep worker, so a plugin component works in every process."""
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        importlib.import_module(name)

