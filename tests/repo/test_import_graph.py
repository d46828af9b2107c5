"""The import graph of the package: no module cycle, no package cycle, and lower layers of packages never
import higher ones.

Every module of ``uwbench`` is parsed with ``ast`` (nothing is imported); its edges are every
``import``/``from ... import`` of a ``uwbench`` module, at module level and inside functions alike
(an import moved into a function to dodge a cycle is still a cycle), plus the modules it names in
a table of module names to load on use (``"uwbench.sweeps.backends.optuna"``): loaded by name is
still imported. Third-party imports (optional dependencies such as ray, mlflow or matplotlib) are not
part of the graph.

The layers are of packages: each subpackage (``uwbench.report``) or top-level module (``uwbench.env``) of
``uwbench`` is one unit, and every module of a unit sits in its unit's layer. A unit imports its own layer
or a lower one, and no two units import each other, directly or round a loop (``test_no_package_cycles``):
so a module cycle between packages is caught even when every one of its modules sits in one layer.

Inside ``uwbench.report`` the same rule holds for the stages of its pipeline (``REPORT_STAGES``): data <
analysis < verdicts < rendering, a stage never importing a later one nor the package's ``__init__``.

Plugin loading is the one arrow allowed to point up: ``uwbench.registry`` loads the built-in task,
model and writer modules by name (as it loads ``$UWBENCH_PLUGINS``), and they register themselves into
it (``LOADS_PLUGINS``).
"""
from __future__ import annotations

import ast
import os
from typing import Dict, List, Set


from tests.helpers import ROOT

PACKAGE = "uwbench"


# Modules that load others by name as plugins (the loaded modules import them back, by design).
LOADS_PLUGINS = {"uwbench.registry"}

# Layers of units (packages and top-level modules), lowest first: a unit may import its own layer or a lower
# one, never a higher one. Every unit is listed, so a new package is placed on purpose.
LAYERS = [
    # the foundation: the environment, configs, registries, metrics and run selection; the tasks, models and
    # writers (the models import the writers; nothing here trains)
    {"uwbench", "uwbench.env", "uwbench.errors", "uwbench.config", "uwbench.suggest", "uwbench.registry",
     "uwbench.paths", "uwbench.values", "uwbench.atomic", "uwbench.theory", "uwbench.writer_bounds", "uwbench.axes",
     "uwbench.metrics", "uwbench.selection", "uwbench.native", "uwbench.writing", "uwbench.tasks",
     "uwbench.models", "uwbench.analysis", "uwbench.tabular", "uwbench.png", "uwbench.shutdown"},
    # study files, the trainer, MLflow
    {"uwbench.spec", "uwbench.training", "uwbench.tracking"},
    # the recorded runs (runs.csv, curves.csv, traces.csv): what sweeps restore and reports compute from
    {"uwbench.snapshot"},
    # runs made: sweeps (restore puts a snapshot back) and speed benchmarks
    {"uwbench.sweeps", "uwbench.bench"},
    # reports, from snapshots, reading a sweep's Optuna storage for the search analysis (inside, the pipeline of
    # REPORT_STAGES)
    {"uwbench.report"},
    # the leaderboard: sweeps a row, computes its board with the report's tables and tests
    {"uwbench.leaderboard"},
    {"uwbench.commands"},
    {"uwbench.cli", "uwbench.__main__", "uwbench.dashboard"},
]


# Within ``uwbench.report``, the stages of its pipeline, lowest first: a stage's modules import their own stage or
# a lower one, never a higher one, nor the package's ``__init__`` (``report_study``, above every stage). Every module
# of the package but its ``__init__`` is in one stage.
REPORT = "uwbench.report"
REPORT_STAGES = ["uwbench.report.data", "uwbench.report.analysis", "uwbench.report.verdicts", "uwbench.report.rendering"]


def modules(root: str = ROOT) -> Dict[str, str]:
    """``{module name: file}`` of every module of the package under ``root``."""
    out = {}
    for folder, _, files in os.walk(os.path.join(root, PACKAGE)):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                mod = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                out[mod[: -len(".__init__")] if mod.endswith(".__init__") else mod] = path
    return out


def _owner(name: str, known: Dict[str, str]):
    """The module ``name`` is (or lives in), or None for a name outside the package."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _edges(mod: str, path: str, known: Dict[str, str]) -> Set[str]:
    with open(path) as fh:
        tree = ast.parse(fh.read(), path)
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    out: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(filter(None, (_owner(a.name, known) for a in node.names if a.name.split(".")[0] == PACKAGE)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                out.add(target if target in known else _owner(base, known))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known \
                and node.value.count(".") >= 1 and mod not in LOADS_PLUGINS:
            out.add(node.value)  # a table of modules loaded on use
    out.discard(mod)
    out.discard(None)
    return out


def graph(root: str = ROOT) -> Dict[str, Set[str]]:
    """``{module: the package modules it imports}`` of the tree under ``root``."""
    known = modules(root)
    return {mod: _edges(mod, path, known) for mod, path in known.items()}


MODULES = modules()
GRAPH = graph()


def unit(mod: str) -> str:
    """The package or top-level module of ``uwbench`` that ``mod`` belongs to: its layer's unit."""
    return ".".join(mod.split(".")[:2])


def package_graph(modules_graph: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    """``{unit: the other units it imports}``, the plugin loader's edges left out."""
    out: Dict[str, Set[str]] = {unit(m): set() for m in modules_graph}
    for mod, targets in modules_graph.items():
        if mod not in LOADS_PLUGINS:
            out[unit(mod)].update(unit(t) for t in targets if unit(t) != unit(mod))
    return out


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
    for rank, members in enumerate(LAYERS):
        if unit(mod) in members:
            return rank
    raise AssertionError(f"{unit(mod)} is in no layer: add it to LAYERS")


def upward_imports(modules_graph: Dict[str, Set[str]]) -> List[str]:
    """Each import of a module from a unit in a higher layer than its own, as a line."""
    return [f"{mod} (layer {_layer(mod)}) imports {t} (layer {_layer(t)})"
            for mod in sorted(modules_graph) if mod not in LOADS_PLUGINS
            for t in sorted(modules_graph[mod]) if _layer(t) > _layer(mod)]


def stage(mod: str):
    """The rank of the report stage ``mod`` belongs to (``REPORT_STAGES``); the package's ``__init__`` ranks above
    them all; None outside ``uwbench.report``."""
    if mod == REPORT:
        return len(REPORT_STAGES)
    for rank, package in enumerate(REPORT_STAGES):
        if mod == package or mod.startswith(package + "."):
            return rank
    return None


def backward_stage_imports(modules_graph: Dict[str, Set[str]]) -> List[str]:
    """Each import of a report module from a later stage of the pipeline than its own, as a line."""
    return [f"{mod} ({REPORT_STAGES[stage(mod)].rpartition('.')[2]}) imports {t}"
            for mod in sorted(modules_graph) if stage(mod) is not None and mod != REPORT
            for t in sorted(modules_graph[mod]) if stage(t) is not None and stage(t) > stage(mod)]


def test_the_parser_sees_module_and_function_level_imports():
    assert "uwbench.sweeps.planning" in GRAPH["uwbench.sweeps.backends.optuna"]  # module level
    assert "uwbench.tracking.mlflow" in GRAPH["uwbench.sweeps.common"]  # inside functions only
    assert "uwbench.sweeps.backends.ray" in GRAPH["uwbench.sweeps.backends"]  # a table loaded on use
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_two_packages_importing_each_other_are_a_package_cycle_with_no_module_cycle():
    knot = {"uwbench.report.rendering.index": {"uwbench.leaderboard.steps"},
            "uwbench.leaderboard.steps": {"uwbench.report.board"}, "uwbench.report.board": set()}
    assert _cycles(knot) == [] and _cycles(package_graph(knot)) == [["uwbench.leaderboard", "uwbench.report"]]


def test_every_unit_is_in_one_layer():
    placed = [u for members in LAYERS for u in members]
    assert len(placed) == len(set(placed)), "a unit is in two layers"
    assert set(package_graph(GRAPH)) <= set(placed), "units in no layer: " + ", ".join(
        sorted(set(package_graph(GRAPH)) - set(placed)))


def test_no_import_cycles():
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles (a module imports, perhaps inside a function, one that imports it back):\n" \
        + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_package_cycles():
    cycles = _cycles(package_graph(GRAPH))
    assert not cycles, "packages that import each other (perhaps inside functions, perhaps round a loop):\n" \
        + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_upward_imports():
    upward = upward_imports(GRAPH)
    assert not upward, "imports pointing up the layers:\n" + "\n".join(upward)


def test_errors_imports_no_other_module():
    """``uwbench.errors`` holds the base of the user's errors (``UserError``) that every module derives from, so it
    sits below them all: it imports no module of the package, not even inside a function."""
    assert GRAPH["uwbench.errors"] == set()


def test_every_report_module_is_in_one_stage():
    outside = [m for m in MODULES if (m == REPORT or m.startswith(REPORT + ".")) and m != REPORT and stage(m) is None]
    assert not outside, "report modules in no stage of REPORT_STAGES: " + ", ".join(sorted(outside))


def test_report_stages_import_one_way():
    """data < analysis < verdicts < rendering: calculation never imports the text, figures and files made of it."""
    backward = backward_stage_imports(GRAPH)
    assert not backward, "report modules importing a later stage of the pipeline:\n" + "\n".join(backward)


def test_an_analysis_module_importing_rendering_is_caught():
    knot = {"uwbench.report.analysis.summary": {"uwbench.report.rendering.text", "uwbench.report.data.study"},
            "uwbench.report.rendering.text": {"uwbench.report.analysis.summary"},
            "uwbench.report.verdicts.judge": {"uwbench.report"}, "uwbench.report.data.study": set()}
    assert backward_stage_imports(knot) == [
        "uwbench.report.analysis.summary (analysis) imports uwbench.report.rendering.text",
        "uwbench.report.verdicts.judge (verdicts) imports uwbench.report"]
