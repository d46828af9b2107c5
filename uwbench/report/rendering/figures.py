"""Report figures (matplotlib, Agg, no pyplot state): each function returns a ``Figure`` (or None when the
study has nothing to draw) so tests can check titles, labels and series; ``uwbench.png.save_png`` writes it
with fixed metadata so a rebuild gives byte-identical files.

- ``accuracy_vs_ratio``  paper Fig. 2 (a, c): accuracy against the compression ratio (D+1)/T per model,
                         controller and writer, error bars = std over seeds, the paper's values as ×.
- ``time_reduction``     paper Fig. 2 (b, d): training-time reduction of UW / CUW against regular
                         writing, against the number of memory slots D.
- ``learning_curves``    eval metric against updates, mean line and ±std band over seeds (paper Fig. 3).
- ``memory_heatmaps``    write weights (encoder steps × slots), read weights (decoder steps × slots) and
                         the write gate, one row per writer (appendix figures on copy and max).
- ``theory_bound``       g_lambda((D+1)/T) (appendix, proof of Theorem 3) for a few lambda, over the
                         measured accuracy of the memory models.
- ``pareto_front``       a multi-objective study: accuracy against seconds per 100 updates (or its first
                         cost), one point per cell and configuration, coloured by writer, sized and
                         labelled by (D+1)/T, the Pareto-optimal ones joined by the front.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from uwbench import axes as run_axes
from uwbench import metrics, selection
from uwbench.png import DPI
from uwbench.report.analysis.labels import cap, label_flags, model_label, task_label, writer_rank
from uwbench.report.analysis.summary import OK, metric_info
from uwbench.report.analysis.timing import time_reductions
from uwbench.report.data.traces import SERIES
from uwbench.values import is_number, present

LAMBDAS = (0.8, 0.9, 0.95, 0.99)
STYLE = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 8,
         "axes.grid": True, "grid.alpha": 0.3, "svg.hashsalt": "uwbench", "path.simplify": True}


def new_figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    matplotlib.rcParams.update(STYLE)
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def palette(n: int):
    from matplotlib import colormaps

    cmap = colormaps["tab10"] if n <= 10 else colormaps["tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _series_label(r, with_controller: bool, with_task: bool) -> str:
    label = model_label(r, {"controller"} if with_controller else ())
    if with_task:
        label += f", {task_label(r['task'])}"
    return label


def _varies(values) -> bool:
    return len({str(v) for v in values if present(v)}) > 1


def _memory_rows(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[(summary["state"] == OK) & summary["compression_ratio"].map(is_number)]


# --------------------------------------------------------------------------------------------------
# Accuracy against compression ratio
# --------------------------------------------------------------------------------------------------


def protocols_dots(points, metric: str = "accuracy"):
    """Each cell under every protocol's run set (``verdicts.protocols.points``): a row per cell, a colour per run
    set, a dot per seed and a bar at the mean, the paper's value as a black x; what the protocol changes, cell
    by cell."""
    if points is None:
        return None
    info = metric_info(metric)
    cells = list(points.cells)
    k = len(points.sets)
    fig = new_figure(7.5, 0.55 * len(cells) * max(1, k) / 1.6 + 1.6)
    ax = fig.subplots()
    colors = palette(k)
    step = 0.7 / max(1, k)
    for j, (label, values) in enumerate(points.sets):
        for i, cell in enumerate(cells):
            y = len(cells) - 1 - i + (k - 1) / 2 * step - j * step
            seeds = values.get(cell, ())
            if not seeds:
                continue
            ax.scatter(seeds, [y] * len(seeds), color=colors[j], s=18, alpha=0.6, zorder=2)
            ax.plot([float(np.mean(seeds))] * 2, [y - step * 0.45, y + step * 0.45], color=colors[j], linewidth=2.5,
                    zorder=3)
        ax.scatter([], [], color=colors[j], s=18, label=f"{label} (dots: seeds, bar: mean)")
    for i, cell in enumerate(cells):
        if cell in points.paper:
            ax.scatter([points.paper[cell]], [len(cells) - 1 - i], marker="x", color="black", s=55, zorder=4)
    ax.scatter([], [], marker="x", color="black", s=55, label="paper")
    ax.set_yticks(range(len(cells)), list(reversed(cells)))
    ax.set_xlabel(info["name"] + (f" ({info['unit']})" if info["unit"] else ""))
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.07 if len(cells) > 6 else -0.2), ncol=1, fontsize=8)
    ax.set_title("Each cell under each protocol")
    return fig


def accuracy_vs_ratio(summary: pd.DataFrame, metric: str = "accuracy"):
    """One axes per controller and task (where they vary; the ablation's panels a and c), a series per
    model + writer (and cache size L, hidden size, ... where they tell cells apart: ``label_flags``) with
    error bars (std over seeds), x = (D+1)/T; the paper's values as x."""
    info = metric_info(metric)
    rows = _memory_rows(summary)
    if len(rows) == 0:
        return None
    by_ctrl = _varies(rows["controller"])
    by_task = _varies(rows["task"])
    panels = list(dict.fromkeys((r["controller"] if by_ctrl else None, r["task"] if by_task else None)
                                for _, r in rows.iterrows()))
    ncols = min(len(panels), 3)
    nrows = int(math.ceil(len(panels) / ncols))
    fig = new_figure(6.0 * ncols, 4.2 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    mention = label_flags(summary)["mention"] - {"controller"}  # a series per writer (and cache size L where it varies)
    for ax, (ctrl, task) in zip(axes, panels):
        mask = np.ones(len(rows), dtype=bool)
        if ctrl is not None:
            mask &= (rows["controller"] == ctrl).to_numpy()
        if task is not None:
            mask &= (rows["task"] == task).to_numpy()
        part = rows[mask]
        keys = list(dict.fromkeys(model_label(r, mention) for _, r in part.iterrows()))
        colors = dict(zip(keys, palette(len(keys))))
        ratios = part["compression_ratio"].dropna().unique()
        single = len(ratios) == 1  # one ratio (Table 1's 10%): one column per series instead of a curve
        any_paper = False
        for i, key in enumerate(keys):
            s = part[[model_label(r, mention) == key for _, r in part.iterrows()]]
            s = s.sort_values("compression_ratio", kind="stable")
            x = np.full(len(s), float(i)) if single else s["compression_ratio"].to_numpy(dtype=float)
            y = s["mean"].to_numpy(dtype=float)
            err = s["std"].map(lambda v: v if is_number(v) else 0.0).to_numpy(dtype=float)
            ax.errorbar(x, y, yerr=err, label=key, marker="o", capsize=3, color=colors[key], linewidth=1.5,
                        markersize=5)
            paper = s["paper"].map(is_number).to_numpy()
            if paper.any():  # the paper's values in the series' colour
                any_paper = True
                ax.scatter(x[paper], s["paper"].to_numpy(dtype=float)[paper], marker="x", color=colors[key], s=50,
                           zorder=3)
        if any_paper:  # one legend entry for all the paper markers
            ax.scatter([], [], marker="x", color="black", s=50, label="paper (same colour)")
        if single:
            ax.set_xticks(range(len(keys)), keys, rotation=30, ha="right")
            ax.set_xlim(-0.6, len(keys) - 0.4)
            ax.set_xlabel(f"all at compression ratio (D+1)/T = {ratios[0]:.0%}")
        else:
            ax.set_xlabel("compression ratio (D+1)/T")
        ax.set_ylabel(info["name"] + (f" ({info['unit']})" if info["unit"] else ""))
        parts = ([task_label(task)] if task is not None else []) + (
            [f"{run_axes.display('controller', ctrl)} controller"] if ctrl is not None else [])
        ax.set_title(", ".join(parts) if parts else f"{cap(info['name'])} vs compression ratio")
        ax.legend(loc="best")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if len(panels) > 1:
        fig.suptitle(f"{cap(info['name'])} vs compression ratio (mean ± std over seeds)")
    return fig


# --------------------------------------------------------------------------------------------------
# Time reduction against memory slots
# --------------------------------------------------------------------------------------------------


def time_reduction(summary: pd.DataFrame, device: str = ""):
    red = time_reductions(summary)
    red = red[red["reduction"].map(is_number)]  # a side without a run that had a core to itself: no figure
    if len(red) == 0:
        return None
    fig = new_figure(6.0, 4.2)
    ax = fig.subplots()
    with_ctrl = _varies(red["controller"])
    with_task = _varies(red["task"].astype(str) + red["seq_len"].astype(str))
    mention = (label_flags(summary)["mention"] - {"controller"}) | ({"controller"} if with_ctrl else set())
    keys = []
    for _, r in red.iterrows():
        k = model_label(r, mention) + (
            f", {task_label(r['task'])} {run_axes.label('seq_len', int(r['seq_len']))}" if with_task else "")
        keys.append(k)
    red = red.assign(_key=keys)
    order = list(dict.fromkeys(keys))
    paper = dict(zip(summary["cell"], summary["paper_time_reduction"]))
    any_paper = False
    for key, color in zip(order, palette(len(order))):
        s = red[red["_key"] == key].sort_values("memory_size", kind="stable")
        ax.plot(s["memory_size"].to_numpy(dtype=float), s["reduction"].to_numpy(dtype=float), marker="o",
                label=key, color=color)
        pts = [(d, paper[c]) for d, c in zip(s["memory_size"], s["cell"]) if is_number(paper.get(c))]
        if pts:  # the paper's reductions (Fig. 2 b, d) in the series' colour
            any_paper = True
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker="x", color=color, s=50, zorder=3)
    if any_paper:
        ax.scatter([], [], marker="x", color="black", s=50, label="paper (same colour)")
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel("memory slots D")
    ax.set_ylabel("training time reduction vs regular writing (%)")
    ax.set_title("Time reduction vs memory slots" + (f" ({device})" if device else ""))
    ax.legend(loc="best")
    return fig


# --------------------------------------------------------------------------------------------------
# Learning curves
# --------------------------------------------------------------------------------------------------


def curve_frame(curves: pd.DataFrame, runs: pd.DataFrame, metric_name: str) -> pd.DataFrame:
    """Long frame (cell, seed, step, value) of the ``metric_name`` histories of the runs that count
    (``uwbench.selection.counted_runs``: a faithful grid's chosen point only)."""
    if len(curves) == 0:
        return pd.DataFrame(columns=["cell", "run_id", "step", "value"])
    finals = selection.counted_runs(runs, metrics.get(metric_name).measure)[["run_id", "cell"]]
    c = curves[curves["metric"] == metric_name]
    return c.merge(finals, on="run_id", how="inner")[["cell", "run_id", "step", "value"]]


def learning_curves(curves: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame, metric: str = "accuracy"):
    """One axes per (task, T), one series per cell: mean over seeds, band = ± std."""
    info = metric_info(metric)
    frame = curve_frame(curves, runs, info["curve"])
    if len(frame) == 0:
        return None
    cells = summary[summary["cell"].isin(set(frame["cell"]))]
    panels = list(dict.fromkeys(zip(cells["task"], cells["seq_len"])))
    ncols = min(len(panels), 3)
    nrows = int(math.ceil(len(panels) / ncols))
    fig = new_figure(5.2 * ncols, 3.8 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    mention = label_flags(summary)["mention"]  # the controller, cache size L, ... where they tell cells apart
    for ax, (task, T) in zip(axes, panels):
        part = cells[(cells["task"] == task) & (cells["seq_len"] == T)] if is_number(T) else cells[cells["task"] == task]
        with_mem = _varies(part["memory_size"])
        colors = palette(len(part))
        for color, (_, r) in zip(colors, part.iterrows()):
            g = frame[frame["cell"] == r["cell"]]
            table = g.pivot_table(index="step", columns="run_id", values="value", aggfunc="mean").sort_index()
            steps = table.index.to_numpy(dtype=float)
            values = table.to_numpy(dtype=float) * info["scale"]
            mean = np.nanmean(values, axis=1)
            label = model_label(r, mention) + (
                f", {run_axes.label('memory_size', int(r['memory_size']))}" if with_mem and is_number(r["memory_size"])
                else "")
            ax.plot(steps, mean, label=f"{label} (n={table.shape[1]})", color=color, linewidth=1.5)
            if table.shape[1] > 1:
                std = np.nanstd(values, axis=1, ddof=1)
                ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
        ax.set_xlabel("parameter updates")
        ax.set_ylabel(info["name"].replace("test", "eval") + (f" ({info['unit']})" if info["unit"] else ""))
        ax.set_title(f"{task_label(task)}" + (f", T={int(T)}" if is_number(T) else ""))
        ax.legend(loc="best")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("Learning curves (mean ± std over seeds)")
    return fig


# --------------------------------------------------------------------------------------------------
# Memory-operation heatmaps
# --------------------------------------------------------------------------------------------------


def memory_heatmaps(traces: Mapping[str, Mapping[str, np.ndarray]], labels: Mapping[str, str], title: str):
    """Rows = traced cells (e.g. DNC, DNC+UW, DNC+CUW); columns = write weights over the encoder steps,
    read weights over the decoder steps (rows are timesteps, columns memory slots, as the paper's
    appendix figures), and the write gate over the encoder steps."""
    cells = [c for c in traces if "write_weights" in traces[c] or "read_weights" in traces[c]]
    if not cells:
        return None
    has_gate = any("write_gate" in traces[c] for c in cells)
    ncols = 3 if has_gate else 2
    fig = new_figure(3.2 * ncols + 1.0, 3.6 * len(cells))
    grid = fig.subplots(len(cells), ncols, squeeze=False,
                        gridspec_kw={"width_ratios": [3, 3, 1][:ncols]})
    for row, cell in zip(grid, cells):
        arr = traces[cell]
        te = int(arr["encoder_steps"][0, 0]) if "encoder_steps" in arr else None
        w = arr.get("write_weights")
        r = arr.get("read_weights")
        te = te if te is not None else (w.shape[0] // 2 if w is not None else 0)
        name = labels.get(cell, cell)
        for ax, data, what, steps in ((row[0], w, "write weights", "encoder"),
                                      (row[1], r, "read weights", "decoder")):
            if data is None:
                ax.set_visible(False)
                continue
            part = data[:te] if steps == "encoder" else data[te:]
            im = ax.imshow(part, aspect="auto", cmap="viridis", vmin=0.0, vmax=max(1e-6, float(np.nanmax(part)) if part.size else 1.0),
                           interpolation="nearest")
            ax.set_title(f"{name}: {what}")
            ax.set_xlabel("memory slot")
            ax.set_ylabel(f"{steps} step")
            ax.set_xticks(range(part.shape[1]))
            ax.grid(False)
            fig.colorbar(im, ax=ax, label="weight")
        if has_gate:
            ax = row[2]
            g = arr.get("write_gate")
            if g is None:
                ax.set_visible(False)
                continue
            part = g[:te]
            im = ax.imshow(part, aspect="auto", cmap="magma", vmin=0.0, vmax=1.0, interpolation="nearest")
            mask = arr.get("write_mask")
            if mask is not None:  # mark the steps that were written
                written = np.flatnonzero(mask[:te, 0] > 0.5)
                ax.scatter(np.zeros(len(written)), written, marker=">", s=12, color="cyan", label="write step")
            ax.set_title("write gate")
            ax.set_xticks([])
            ax.set_xlabel("gate")
            ax.set_ylabel("encoder step")
            ax.grid(False)
            fig.colorbar(im, ax=ax, label="gate value")
    fig.suptitle(title)
    return fig


def generated_sequences(traces: Mapping[str, Mapping[str, np.ndarray]], labels: Mapping[str, str], title: str):
    """The appendix's sinusoid figures: per traced cell (rows: DNC, DNC+UW, DNC+CUW, ...) the input and
    the true continuation (red) with the generated one (blue), and the write gate of every step underneath
    (``uwbench.tasks.sinusoid.draw_sinusoid``; written steps green, held steps grey). None when no cell
    has a recorded sequence."""
    cells = [c for c in traces if all(k in traces[c] for k in SERIES)]
    if not cells:
        return None
    from uwbench.tasks.sinusoid import draw_sinusoid

    fig = new_figure(8.0, 3.4 * len(cells))
    grid = fig.subplots(2 * len(cells), 1, squeeze=False,
                        gridspec_kw={"height_ratios": [3, 1] * len(cells)})[:, 0]
    for i, cell in enumerate(cells):
        arr = traces[cell]
        ax, ax_gate = grid[2 * i], grid[2 * i + 1]
        gate = arr.get("write_gate")
        steps = len(arr["series_input"]) + len(arr["series_target"])
        if gate is None or len(gate) != steps:  # no gate for every step: no lower panel
            gate = None
            ax_gate.set_visible(False)
        mask = arr.get("write_mask")
        mask = mask[:, 0] > 0.5 if mask is not None and len(mask) == steps else None
        draw_sinusoid(ax, ax_gate if gate is not None else None, arr["series_input"], arr["series_target"],
                      arr["series_output"], gate, labels.get(cell, cell), written=mask)
        if gate is not None:
            ax.set_xlabel("")
    fig.suptitle(title)
    return fig


def sequence_title(summary_row) -> str:
    return "Generated against true continuation: " + _traced_cell(summary_row)


# --------------------------------------------------------------------------------------------------
# Theory bound over measured accuracy
# --------------------------------------------------------------------------------------------------


def theory_bound(summary: pd.DataFrame, lams: Sequence[float] = LAMBDAS):
    """g_lambda against the compression ratio x = (D+1)/T (it depends on T and D only through x), for a
    few lambda, with C = 1, over the measured accuracy (as a fraction) of the memory-model cells."""
    from uwbench.theory import compression_ratio, g_lambda

    rows = _memory_rows(summary)
    rows = rows[rows["mean"].map(is_number)]
    if len(rows) == 0:
        return None
    fig = new_figure(6.4, 4.4)
    ax = fig.subplots()
    xmax = min(1.0, max(0.25, float(rows["compression_ratio"].max()) * 1.5))
    T = 1000  # a fine grid of ratios; g depends on x only
    D = np.arange(0, int(xmax * T))
    x = np.array([compression_ratio(T, int(d)) for d in D])
    styles = ("--", "-.", ":", (0, (5, 1, 1, 1)), (0, (1, 3)))
    for i, lam in enumerate(lams):  # grey dashes, so the measured series keep the colours
        grey = str(round(0.15 + 0.55 * i / max(len(lams) - 1, 1), 3))
        ax.plot(x, g_lambda(T, D, lam), linestyle=styles[i % len(styles)], linewidth=1.4, color=grey,
                label=f"bound g_λ, λ={lam:g}")
    with_ctrl = _varies(rows["controller"])
    with_task = _varies(rows["task"])
    keys = list(dict.fromkeys(_series_label(r, with_ctrl, with_task) for _, r in rows.iterrows()))
    for key, color in zip(keys, palette(len(keys))):
        s = rows[[_series_label(r, with_ctrl, with_task) == key for _, r in rows.iterrows()]]
        s = s.sort_values("compression_ratio", kind="stable")
        err = s["std"].map(lambda v: v / 100.0 if is_number(v) else 0.0).to_numpy(dtype=float)
        ax.errorbar(s["compression_ratio"].to_numpy(dtype=float), s["mean"].to_numpy(dtype=float) / 100.0,
                    yerr=err, marker="o", linestyle="none", capsize=3, color=color, label=f"measured: {key}")
    ax.set_xlim(0.0, xmax)
    ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("compression ratio (D+1)/T")
    ax.set_ylabel("test accuracy (fraction) / bound g_λ (C = 1)")
    ax.set_title("Theory bound g_λ vs measured accuracy")
    ax.legend(loc="lower right")
    return fig


def trace_title(summary_row) -> str:
    return "Memory operations: " + _traced_cell(summary_row)


def _traced_cell(r) -> str:
    """'DNC, Copy, T=50, D=4 (one test sequence)': what a trace figure's title says of its cell group (the
    model too: a study with the DNC and the NTM has a trace figure of each at the same task, T and D)."""
    model = str(r["model"]) if isinstance(r["model"], str) and r["model"] else ""
    parts = ([run_axes.get("model").display.get(model, model.upper())] if model else []) + [task_label(r["task"])]
    if is_number(r["seq_len"]):
        parts.append(run_axes.label("seq_len", int(r["seq_len"])))
    if is_number(r["memory_size"]):
        parts.append(run_axes.label("memory_size", int(r["memory_size"])))
    return ", ".join(parts) + " (one test sequence)"


# --------------------------------------------------------------------------------------------------
# Pareto front (multi-objective studies)
# --------------------------------------------------------------------------------------------------


def pareto_front(points: pd.DataFrame, y_column: str, x_column: str, metric: str = "accuracy",
                 x_label: str = "seconds per 100 updates"):
    """``points``: ``pareto.pareto_points`` (one row per cell and configuration, with ``pareto``). x = the
    cost's mean, y = the measure's mean in report units; colour = writer, marker area and label = (D+1)/T;
    filled markers and a step line for the Pareto-optimal points, hollow ones for the dominated."""
    info = metric_info(metric)
    rows = points[points[x_column].map(is_number) & points[y_column].map(is_number)]
    if len(rows) == 0:
        return None
    fig = new_figure(7.0, 4.8)
    ax = fig.subplots()
    writers = sorted(set(rows["writer"].fillna("none")), key=writer_rank)
    colors = dict(zip(writers, palette(len(writers))))
    ratios = rows["compression_ratio"].map(lambda v: float(v) if is_number(v) else float("nan"))
    top = float(np.nanmax(ratios.to_numpy())) if ratios.notna().any() else 1.0
    for writer in writers:
        part = rows[rows["writer"].fillna("none") == writer]
        size = [30.0 + 170.0 * (float(v) / top if is_number(v) and top > 0 else 0.5) for v in part["compression_ratio"]]
        x = part[x_column].to_numpy(dtype=float)
        y = part[y_column].to_numpy(dtype=float) * info["scale"]
        on = part["pareto"].to_numpy(dtype=bool)
        name = model_label({"model": part["model"].iloc[0], "writer": writer})
        ax.scatter(x[on], y[on], s=np.asarray(size)[on], color=colors[writer], edgecolor="black", linewidth=0.6,
                   label=name, zorder=3)
        ax.scatter(x[~on], y[~on], s=np.asarray(size)[~on], facecolor="none", edgecolor=colors[writer],
                   linewidth=1.0, zorder=2, label=None if on.any() else name)
        for xi, yi, r in zip(x, y, part["compression_ratio"]):
            if is_number(r):
                ax.annotate(f"{float(r):.2f}", (xi, yi), textcoords="offset points", xytext=(5, 4), fontsize=7)
    front = rows[rows["pareto"]].sort_values(x_column, kind="stable")
    if len(front) > 1:
        ax.step(front[x_column].to_numpy(dtype=float), front[y_column].to_numpy(dtype=float) * info["scale"],
                where="post", color="grey", linewidth=1.0, linestyle="--", zorder=1, label="Pareto front")
    ax.set_xlabel(x_label)
    ax.set_ylabel(info["name"] + (f" ({info['unit']})" if info["unit"] else ""))
    ax.set_title(f"{cap(info['name'])} against {x_label} (labels and sizes: (D+1)/T)")
    ax.legend(loc="best")
    return fig
