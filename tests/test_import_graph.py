"""The import graph of the package has no cycle, and lower layers never import higher ones.

Every module of ``uwbench`` is parsed with ``ast`` (nothing is imported); its edges are every
``import``/``from ... import`` of a ``uwbench`` module, at module level and inside functions alike
(an import moved into a function to dodge a cycle is still a cycle), plus the modules it names in
a table of module names to load on use (``"uwbench.sweeps.backends.optuna"``): loaded by name is
still imported. Third-party imports (optional dependencies such as ray, mlflow or matplotlib) are not
part of the graph.

Plugin loading is the one arrow allowed to point up: ``uwbench.registry`` loads the built-in task,
model and writer modules by name (as it loads ``$UWBENCH_PLUGINS``), and they register themselves into
it (``LOADS_PLUGINS``).
"""
from __future__ import annotations

import ast
import os
from typing import Dict, List, Set


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "uwbench"


# Modules that load others by name as plugins (the loaded modules import them back, by design).
LOADS_PLUGINS = {"uwbench.registry"}

# Layers, lowest first: a module may import its own layer or a lower one, never a higher one.
# (Modules not listed sit in the layer of their package.)
LAYERS = [
    {"uwbench", "uwbench.env", "uwbench.errors", "uwbench.config", "uwbench.registry", "uwbench.theory",
     "uwbench.native", "uwbench.writing", "uwbench.tasks", "uwbench.models", "uwbench.axes", "uwbench.metrics", "uwbench.selection",
     "uwbench.analysis"},
    # the writer contract check trains a smoke model, so it sits with training, not with the writers
    {"uwbench.spec", "uwbench.training", "uwbench.tracking", "uwbench.writing.contract"},
    # the leaderboard reads a suite and builds its board from reports
    {"uwbench.sweeps", "uwbench.bench", "uwbench.report", "uwbench.leaderboard"},
    {"uwbench.commands"},
    {"uwbench.cli", "uwbench.__main__"},
]


def _modules() -> Dict[str, str]:
    out = {}
    for folder, _, files in os.walk(os.path.join(ROOT, PACKAGE)):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                mod = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                out[mod[: -len(".__init__")] if mod.endswith(".__init__") else mod] = path
    return out


MODULES = _modules()


def _owner(name: str):
    """The module ``name`` is (or lives in), or None for a name outside the package."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _edges(mod: str, path: str) -> Set[str]:
    with open(path) as fh:
        tree = ast.parse(fh.read(), path)
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    out: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(filter(None, (_owner(a.name) for a in node.names if a.name.split(".")[0] == PACKAGE)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                out.add(target if target in MODULES else _owner(base))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES \
                and node.value.count(".") >= 1 and mod not in LOADS_PLUGINS:
            out.add(node.value)  # a table of modules loaded on use
    out.discard(mod)
    out.discard(None)
    return out


GRAPH = {mod: _edges(mod, path) for mod, path in MODULES.items()}


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _layer(mod: str) -> int:
    name = mod
    while True:
        for rank, members in enumerate(LAYERS):
            if name in members:
                return rank
        if "." not in name:
            break
        name = name.rpartition(".")[0]
    raise AssertionError(f"{mod} is in no layer: add it (or its package) to LAYERS")


def test_the_parser_sees_module_and_function_level_imports():
    assert "uwbench.sweeps.planning" in GRAPH["uwbench.sweeps.backends.optuna"]  # module level
    assert "uwbench.tracking.mlflow" in GRAPH["uwbench.sweeps.common"]  # inside functions only
    assert "uwbench.sweeps.backends.ray" in GRAPH["uwbench.sweeps.backends"]  # a table loaded on use
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles (a module imports, perhaps inside a function, one that imports it back):\n" \
        + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_upward_imports():
    upward = [f"{mod} (layer {_layer(mod)}) imports {t} (layer {_layer(t)})"
              for mod in sorted(GRAPH) if mod not in LOADS_PLUGINS
              for t in sorted(GRAPH[mod]) if _layer(t) > _layer(mod)]
    assert not upward, "imports pointing up the layers:\n" + "\n".join(upward)
