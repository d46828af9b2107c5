"""Plugin modules: ``$UWBENCH_PLUGINS`` names modules that register extra tasks, models, writers or
axes; they are imported by every command that reads the registries (``uwbench train``, ``ls``,
``report``, ``bench``, ``sweep``: before a study is validated, and in every sweep worker)."""
from __future__ import annotations

import importlib
import os

from uwbench.errors import UserError

PLUGINS_ENV = "UWBENCH_PLUGINS"  # comma-separated modules imported before validation and in workers


def import_plugins() -> None:
    """Import the modules named in ``$UWBENCH_PLUGINS`` (they register extra tasks or models), so a plugin
    component works in every command and process. A module that cannot be found, or that fails while it is
    imported (a syntax error, an exception at its top level), is a ``PluginImportError`` naming it, the
    variable and, for a syntax error, the file and line."""
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise PluginImportError(f"${PLUGINS_ENV} names the module {name!r}, which cannot be imported ({exc}): put "
                                    "its folder on PYTHONPATH, or fix the name") from exc
        except SyntaxError as exc:
            raise PluginImportError(f"${PLUGINS_ENV} names the module {name!r}, which has a syntax error: "
                                    f"{exc.filename}, line {exc.lineno}: {exc.msg}; fix it, or remove it from "
                                    f"${PLUGINS_ENV}") from exc
        except Exception as exc:
            raise PluginImportError(f"${PLUGINS_ENV} names the module {name!r}, whose import failed "
                                    f"({type(exc).__name__}: {exc}); fix it, or remove it from ${PLUGINS_ENV}") from exc


class PluginImportError(ImportError, UserError):
    """A module named in ``$UWBENCH_PLUGINS`` cannot be imported (a ``UserError`` too, so the CLI prints
    it as one line)."""

