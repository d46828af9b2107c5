"""The one table type of the package: a ``Table`` (columns, rows of strings, the numeric CSV form, notes),
written as Markdown, CSV rows and LaTeX (booktabs), with the number format and the file-name form of a title
they share. Reports (``uwbench.report``), the leaderboard, the speed benchmarks' README tables, the sweep's
summary and ``uwbench theory`` build their tables as one. No tabulate, no Styler: the text is ours, so it is
stable across library versions (the report's HTML page is its Markdown rendered, ``uwbench.report.rendering.page``).
The snapshot's own CSV text (``runs.csv``) is ``uwbench.snapshot``'s."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, List, Tuple

from uwbench.values import is_number


def slug(text: str) -> str:
    """A file-name form of a title: lower case, runs of other characters as one '-'."""
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "x"


# --------------------------------------------------------------------------------------------------
# Table objects
# --------------------------------------------------------------------------------------------------


@dataclass
class Table:
    """A table: ``columns`` (flat names), optional ``groups`` [(name, span)] over them (LaTeX header
    rows), ``rows`` of strings, ``csv_columns`` / ``csv_rows`` the numeric form written to CSV."""

    title: str
    columns: List[str]
    rows: List[List[str]]
    groups: List[Tuple[str, int]] = field(default_factory=list)
    csv_columns: List[str] = field(default_factory=list)
    csv_rows: List[List[Any]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


def fmt(v, decimals: int = 1, sign: bool = False) -> str:
    """Fixed decimals; '+' on non-zero values when ``sign``; never '-0.0'; '' for a missing value."""
    if not is_number(v):
        return ""
    x = float(f"{float(v):.{decimals}f}")
    if x == 0:
        x = 0.0
    return f"{x:+.{decimals}f}" if (sign and x != 0) else f"{x:.{decimals}f}"


# --------------------------------------------------------------------------------------------------
# Writers
# --------------------------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


NUMERIC_CELL = re.compile(r"^[-+−]?[\d.,]+")
NUMERIC_WORDS = ("not run", "incomplete (no finished final run)", "—", "")


def _numeric_column(body: List[List[str]], i: int) -> bool:
    """Right-align a column whose cells are numbers (or 'not run' / 'failed (..)' / '—' in their place)."""
    cells = [r[i] for r in body if i < len(r)]
    return bool(cells) and all(NUMERIC_CELL.match(c) or c in NUMERIC_WORDS or c.startswith("failed (")
                               for c in cells)


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table: number columns right-aligned, text columns left-aligned."""
    cols = [_md_cell(c) for c in table.columns]
    body = [[_md_cell(c) for c in row] for row in table.rows]
    widths = [max([len(c)] + [len(r[i]) for r in body] + [3]) for i, c in enumerate(cols)]
    right = [i > 0 and _numeric_column(body, i) for i in range(len(cols))]

    def line(cells):
        return "| " + " | ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)) + " |"

    rule = "| " + " | ".join(("-" * (w - 1) + ":") if r else (":" + "-" * (w - 1))
                             for w, r in zip(widths, right)) + " |"
    lines = [line(cols), rule] + [line(r) for r in body]
    return "\n".join(lines) + "\n"


RULES = {"l": "---", "r": "---:", "c": ":-:"}  # a compact table's rule cell by column alignment


def to_compact_markdown(table: Table, align: str) -> List[str]:
    """The table as unpadded Markdown lines (``| a | b |``, the cells as given) under a rule of one cell per
    column by ``align``, a letter each: ``l`` left (``---``), ``r`` right (``---:``), ``c`` centred (``:-:``).
    The speed benchmarks' tables are written so (``uwbench.bench.render``)."""
    def line(cells):
        return "| " + " | ".join(str(c) for c in cells) + " |"

    return [line(table.columns), "|" + "|".join(RULES[a] for a in align) + "|"] + [line(r) for r in table.rows]


def to_text(table: Table, layout: str) -> List[str]:
    """The table as plain-text lines, its header then its rows, each the ``layout`` template (``str.format``
    over a row's cells, e.g. ``"{0:<36} {1:>18}  {2}"``) filled in: the terminal's tables (a sweep's
    summary, ``uwbench theory``)."""
    return [layout.format(*row) for row in [table.columns] + table.rows]


def to_csv_rows(table: Table) -> Tuple[List[str], List[List[Any]]]:
    if table.csv_columns:
        return table.csv_columns, table.csv_rows
    return table.columns, table.rows


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
LATEX_SYMBOLS = {"±": r"$\pm$", "Δ": r"$\Delta$", "−": r"$-$", "–": "--", "—": "---", "×": r"$\times$"}


def latex_escape(text: str) -> str:
    out = []
    for ch in str(text):
        out.append(LATEX_SPECIAL.get(ch, LATEX_SYMBOLS.get(ch, ch)))
    return "".join(out)


def to_latex(table: Table) -> str:
    """A booktabs ``tabular`` (needs ``\\usepackage{booktabs}``), group headers with ``\\cmidrule``."""
    n = len(table.columns)
    lines = [f"% {latex_escape(table.title)}", r"\begin{tabular}{l" + "r" * (n - 1) + "}", r"\toprule"]
    if table.groups and any(span > 1 for _, span in table.groups):
        cells, rules, start = [], [], 1
        for name, span in table.groups:
            if span > 1 and name:
                cells.append(rf"\multicolumn{{{span}}}{{c}}{{{latex_escape(name)}}}")
                rules.append(rf"\cmidrule(lr){{{start}-{start + span - 1}}}")
            else:
                cells += [""] * span
            start += span
        lines.append(" & ".join(cells) + r" \\")
        lines.append(" ".join(rules))
        sub = []
        start = 0
        for name, span in table.groups:
            for i in range(span):
                col = table.columns[start + i]
                sub.append("ours" if (span > 1 and name and i == 0) else latex_escape(col))
            start += span
        lines.append(" & ".join(sub) + r" \\")
    else:
        lines.append(" & ".join(latex_escape(c) for c in table.columns) + r" \\")
    lines.append(r"\midrule")
    for row in table.rows:
        lines.append(" & ".join(latex_escape(c) for c in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
