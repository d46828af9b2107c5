"""The leaderboard's files: ``board.md`` (the page), ``board.csv`` (one line per row), ``cells.csv`` (one
line per row and position, with every test), ``board.html`` (``board.md`` rendered by ``uwbench.report.rendering.page``,
the figure embedded) and ``pareto.png`` (mean value against mean CPU seconds per 100 updates; absent when no
column is counted). The header says how many baseline cells
converged, of how many, which did not, and which columns are therefore not counted (``board``'s module
docstring: the rule). Text comes from the report's ``formats`` and the figure from its ``figures``' style, so a
rebuild of the same snapshot gives the same bytes."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from uwbench import atomic
from uwbench.png import save_png
from uwbench.report.analysis import cores
from uwbench.report.rendering import figures, page
from uwbench.report.rendering.text import rounded
from uwbench.report.verdicts import judge as verdicts, regime, stats
from uwbench.tabular import Table, fmt, to_markdown
from uwbench.leaderboard.board import (MIN_CONVERGED, OUTCOME_OF, OUTCOMES, REFERENCE_LABEL, REFERENCES, TIME_REFERENCE,
                                  Board, Cell, Position, Row)
from uwbench.snapshot import to_csv_text

# after a cell's value: its curve has not converged, so its tests are not testable; after a column's name:
# a baseline cell there has not converged, so the column is left out of every row's rank and tallies
NOT_CONVERGED = "†"
MISSING = "—"
FILES = ("board.md", "board.csv", "cells.csv", "board.html", "pareto.png")

RULE = ("Each row is tested against uniform writing (UW) and regular writing on its own model (the DNC's where "
        "its model has no other such row), at every counted column (below) both have: **not testable** when "
        "either cell's learning curve has not converged (it still gains, or loses, more than 1 point per 1,000 "
        "updates over its last quarter; its training loss has not left the guessing level; or its last quarter "
        f"holds fewer than {regime.MIN_POINTS} evaluations), otherwise Welch's t-test on the per-seed values, "
        f"Holm-corrected across the row's comparisons with that reference at α = {stats.ALPHA:g}: **better** or "
        "**worse** when significant, **n.s.** when not (or with fewer than two seeds a side). Time: CPU seconds "
        "per 100 updates against regular writing, the geometric mean of the per-cell ratios over every column, "
        "each cell's CPU time over its runs that had a core to themselves (CPU time at least "
        f"{cores.CORE_SHARE_FLOOR:.0%} of wall time; runs made on different machines compare the machines too). Rank: per counted column, 1 = best mean; "
        "the board is ordered by the mean rank over a row's counted columns. **Counted columns** are those where "
        f"every baseline cell converged. A column with a baseline cell not converged (marked {NOT_CONVERGED}) "
        "is left out for every row alike: no cell there is ranked or tested, and the mean rank, the mean value "
        "and the tallies are over the counted columns only. A row's own cell not converged in a counted column "
        f"is marked {NOT_CONVERGED} and not testable but keeps its rank (leaving it out would reward not "
        f"learning). A board is committed when at least {MIN_CONVERGED:.0%} of its baseline cells converged.")


def _decimals(board: Board) -> int:
    return board.metric.decimals


def cell_text(cell: Optional[Cell], board: Board) -> str:
    if cell is None or cell.mean is None:
        return MISSING
    dec = _decimals(board)
    text = fmt(cell.mean, dec) + (f" ± {fmt(cell.std, dec)}" if cell.std is not None else "")
    if board.seeds is not None and cell.n != board.seeds:
        text += f" (n={cell.n})"
    return text + ("" if cell.regime.converged else f" {NOT_CONVERGED}")


def counts_text(row: Row, reference: str) -> str:
    counts = row.counts(reference)
    return MISSING if counts is None else " / ".join(str(counts[o]) for o in OUTCOMES)


def ratio_text(v: Optional[float]) -> str:
    """A time ratio as the board writes it (1.23×), or the missing mark."""
    return MISSING if v is None else f"{v:.2f}×"


def column_label(p: Position, board: Board) -> str:
    """A column's name, with the dagger when a baseline cell there has not converged (the column is not counted)."""
    return p.label + (f" {NOT_CONVERGED}" if p in board.excluded else "")


def board_table(board: Board) -> Table:
    """The board: one line per row, ordered by mean rank."""
    vs = [f"vs {REFERENCE_LABEL[w]} (better / worse / n.s. / not testable)" for w in REFERENCES]
    columns = ["#", "Writer"] + [column_label(p, board) for p in board.positions] + vs + [
        f"CPU time vs {REFERENCE_LABEL[TIME_REFERENCE]}", "Mean rank"]
    rows, csv_rows = [], []
    for i, r in enumerate(board.rows, start=1):
        rows.append([str(i), r.label] + [cell_text(r.cells.get(p), board) for p in board.positions]
                    + [counts_text(r, w) for w in REFERENCES]
                    + [ratio_text(r.time_ratio), fmt(r.mean_rank, 2) or MISSING])
        line: List[Any] = [i, r.name, r.label, r.model, r.writer]
        for p in board.positions:
            c = r.cells.get(p)
            line += [rounded(c.mean), rounded(c.std), c.n, c.regime.state] if c else ["", "", "", ""]
        for w in REFERENCES:
            counts = r.counts(w)
            line += [r.references.get(w, "")] + ([counts[o] for o in OUTCOMES] if counts else [""] * len(OUTCOMES))
        line += [rounded(r.mean_value()), rounded(r.mean_cpu100()), rounded(r.time_ratio), rounded(r.mean_rank),
                 sum(c.rank is not None for c in r.cells.values())]
        csv_rows.append(line)
    csv_columns = ["rank", "row", "label", "model", "writer"]
    for p in board.positions:
        key = f"{p.task}_T{p.seq_len}_D{p.memory_size}"
        csv_columns += [f"{key}_mean", f"{key}_std", f"{key}_n", f"{key}_regime"]
    for w in REFERENCES:
        csv_columns += [f"vs_{w}_row"] + [f"vs_{w}_{o.replace('.', '').replace(' ', '_')}" for o in OUTCOMES]
    csv_columns += ["mean_value", "cpu_seconds_per_100", "cpu_time_vs_regular", "mean_rank", "ranked_columns"]
    return Table(title="Leaderboard", columns=columns, rows=rows, csv_columns=csv_columns,
                         csv_rows=csv_rows)


def cells_table(board: Board) -> Table:
    """One line per row and position: the value, its regime and rank, and both tests (CSV only)."""
    columns = ["row", "label", "cell", "task", "seq_len", "memory_size", "compression_ratio", "mean", "std", "n",
               "regime", "regime_detail", "cpu_seconds_per_100", "rank"]
    for w in REFERENCES:
        columns += [f"vs_{w}", f"vs_{w}_p", f"vs_{w}_p_holm", f"vs_{w}_reason"]
    out = []
    excluded = set(board.excluded)
    for r in board.rows:
        for p in board.positions:
            c = r.cells.get(p)
            if c is None:
                continue
            line: List[Any] = [r.name, r.label, c.cell, p.task, p.seq_len, p.memory_size, rounded(p.ratio), rounded(c.mean),
                               rounded(c.std), c.n, c.regime.state, c.regime.detail, rounded(c.cpu100), rounded(c.rank)]
            for w in REFERENCES:
                comp = r.tests.get(w, {}).get(p)
                if comp is None and p in excluded and w in r.references:
                    line += [verdicts.NOT_TESTABLE, "", "", excluded_reason(board, p)]
                elif comp is None:
                    line += ["", "", "", ""]
                else:
                    line += [OUTCOME_OF[comp.verdict], rounded(comp.p), rounded(comp.p_holm), comp.reason]
            out.append(line)
    return Table(title="Cells", columns=columns, rows=[], csv_columns=columns, csv_rows=out)


def excluded_reason(board: Board, p: Position) -> str:
    """Why the column ``p`` is not counted: its baseline cells that have not converged."""
    stuck = "; ".join(f"{b.label}: {b.state}" for b in board.unconverged if b.position == p)
    return f"column not counted: a baseline cell has not converged ({stuck})"


def baselines_text(board: Board) -> str:
    """The header's account of the baselines: how many cells converged, of how many, which did not, the
    columns left out, and the converged cells with runs that collapsed late ('' without baselines)."""
    n, stuck = len(board.baseline_cells), board.unconverged
    if not n:
        return ""
    text = (f"**Baselines: {n - len(stuck)} of {n} cells converged** ({board.converged_share():.0%}; a board is "
            f"committed with at least {MIN_CONVERGED:.0%}).")
    if stuck:
        counted, total = len(board.counted), len(board.positions)
        columns = ", ".join(p.label for p in board.excluded)
        text += (f" Not converged ({NOT_CONVERGED}, not testable): "
                 + "; ".join(f"{b.text()} ({b.state})" for b in stuck) + ". "
                 + f"The columns with one ({columns}) are marked {NOT_CONVERGED} and left out for every row alike: "
                 + (f"the mean rank, the mean value and the tallies are over the other {counted} of {total} "
                    "columns, where every baseline cell converged." if counted else
                    "no column is counted, so no row has a mean rank or a tested comparison."))
    else:
        text += " Every column is counted."
    collapsed = [b for b in board.baseline_cells if b.converged and b.collapsed]
    if collapsed:
        text += (" Converged with runs that collapsed late (read up to their best evaluation, the checkpoint their "
                 "test value measures): " + "; ".join(f"{b.text()} ({b.collapsed} of {b.cell.n} runs)"
                                                     for b in collapsed) + ".")
    return text


def code_note(board: Board) -> str:
    """'' when every row's runs were made at one commit (or none is recorded); else which rows ran at which,
    and that a CPU-time ratio between them also measures the change in the code."""
    versions = sorted({v for r in board.rows for v in r.code})
    if len(versions) < 2:
        return ""
    return (f"The runs were made at {len(versions)} versions of the code: "
            + "; ".join(f"`{v}` ({', '.join(r.label for r in board.rows if v in r.code)})" for v in versions)
            + ". Accuracy compares across them as long as the models are the same; a CPU-time ratio between rows "
            "of different versions also measures the change in the code.")


def stuck_cells(board: Board) -> List[str]:
    """'row at column: state, detail' for every cell that has not converged."""
    return [f"{r.label} at {p.label}: {c.regime.state}" + (f" ({c.regime.detail})" if c.regime.detail else "")
            for r in board.rows for p in board.positions
            for c in [r.cells.get(p)] if c is not None and not c.regime.converged]


def updates_text(board: Board) -> str:
    """'12,000 updates', or with the columns whose runs made another number (a profile's ``cell_set``):
    '12,000 updates (24,000 at Copy 10% and Double 10%)'; empty when no run recorded its updates."""
    if not board.steps:
        return ""
    other: Dict[int, List[str]] = {}
    for p in sorted(board.updates, key=Position.sort_key):
        if board.updates[p] != board.steps:
            other.setdefault(board.updates[p], []).append(p.label)
    parts = [f"{n:,} at {' and '.join(labels)}" for n, labels in sorted(other.items())]
    return f"{board.steps:,} updates" + (f" ({'; '.join(parts)})" if parts else "")


def seeds_text(board: Board) -> str:
    """'3 seeds per cell' (the most any cell has; a board previewed mid-sweep may have 1)."""
    return f"{board.seeds} seed{'' if board.seeds == 1 else 's'} per cell" if board.seeds else ""


def markdown(board: Board, title: str = "Leaderboard") -> str:
    unit = f" ({board.metric.unit})" if board.metric.unit else ""
    facts = [f"profile {board.profile}" if board.profile else "", updates_text(board),
             seeds_text(board)]
    lines = [f"# {title}", "",
             f"Test {board.metric.title}{unit}, mean ± std over the seeds, per task and compression ratio (D+1)/T; "
             f"{', '.join(f for f in facts if f)}. {NOT_CONVERGED} after a value: that cell's learning curve has "
             f"not converged (its tests are not testable); {NOT_CONVERGED} after a column's name: a baseline cell "
             "there has not converged, so the column is not counted for any row. Pareto-optimal rows (no other row "
             "has both a higher mean and less CPU time): "
             f"{', '.join(board.row(n).label for n in board.pareto()) or MISSING}.", ""]
    if board.baseline_cells:
        lines += [baselines_text(board), ""]
    note = code_note(board)
    if note:
        lines += [note, ""]
    lines += [to_markdown(board_table(board)).rstrip("\n"), "",
              f"**How to read it.** {RULE}", "",
              "Files: [`board.csv`](board.csv) (this table), [`cells.csv`](cells.csv) (every cell with its "
              "regime, p-values and Holm-adjusted p-values), [`runs.csv`](runs.csv) and [`curves.csv`](curves.csv) "
              "(the runs it is built from: `uwbench leaderboard --rebuild` remakes every file from them).", ""]
    if _has_pareto(board):
        lines += ["![Mean value against CPU time](pareto.png)", ""]
    stuck = stuck_cells(board)
    if stuck:
        lines += ["**Cells not converged** (not testable at this budget):", ""] + [f"- {s}" for s in stuck] + [""]
    return "\n".join(lines)


def _points(board: Board):
    """(row, mean CPU seconds per 100 updates, mean value) of every row that has both."""
    points = [(r, r.mean_cpu100(), r.mean_value()) for r in board.rows]
    return [(r, x, y) for r, x, y in points if x is not None and y is not None]


def _has_pareto(board: Board) -> bool:
    return bool(_points(board))


def pareto_figure(board: Board):
    """Mean value over a row's counted columns against its mean CPU seconds per 100 updates; the
    Pareto-optimal rows filled and joined, the others hollow."""
    points = _points(board)
    if not points:
        return None
    front = set(board.pareto())
    fig = figures.new_figure(7.0, 4.8)
    ax = fig.subplots()
    for (r, x, y), color in zip(points, figures.palette(len(points))):
        on = r.name in front
        ax.scatter([x], [y], s=60, color=color if on else "none", edgecolor=color if not on else "black",
                   linewidth=1.0, zorder=3, label=r.label)
        ax.annotate(r.label, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
    line = sorted((x, y) for r, x, y in points if r.name in front)
    if len(line) > 1:
        ax.step([p[0] for p in line], [p[1] for p in line], where="post", color="grey", linewidth=1.0,
                linestyle="--", zorder=1, label="Pareto front")
    ax.set_xlabel("CPU seconds per 100 updates (mean over the columns)")
    unit = f" ({board.metric.unit})" if board.metric.unit else ""
    ax.set_ylabel(f"test {board.metric.title}{unit} (mean over the counted columns)")
    ax.set_title(f"Leaderboard: test {board.metric.title} against CPU time")
    ax.legend(loc="best")
    return fig


def write(board: Board, folder: str, title: str = "Leaderboard") -> List[str]:
    """Every board file into ``folder`` (the snapshot's own files are the caller's)."""
    os.makedirs(folder, exist_ok=True)
    written = []
    fig = pareto_figure(board)  # first: the HTML page embeds it
    path = os.path.join(folder, "pareto.png")
    if fig is not None:
        written.append(save_png(fig, path))
    elif os.path.exists(path):
        os.remove(path)
    text = markdown(board, title)
    texts = {"board.md": text, "board.html": page.to_html(text, title=title, folder=folder)}
    for name, table in (("board.csv", board_table(board)), ("cells.csv", cells_table(board))):
        texts[name] = to_csv_text(table.csv_columns, [dict(zip(table.csv_columns, r)) for r in table.csv_rows])
    for name, text in texts.items():
        written.append(atomic.write_text(os.path.join(folder, name), text))
    return written
