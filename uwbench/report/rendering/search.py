"""A tuned study's Search analysis section: its search figures drawn (``search_figures``), the importance
table (``importance.md``, ``importance.csv``) and the section's Markdown, from the ``SearchAnalysis`` that
``uwbench.report.analysis.search.analyse`` computes."""
from __future__ import annotations

import os
from typing import List, Sequence

from uwbench import atomic
from uwbench.report.analysis.search import IMPORTANCE_SEED, CellSearch, SearchAnalysis
from uwbench.report.rendering import search_figures
from uwbench.snapshot import to_csv_text
from uwbench.tabular import Table, fmt, to_markdown


def importance_table(cells: Sequence[CellSearch]) -> Table:
    """One row per cell with an estimate: the share of each searched parameter."""
    params = sorted({p for c in cells for p in c.importance})
    columns = ["Model", "Cell", "finished trials"] + params
    rows, csv_rows = [], []
    for c in cells:
        if not c.importance:
            continue
        rows.append([c.label, c.cell, str(c.n_finished)] + [fmt(c.importance.get(p), 2) for p in params])
        for rank, (p, v) in enumerate(c.importance.items(), 1):
            csv_rows.append([c.cell, c.label, c.n_finished, p, round(v, 6), rank])
    return Table(title="Hyperparameter importance (fANOVA)", columns=columns, rows=rows,
                        csv_columns=["cell", "model", "finished_trials", "param", "importance", "rank"],
                        csv_rows=csv_rows)


def write(analysis: SearchAnalysis, folder: str) -> List[str]:
    """Draw every cell's search figures into ``folder``, then write ``importance.md`` and ``importance.csv`` (the
    long form: cell, param, importance, rank); returns the paths written."""
    files = []
    for cell in analysis.cells:
        for name, kind, title in cell.drawings:
            path = os.path.join(folder, f"{name}.png")
            with search_figures.style():
                search_figures.save(search_figures.draw(cell.optuna_study, kind, title, analysis.objective.name), path)
            files.append(path)
    t = importance_table(analysis.cells)
    md = os.path.join(folder, "importance.md")
    atomic.write_text(md, f"**{t.title}**\n\n" + (to_markdown(t) if t.rows else "no cell has an estimate yet\n"))
    files.append(md)
    path = os.path.join(folder, "importance.csv")
    atomic.write_text(path, to_csv_text(t.csv_columns, [dict(zip(t.csv_columns, r)) for r in t.csv_rows]))
    files.append(path)
    return files


def markdown(analysis: SearchAnalysis) -> str:
    """The report's Search analysis section."""
    table = importance_table(analysis.cells)
    lines = ["## Search analysis", "",
             f"Per cell: the importance of each searched hyperparameter for the objective "
             f"({analysis.objective.name}, {analysis.objective.direction}d) over the finished search trials "
             f"(fANOVA, seed {IMPORTANCE_SEED}; shares sum to 1; indicative only with few trials), and the "
             "search figures. CSV: [`importance.csv`](importance.csv).", ""]
    if table.rows:
        lines += [to_markdown(table).rstrip("\n"), ""]
    for c in analysis.cells:
        lines += [f"**{c.label}** (`{c.cell}`): {c.n_finished} finished of {c.n_trials} search trials", ""]
        lines += [f"- {n}" for n in c.notes] + ([""] if c.notes else [])
        for name, caption in c.figures:
            lines += [f"![{caption}]({name}.png)", ""]
    return "\n".join(lines)
