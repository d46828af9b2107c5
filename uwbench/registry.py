"""One small registry class: names -> factories (tasks, models, writers, controllers, ...).

Components register themselves with ``@REGISTRY.register("name", config=SomeConfig)`` so the rest of
the code looks names up instead of branching on them. ``build_config(name, values)`` makes the
component's config from its settings (defaults filled, keys and values checked). Unknown names fail
with the list of known names and a "did you mean" suggestion.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from uwbench import suggest
from uwbench.config import ConfigError, build
from uwbench.errors import UserError


class UnknownNameError(UserError, KeyError):
    """Raised for a name that no component registered; the message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


@dataclass(frozen=True)
class Entry:
    name: str
    factory: Callable[..., Any]
    config: Optional[type]  # the component's config dataclass: the one home of its defaults
    help: str


class Registry:
    """A named table of components of one kind (``kind`` is used in error messages)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: Dict[str, Entry] = {}

    def register(self, name: str, config: Optional[type] = None, help: str = ""):
        def decorator(factory):
            if name in self._entries:
                raise UserError(f"{self.kind} {name!r} is registered twice")
            doc = help or (factory.__doc__ or "").strip().splitlines()[0:1]
            self._entries[name] = Entry(name, factory, config, doc if isinstance(doc, str) else "".join(doc))
            return factory

        return decorator

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a plugin's component, e.g. at the end of a test that imported it)."""
        self._entries.pop(name, None)

    def entry(self, name: str) -> Entry:
        _load_builtin_components()
        if name not in self._entries:
            raise UnknownNameError(self.unknown_message(name))
        return self._entries[name]

    def get(self, name: str) -> Callable[..., Any]:
        return self.entry(name).factory

    def build_config(self, name: str, values: Optional[Mapping[str, Any]] = None) -> Any:
        """The config of ``name`` from ``values`` (its settings; the rest keep their defaults). A component
        registered without a config dataclass takes no settings and gets None."""
        entry = self.entry(name)
        if entry.config is None:
            if values:
                raise ConfigError(f"{self.kind} {name!r} takes no settings, got {', '.join(sorted(values))}")
            return None
        return build(entry.config, dict(values or {}), f"{self.kind} ({name})")

    def unknown_message(self, name: str) -> str:
        known = self.names()
        hint = suggest.hint(name, known, suggest.SENTENCE)
        return f"unknown {self.kind} {name!r}.{hint} Known {self.kind}s: {', '.join(known)}"

    def names(self) -> List[str]:
        _load_builtin_components()
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        _load_builtin_components()
        return name in self._entries

    def __iter__(self) -> Iterator[Entry]:
        _load_builtin_components()
        return iter(self._entries[n] for n in sorted(self._entries))


TASKS = Registry("task")
MODELS = Registry("model")
WRITERS = Registry("writer")
CONTROLLERS = Registry("controller")

# Modules whose import registers components. Importing them lazily keeps `uwbench --help` instant.
BUILTIN_MODULES = (
    "uwbench.tasks",
    "uwbench.models",
    "uwbench.writing",
)

_loaded = False


def _load_builtin_components() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import importlib

    for module in BUILTIN_MODULES:
        importlib.import_module(module)
