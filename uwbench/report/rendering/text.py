"""The text forms of one value in the report's tables: numbers as CSV cells and as shown, a cell's result
('97.1 ± 0.4 (n=5)', 'not run'), its time; every table and page of ``uwbench.report.rendering`` writes
its values with these (the table type and its Markdown, CSV and LaTeX writers are ``uwbench.tabular``'s)."""
from __future__ import annotations

from uwbench.report.analysis.summary import FAILED, INCOMPLETE, NOT_RUN
from uwbench.tabular import fmt
from uwbench.values import is_number


def ours_text(row, decimals: int) -> str:
    """'97.1 ± 0.4 (n=5)', 'not run', 'failed (0/3)', 'incomplete', with failed seeds named."""
    if row["state"] == NOT_RUN:
        return "not run"
    if row["state"] == INCOMPLETE:
        return "incomplete (no finished final run)"
    if row["state"] == FAILED:
        return f"failed (0/{row['n_failed']})"
    n = int(row["n"])
    text = fmt(row["mean"], decimals)
    if is_number(row["std"]):
        text += f" ± {fmt(row['std'], decimals)}"
    note = f"n={n}" + (f", {int(row['n_failed'])} failed" if row["n_failed"] else "")
    return f"{text} ({note})"


def rounded(v, digits: int = 6):
    return round(float(v), digits) if is_number(v) else ""


def csv_value(v):
    if isinstance(v, float):
        return rounded(v)
    return "" if v is None else v


def int_text(v) -> str:
    return str(int(v)) if is_number(v) else ""


def short_number(v) -> str:
    if isinstance(v, str):
        return v
    return f"{float(v):.3g}" if is_number(v) else ""


def time_text(r) -> str:
    if not is_number(r["sec100_mean"]):
        return ""
    text = f"{r['sec100_mean']:.2f}"
    if is_number(r["sec100_std"]):
        text += f" ± {r['sec100_std']:.2f}"
    return text
