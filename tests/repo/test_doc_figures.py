"""Figures in the docs against the files they cite, and dotted code names in the docs against the code.

**The form of a cited figure.** A figure comes from a committed file when the file is named right after it, in
backticks, opening a parenthesis: ``... 99.7 ± 0.2 on reverse (`reports/table1_memorization/protocols.md`)``,
or ``(`a.csv`, `b.json`)`` for several files (the figures are then looked up in all of them). A citation
covers every figure written before it in its sentence (in a table row: its cell), back to the previous
citation of that sentence. In a table, a citation in a column's header cell covers every cell of that column,
as if written at the end of each. The files cited are those under ``reports/`` and ``benchmarks/results/``.

**What counts as a figure**: a number with a decimal point (``20.1``, ``+2.2%``, ``1.18x``) or with a thousands
separator (``4,146``), written outside backticks and link targets. Small integers (seeds, T = 50, dates) are
prose and are not checked.

**What "holds it" means**: the cited file exists and some number in it rounds to the figure at the figure's
own precision (half a unit of its last digit either way); a figure followed by ``%`` may also be a fraction in
the file (0.201 for 20.1%); signs are ignored. For a CSV the sum and the mean of each numeric column count as
numbers in it, so a total or an average over a whole column can be cited; a sum or mean over part of a file
is not checked this way and belongs in a block a command generates (as the README's results and board
blocks, and benchmarks/README.md's result tables, each checked by its own test).

**Dotted names**: every backticked name that looks like ``module.attribute`` and whose first part is
``uwbench``, ``torch``, a module of ``uwbench`` (by its file name: ``writer_bounds.schedule_table``) or a
class defined in ``uwbench`` (``MANN.compiled_step_saving``) must resolve to a real attribute. Settings
(``train.native``), file names (``runs.csv``) and other dotted text are left alone.

Generated blocks (between ``<!-- BEGIN`` and ``<!-- END`` lines) and fenced code are skipped.
"""
from __future__ import annotations

import ast
import bisect
import glob
import importlib
import os
import re
import shutil
from functools import lru_cache
from typing import Dict, List, Set, Tuple

import pytest

from tests.helpers import ROOT

DOC_GLOBS = ("README.md", "docs/*.md", "studies/README.md", "reports/README.md", "benchmarks/README.md")
CITED_DIRS = ("reports/", "benchmarks/results/")

PATH = r"`((?:reports|benchmarks/results)/[^`\s]+)`"
CITATION = re.compile(r"\(\s*" + PATH + r"((?:\s*(?:,|;|and)\s*" + PATH + r")*)")
FIGURE = re.compile(r"(?<![\w.,/#-])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+)(?![\w.]|,\d)(\s*%)?")
NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?")
SENTENCE = re.compile(r"(?<=[.!?:])\s+(?=[A-Z*\[(_`])")
DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\([^`]*\))?`")
FILE_ENDINGS = {"csv", "py", "md", "json", "yaml", "yml", "png", "html", "db", "pt", "cpp", "h", "txt", "log",
                "tex", "sh", "toml", "cfg", "journal", "so", "gz", "ini", "lock"}
SETTING_SECTIONS = {"train", "model", "task", "data", "eval", "sweep", "study", "writer", "machine",
                    "mlflow", "optuna", "ray"}  # settings, and tags named after a library (`mlflow.parentRunId`)


def docs(root: str = ROOT) -> List[str]:
    out: List[str] = []
    for pattern in DOC_GLOBS:
        out += sorted(glob.glob(os.path.join(root, pattern)))
    return out


def _prose_paragraphs(text: str) -> List[Tuple[int, str]]:
    """(first line number, text) of each paragraph outside fenced code and generated blocks; each table row,
    and each of its cells, counts as a paragraph of its own (a body cell followed by the citations of its
    column's header cell, if any)."""
    out: List[Tuple[int, str]] = []
    lines = text.splitlines()
    fence = generated = False
    buf: List[str] = []
    start = 0
    header: List[str] = []  # per column of the table being read: its header cell's citations
    in_table = False

    def flush():
        if buf:
            out.append((start, " ".join(buf)))
            buf.clear()

    for i, line in enumerate(lines, start=1):
        s = line.strip()
        if s.startswith("```"):
            flush()
            fence = not fence
            continue
        if s.startswith("<!-- BEGIN"):
            flush()
            generated = True
            continue
        if s.startswith("<!-- END"):
            generated = False
            continue
        if fence or generated:
            continue
        if not s:
            flush()
            in_table = False
            continue
        if s.startswith("|"):
            flush()
            cells = s.strip("|").split("|")
            if not in_table:  # the header row
                in_table = True
                header = [" ".join(m.group(0) for m in CITATION.finditer(c)) for c in cells]
                out += [(i, cell) for cell in cells]
            elif not re.fullmatch(r"[\s|:-]*", s):  # a body row (not the |---| line)
                out += [(i, cell + (" " + header[k] if k < len(header) and header[k] else ""))
                        for k, cell in enumerate(cells)]
            continue
        in_table = False
        if not buf:
            start = i
        buf.append(s)
    flush()
    return out


def _outside_code(text: str) -> str:
    """``text`` with backticked spans and link targets blanked (same length)."""
    text = re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), text)
    return re.sub(r"\]\([^)]*\)", lambda m: " " * len(m.group(0)), text)


def citations(path: str) -> List[Tuple[int, str, List[str]]]:
    """(line, figure as written, cited files) for every cited figure of one doc."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = []
    for line, para in _prose_paragraphs(text):
        for sentence in SENTENCE.split(para):
            last = 0
            for m in CITATION.finditer(sentence):
                files = [m.group(1)] + re.findall(PATH, m.group(2) or "")
                segment = _outside_code(sentence[last:m.start()])
                for fig in FIGURE.finditer(segment):
                    found.append((line, fig.group(1) + ("%" if fig.group(2) else ""), files))
                last = m.end()
    return found


def _pieces(path: str, text: str) -> List[str]:
    """The text a file's numbers are read from: a CSV's fields one by one (its commas separate fields, so
    ``0,4,2731.8`` is three numbers, not 4,273), any other file whole."""
    if not path.endswith(".csv"):
        return [text]
    import csv
    import io

    return [field for row in csv.reader(io.StringIO(text)) for field in row]


@lru_cache(maxsize=None)
def _numbers(path: str) -> Tuple[float, ...]:
    """Every number a file holds, sorted: its text's numbers and, for a CSV, each numeric column's sum and mean."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    values: Set[float] = set()
    for piece in _pieces(path, text):
        for m in NUMBER.finditer(piece):
            try:
                values.add(abs(float(m.group(0).replace(",", ""))))
            except ValueError:
                pass
    if path.endswith(".csv"):
        import pandas as pd

        frame = pd.read_csv(path, low_memory=False)
        for column in frame.columns:
            col = pd.to_numeric(frame[column], errors="coerce").dropna()
            if len(col) and pd.api.types.is_numeric_dtype(frame[column]):
                values.update({abs(float(col.sum())), abs(float(col.mean()))})
    return tuple(sorted(values))


def holds(path: str, figure: str) -> bool:
    """Whether the file at ``path`` holds ``figure`` (as written in a doc) by the rule of this module."""
    percent = figure.endswith("%")
    digits = figure.rstrip("%").replace(",", "")
    x = float(digits)
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    half = 0.5 * 10 ** -decimals + 1e-9
    values = _numbers(path)
    targets = [x] + ([x / 100.0] if percent else [])
    for t in targets:
        h = half if t == x else half / 100.0
        i = bisect.bisect_left(values, t - h)
        if i < len(values) and values[i] <= t + h:
            return True
    return False


def figure_errors(root: str = ROOT) -> List[str]:
    """One line per cited figure whose file is missing or does not hold it."""
    errors = []
    for doc in docs(root):
        rel = os.path.relpath(doc, root)
        for line, figure, files in citations(doc):
            paths = [os.path.join(root, f) for f in files]
            missing = [f for f, p in zip(files, paths) if not os.path.isfile(p)]
            if missing:
                errors.append(f"{rel}:{line}: {figure} cites {', '.join(missing)}, which does not exist")
            elif not any(holds(p, figure) for p in paths):
                errors.append(f"{rel}:{line}: {figure} is not in {', '.join(files)}")
    return errors


# ---- dotted names ----

@lru_cache(maxsize=None)
def _uwbench_index() -> Tuple[Dict[str, List[str]], Dict[str, List[str]]]:
    """Module names by file name (``writer_bounds`` -> ``uwbench.writer_bounds``), and the modules defining
    each top-level class, read from the sources (nothing imported)."""
    modules: Dict[str, List[str]] = {}
    classes: Dict[str, List[str]] = {}
    for path in glob.glob(os.path.join(ROOT, "uwbench", "**", "*.py"), recursive=True):
        rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
        name = rel[: -len(".__init__")] if rel.endswith(".__init__") else rel
        modules.setdefault(name.split(".")[-1], []).append(name)
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(name)
    return modules, classes


def _resolves(obj, parts: List[str]) -> bool:
    for p in parts:
        if hasattr(obj, p):
            obj = getattr(obj, p)
        elif p in getattr(obj, "__dataclass_fields__", {}) or p in getattr(obj, "__annotations__", {}):
            return True  # a dataclass field (or an annotated attribute) without a class-level default
        elif isinstance(obj, type) and re.search(rf"self\.{re.escape(p)}\s*[:=]", _source(obj)):
            return True  # an instance attribute its methods set
        else:
            try:
                obj = importlib.import_module(f"{obj.__name__}.{p}")
            except Exception:  # noqa: BLE001 - not a submodule either: the name does not resolve
                return False
    return True


def _source(cls) -> str:
    import inspect

    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        return ""


def name_resolves(name: str) -> bool:
    """Whether a dotted name of the docs resolves; True too for names this check does not cover."""
    parts = name.split(".")
    if parts[-1].lower() in FILE_ENDINGS:
        return True
    modules, classes = _uwbench_index()
    if parts[0] in ("uwbench", "torch"):
        for cut in range(len(parts), 0, -1):
            try:
                mod = importlib.import_module(".".join(parts[:cut]))
            except Exception:  # noqa: BLE001 - try the parent module
                continue
            return _resolves(mod, parts[cut:])
        return False
    if parts[0] in SETTING_SECTIONS:
        return True
    if parts[0] in modules:
        return any(_resolves(importlib.import_module(m), parts[1:]) for m in modules[parts[0]])
    if parts[0] in classes:
        return any(_resolves(getattr(importlib.import_module(m), parts[0]), parts[1:]) for m in classes[parts[0]])
    return True


def dotted_names(path: str) -> List[Tuple[int, str]]:
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    return [(i, m.group(1)) for i, line in enumerate(lines, start=1) for m in DOTTED.finditer(line)]


def name_errors(root: str = ROOT) -> List[str]:
    return [f"{os.path.relpath(doc, root)}:{line}: `{name}` does not resolve"
            for doc in docs(root) for line, name in dotted_names(doc) if not name_resolves(name)]


# ---- the tests ----

def test_every_cited_figure_is_in_the_file_it_cites():
    assert sum(len(citations(d)) for d in docs()) > 20, "the docs cite almost no figure: is the form still read?"
    errors = figure_errors()
    assert not errors, "figures that their cited file does not hold:\n" + "\n".join(errors)


def test_every_dotted_code_name_in_the_docs_resolves():
    errors = name_errors()
    assert not errors, "\n".join(errors)


def test_the_check_fails_when_a_cited_figure_is_edited_in_its_committed_csv(tmp_path):
    """A copy of the docs and of one cited CSV: the check passes, then fails once the CSV's value changes."""
    cited = [(d, line, fig, files[0]) for d in docs() for line, fig, files in citations(d)
             if len(files) == 1 and files[0].endswith(".csv")]
    assert cited, "no doc cites a figure from a CSV"
    doc, line, figure, csv = cited[0]
    for rel in [os.path.relpath(d, ROOT) for d in docs()] + [csv]:
        os.makedirs(os.path.dirname(tmp_path / rel) or tmp_path, exist_ok=True)
        shutil.copy(os.path.join(ROOT, rel), tmp_path / rel)
    relevant = [e for e in figure_errors(str(tmp_path)) if f": {figure} " in e and "does not exist" not in e]
    assert not relevant
    text = (tmp_path / csv).read_text(encoding="utf-8")

    def bump(m):  # every number of the CSV that the figure rounds from: moved well away from it
        return str(float(m.group(0)) + 7.0) if holds_value(m.group(0), figure) else m.group(0)

    import csv as csvlib
    import io

    out = io.StringIO()
    csvlib.writer(out, lineterminator="\n").writerows(
        [[NUMBER.sub(bump, field) for field in row] for row in csvlib.reader(io.StringIO(text))])
    (tmp_path / csv).write_text(out.getvalue(), encoding="utf-8")
    _numbers.cache_clear()
    try:
        errors = figure_errors(str(tmp_path))
    finally:
        _numbers.cache_clear()
    assert f"{os.path.relpath(doc, ROOT)}:{line}: {figure} is not in {csv}" in errors


def holds_value(token: str, figure: str) -> bool:
    """Whether one number of a file, as written there, rounds to ``figure``."""
    try:
        v = abs(float(token.replace(",", "")))
    except ValueError:
        return False
    digits = figure.rstrip("%").replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    half = 0.5 * 10 ** -decimals + 1e-9
    x = float(digits)
    return abs(v - x) <= half or (figure.endswith("%") and abs(v - x / 100) <= half / 100)


def test_a_misnamed_function_and_a_missing_file_are_caught(tmp_path):
    assert not name_resolves("theory.schedule_table") and name_resolves("writer_bounds.schedule_table")
    assert name_resolves("uwbench.report.rendering.readme_block.render") and not name_resolves("uwbench.report.nothing_here")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("It took 12.5 s (`benchmarks/results/none.json`).\n", encoding="utf-8")
    assert figure_errors(str(tmp_path)) == [
        "docs/x.md:1: 12.5 cites benchmarks/results/none.json, which does not exist"]


def test_the_fields_of_a_csv_are_read_apart(tmp_path):
    (tmp_path / "f.csv").write_text("a,b,c\n2.28,4,2731.8\n", encoding="utf-8")
    assert holds(str(tmp_path / "f.csv"), "2,732") and not holds(str(tmp_path / "f.csv"), "4,273")


@pytest.mark.parametrize("figure,ok", [("20.1%", True), ("0.2", True), ("4,146", True), ("20.2%", False)])
def test_rounding_and_fractions(tmp_path, figure, ok):
    (tmp_path / "f.json").write_text('{"a": 0.2011, "b": 4146, "c": 0.18}', encoding="utf-8")
    assert holds(str(tmp_path / "f.json"), figure) is ok


def test_a_citation_in_a_header_cell_covers_its_column(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "a.csv").write_text("x,y\n12.5,3\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text(
        "| cell | value (`reports/a.csv`) | other |\n|---|---:|---:|\n| one | 12.5 | 7.25 |\n| two | 13.5 | 1.5 |\n\n"
        "After the table 9.5 is prose.\n", encoding="utf-8")
    assert [(line, fig) for line, fig, _ in citations(str(tmp_path / "docs" / "x.md"))] == [(3, "12.5"), (4, "13.5")]
    assert figure_errors(str(tmp_path)) == ["docs/x.md:4: 13.5 is not in reports/a.csv"]
