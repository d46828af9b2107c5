"""How a cell is named: its model label (DNC+UW, with the axes that tell cells apart), its task and column
labels, and which axes a set of cells needs named (``label_flags``). The summaries, verdicts and every table
and figure name cells with these."""
from __future__ import annotations

from typing import Dict, Iterable, List, Sequence

import pandas as pd

from uwbench import axes
from uwbench.values import is_number, present


def model_label(row, mention: Iterable[str] = ()) -> str:
    """Paper-style name: DNC, DNC+UW, DNC+CUW, DNC+RW, NTM+UW, LSTM, and in parentheses the axes in
    ``mention`` that must tell cells apart (memory slots, hidden size, cache size, controller, ...: their
    ``uwbench.axes.label``), where they apply to the row."""
    model = str(row["model"])
    writer = row["writer"]
    label = axes.get("model").display.get(model, model.upper()) + axes.get("writer").suffix.get(writer, f"+{writer}")
    mention = set(mention)
    extras = [axes.label(name, row[name]) for name in axes.label_axes()
              if name in mention and present(row.get(name)) and axes.applies(name, row)]
    return label + (f" ({', '.join(extras)})" if extras else "")


def cap(text: str) -> str:
    """First letter upper case, the rest as is ('test MSE' -> 'Test MSE')."""
    return text[:1].upper() + text[1:]


def task_label(task: str) -> str:
    return str(task).replace("_", " ").capitalize() if task else ""


def column_label(row, names: Sequence[str]) -> str:
    parts = []
    for a in names:
        if a == "task":
            parts.append(task_label(row["task"]))
        elif a in ("seq_len", "memory_size") and is_number(row[a]):
            parts.append(axes.label(a, int(row[a])))
    return " ".join(parts)


IDENTITY = ["model", "writer", "task", "seq_len", "memory_size"]  # what a table row or column already names


def label_flags(summary: pd.DataFrame) -> Dict[str, frozenset]:
    """``{"mention": axes}``: the axes labels must name. The controller, where a model and writer ran
    with several (as the ablation's LSTM and RNN panels); every other label axis (cache size, hidden
    size, ...) where it tells apart cells that agree on the identity axes and the label axes before it."""
    mention = set()
    if needs(summary, "controller", ["model", "writer"]):
        mention.add("controller")
    mention |= needs_in_order(summary, IDENTITY + ["controller"])
    return {"mention": frozenset(mention)}


def needs_in_order(frame: pd.DataFrame, keys: List[str]) -> set:
    """The label axes (other than D and the controller) that distinguish rows agreeing on ``keys`` and
    on the label axes checked before them (registry order)."""
    out, keys = set(), list(keys)
    for name in axes.names():
        if name not in axes.label_axes() or name in ("memory_size", "controller") or name not in frame:
            continue
        if needs(frame, name, keys):
            out.add(name)
        keys.append(name)
    return out


def varies(frame: pd.DataFrame, col: str) -> bool:
    vals = {v for v in frame[col] if present(v)}
    return len(vals) > 1


def needs(frame: pd.DataFrame, axis: str, keys: Sequence[str]) -> bool:
    """Does ``axis`` distinguish cells that agree on ``keys``?"""
    if len(frame) == 0:
        return False
    for _, g in frame.groupby([frame[k].astype(str) for k in keys], sort=False, dropna=False):  # None is a value
        if varies(g, axis):
            return True
    return False


def writer_rank(w) -> int:
    order = list(axes.get("writer").suffix)
    return order.index(w) if w in order else len(order)


def sort_value(v):
    return (0, float(v)) if is_number(v) else (1, 0.0)
