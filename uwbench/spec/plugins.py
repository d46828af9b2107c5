"""Plugin modules: ``$UWBENCH_PLUGINS`` names modules that register extra tasks, models, writers or
axes; they are imported by every command that reads the registries (``uwbench train``, ``ls``,
``report``, ``bench``, ``sweep``: before a study is validated, and in every sweep worker)."""
from __future__ import annotations

import importlib
import os

PLUGINS_ENV = "UWBENCH_PLUGINS"  # comma-separated modules imported before validation and in workers


def import_plugins() -> None:
    """Import the modules named in ``$UWBENCH_PLUGINS`` (they register extra tasks or models), so a plugin
    component works in every command and process. A module that cannot be imported is an ``ImportError``
    naming it and the variable."""
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise PluginImportError(f"${PLUGINS_ENV} names the module {name!r}, which cannot be imported ({exc}): put "
                                    "its folder on PYTHONPATH, or fix the name") from exc


class PluginImportError(ImportError, ValueError):
    """A module named in ``$UWBENCH_PLUGINS`` cannot be imported (a ``ValueError`` too, so the CLI prints
    it as one line)."""

