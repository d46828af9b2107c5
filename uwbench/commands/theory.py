"""``uwbench theory``: the paper's theory as tools (Theorems 1-3 and the appendix; docs/theory.md).

    uwbench theory bound --seq-len 50 --memory-size 4 --lam 0.9 [--cache-size L]
        Theorem 2's bound I_lambda for each writer's schedule, the optimum g_lambda (Theorem 3) and the
        best integer split.
    uwbench theory plot [--out DIR]
        g_lambda(T, D) against the compression ratio (D+1)/T for several lambda (a PNG).
    uwbench theory contributions [--model linear-rnn] [--task copy] [--checkpoint PATH]
        c_{i,T} = ||dh_T/dx_i|| by autograd, the fitted lambda and the bounds it predicts (a PNG).

numpy, torch and matplotlib are imported inside the functions so ``uwbench --help`` stays instant.
Figures are built on ``matplotlib.figure.Figure`` (Agg canvas, no pyplot state).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
from typing import Optional, Sequence

from uwbench.errors import UserError

HELP = "the paper's theory: memorisation bound per writer, g_lambda plot, measured contributions"

DEFAULT_OUT = os.path.join("runs", "theory")
DEFAULT_PLOT_LAMS = (0.5, 0.8, 0.9, 0.95, 0.99, 1.0)
FALLBACK_MEMORY_SIZE = 4  # the paper's synthetic-task D, for models without memory (linear-rnn, lstm)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="theory_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("bound", help="Theorem 2's bound for each writer's schedule and the optimum")
    p.add_argument("--seq-len", type=int, default=50, help="T, tokens (the encoder reads T+1 steps); default 50")
    p.add_argument("--memory-size", type=int, default=4, help="D, memory slots; default 4")
    p.add_argument("--lam", type=float, default=0.9, help="the decay rate lambda > 0; default 0.9")
    _add_schedule_arguments(p)
    p.set_defaults(_theory=_run_bound)

    p = sub.add_parser("plot", help="g_lambda(T, D) against the compression ratio (D+1)/T")
    p.add_argument("--seq-len", type=int, default=50, help="T; D runs over 0..T-1; default 50")
    p.add_argument("--lams", type=float, nargs="+", default=list(DEFAULT_PLOT_LAMS),
                   help=f"the lambdas to draw; default {' '.join(map(str, DEFAULT_PLOT_LAMS))}")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder; default {DEFAULT_OUT}")
    p.set_defaults(_theory=_run_plot)

    p = sub.add_parser("contributions", help="measure c_{i,T} = ||dh_T/dx_i|| and fit lambda")
    p.add_argument("--model", default="linear-rnn",
                   help="linear-rnn (default), controller, or a registered model (lstm, dnc, ntm, ...)")
    p.add_argument("--controller", default=None, help="controller name (for --model controller or a model's config)")
    p.add_argument("--target", default="output", choices=("output", "state"),
                   help="registered models: the first decoder output (default) or model.encode's state")
    p.add_argument("--task", default="copy", help="task whose inputs are fed; default copy")
    p.add_argument("--seq-len", type=int, default=50, help="T, tokens; default 50")
    p.add_argument("--hidden-size", type=int, default=None, help="H (default: the probe's own)")
    p.add_argument("--memory-size", type=int, default=None,
                   help="D for a registered model's config and for the predicted bounds (default: the model's, else 4)")
    p.add_argument("--writer", default=None, help="writer for a registered memory model (regular, uniform, ...)")
    p.add_argument("--cache-size", type=int, default=None,
                   help="L for the cached_uniform writer and its bound (default: the model's, else the writer's default)")
    p.add_argument("--radius", type=float, default=0.9, help="linear-rnn: spectral radius of U; default 0.9")
    p.add_argument("--checkpoint", default=None, help="a torch.save'd state dict of the model to analyse")
    p.add_argument("--batch-size", type=int, default=8, help="sequences averaged over; default 8")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and of the inputs; default 0")
    p.add_argument("--norm", default="fro", choices=("fro", "spectral"), help="Jacobian norm; default fro")
    p.add_argument("--min-distance", type=int, default=0, help="fit only T-i >= this; default 0")
    p.add_argument("--max-distance", type=int, default=None, help="fit only T-i <= this; default all")
    p.add_argument("--rule", default="code", choices=("code", "paper"), help="UW schedule rule; default code")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder; default {DEFAULT_OUT}")
    p.set_defaults(_theory=_run_contributions)


def _add_schedule_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache-size", type=int, default=None,
                   help="L of the cached_uniform writer's row (default: the cached_uniform writer's, 5)")
    p.add_argument("--rule", default="code", choices=("code", "paper"),
                   help="UW schedule: the authors' code (default) or the paper's Eq. 7")
    p.add_argument("--write-prob", type=float, default=None, help="random writer's p; default (D+1)/T")
    p.add_argument("--C", dest="C", type=float, default=1.0, help="the constant C of Theorem 2; default 1")


def run(args: argparse.Namespace) -> int:
    return int(args._theory(args) or 0)


# --------------------------------------------------------------------------------------------------
# bound
# --------------------------------------------------------------------------------------------------


LONG_BOUND_STEPS = 4000  # from this many steps of work (T of about 2,000) the bound shows its progress


def _run_bound(args) -> int:
    from uwbench.writer_bounds import check_compresses, schedule_table

    check_compresses(args.seq_len, args.memory_size)
    with _progress(args.seq_len) as progress:
        table = schedule_table(args.seq_len, args.memory_size, args.lam, _cache_size(args),
                               rule=args.rule, C=args.C, write_prob=args.write_prob, progress=progress)
    print(format_schedule_table(table))
    return 0


@contextlib.contextmanager
def _progress(seq_len: int):
    """A progress bar on stderr for a bound whose computation takes seconds (its time grows as T^2); None
    (no bar) for a short one."""
    from uwbench.writer_bounds import work

    total = work(seq_len)
    if total < LONG_BOUND_STEPS:
        yield None
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=f"random writer's expected bound, T={seq_len}", unit="step", leave=False) as bar:
        yield bar.update


def format_positions(positions: Optional[Sequence[int]]) -> str:
    """Write steps in short form: "0..50" for every step, "10,20,...,50" for a progression."""
    if positions is None:
        return "random mask"
    positions = list(positions)
    if not positions:
        return "none"
    if len(positions) <= 4:
        return ",".join(map(str, positions))
    gaps = {b - a for a, b in zip(positions, positions[1:])}
    if gaps == {1}:
        return f"{positions[0]}..{positions[-1]}"
    if len(gaps) == 1:
        return f"{positions[0]},{positions[1]},...,{positions[-1]}"
    return ",".join(map(str, positions[:3])) + f",...,{positions[-1]}"


SCHEDULE_LAYOUT = "{0:<15}{1:>7}  {2:<24}{3:>16}{4:>14}{5:>11}  {6}"  # a line of the writers' table (``to_text``)


def format_schedule_table(table) -> str:
    """The ``ScheduleTable`` as text: one row per writer, then the real and integer optima."""
    from uwbench.tabular import Table, to_text

    sense = "maximum" if table.lam <= 1 else "minimum"
    lines = [
        f"Theorem 2 bound I_lambda: T={table.seq_len} tokens -> {table.n_steps} encoder steps "
        f"(end marker included), D={table.memory_size} slots, lambda={table.lam:g}, C={table.C:g}",
    ]
    shown = Table("schedule", ["writer", "writes", "write steps (0-indexed)", "I (last D kept)", "I (all kept)",
                               "/ optimum", "note"], [])
    for r in table.rows:
        writes = f"{r.writes:.0f}" if r.positions is not None else f"~{r.writes:.1f}"
        shown.rows.append([r.writer, writes, format_positions(r.positions), f"{r.bound:.4f}",
                           f"{r.bound_all_writes:.4f}", f"{r.of_optimum:.3f}", r.note])
    lines += to_text(shown, SCHEDULE_LAYOUT)
    d = table.memory_size
    lines.append(
        f"optimum over the {table.n_steps} encoder steps the model runs (T+1): g_lambda({table.n_steps}, {d}) = "
        f"{table.optimum:.4f} ({sense}; Theorem 3: D+1 real intervals of {table.n_steps / (d + 1):g}; "
        "'/ optimum' divides by this)"
    )
    lines.append(
        f"paper's optimum over the T={table.seq_len} input tokens: g_lambda({table.seq_len}, {d}) = "
        f"{table.paper_optimum:.4f} ({sense}; Theorem 3 with T the input length, end marker not counted: "
        f"intervals of {table.seq_len / (d + 1):g})"
    )
    if table.best_integer is not None:
        b = table.best_integer
        lines.append(
            f"best integer split of the {table.n_steps} steps ({sense}): intervals {','.join(map(str, b.intervals))} "
            f"-> I = {b.value:.4f}"
        )
    lines.append(
        "I (last D kept): the D most recent writes stay in memory (FIFO overwrite); "
        "I (all kept): every write keeps its own slot."
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# plot
# --------------------------------------------------------------------------------------------------


def figure_g_lambda(seq_len: int, lams: Sequence[float]):
    """g_lambda(T, D) for D = 0..T-1 against the compression ratio (D+1)/T, one line per lambda
    (appendix, proof of Theorem 3). Returns a matplotlib Figure."""
    import numpy as np
    from matplotlib.figure import Figure

    from uwbench.theory import g_lambda

    if seq_len < 1:
        raise UserError(f"`seq_len >= 1` must hold, got {seq_len}")
    if not lams:
        raise UserError("`at least one lambda` must hold, got none")
    d = np.arange(seq_len)  # D = 0 .. T-1
    ratio = (d + 1) / seq_len  # (T,) compression ratio
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    for lam in lams:
        ax.plot(ratio, g_lambda(seq_len, d, lam), marker=".", markersize=3, label=rf"$\lambda$ = {lam:g}")
    ax.set_title(rf"Optimal bound $g_\lambda(T, D)$ of uniform writing (Theorem 3), T = {seq_len}")
    ax.set_xlabel("compression ratio (D+1)/T")
    ax.set_ylabel(r"$g_\lambda(T, D) = \max\, I_\lambda$  (C = 1)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig


def _run_plot(args) -> int:
    fig = figure_g_lambda(args.seq_len, args.lams)
    path = _save(fig, args.out, f"g_lambda_T{args.seq_len}.png")
    print(path)
    return 0


# --------------------------------------------------------------------------------------------------
# contributions
# --------------------------------------------------------------------------------------------------


def figure_contributions(c, fit, title: str):
    """c_{i,T} against T - i on a log scale with the fitted c_{T,T} lambda^{T-i}. Returns a Figure."""
    import numpy as np
    from matplotlib.figure import Figure

    c = np.asarray(c, dtype=float)
    distance = np.arange(c.size)[::-1]  # T - i for i = 1..T
    order = np.argsort(distance)
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    shown = c[order] > 0  # a log axis cannot show zeros
    ax.plot(distance[order][shown], c[order][shown], marker="o", markersize=3, linestyle="-",
            label=r"measured $c_{i,T}$")
    k = np.arange(fit.min_distance, fit.max_distance + 1)
    label = rf"fit ${fit.scale:.3g} \cdot {fit.lam:.4f}^{{T-i}}$, $R^2$ = {fit.r2:.3f}"
    ax.plot(k, fit.predict(k), linestyle="--", label=label)
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel("distance T - i (steps before the last input)")
    ax.set_ylabel(r"contribution $c_{i,T} = \Vert \partial h_T / \partial x_i \Vert$")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig


def _run_contributions(args) -> int:
    import torch

    from uwbench import analysis
    from uwbench.tasks import build_task
    from uwbench.writer_bounds import check_compresses, schedule_table

    task = build_task(args.task, {"seq_len": args.seq_len})
    if args.batch_size < 1:
        raise UserError(f"`batch_size >= 1` must hold, got {args.batch_size}")
    batch = task.sample(args.batch_size, torch.Generator().manual_seed(args.seed))
    values = {k: v for k, v in (("memory_size", args.memory_size), ("writer", args.writer)) if v is not None}
    if args.cache_size is not None and _takes(args.model, values, "cache_size"):  # else L is the bound's only
        values["cache_size"] = args.cache_size
    opts = analysis.ProbeOptions(hidden_size=args.hidden_size, seed=args.seed, radius=args.radius,
                                 controller=args.controller, target=args.target,
                                 values=values if args.model not in analysis.PROBES else {})
    probe = analysis.build_probe(args.model, task.input_size, task.output_size, opts, task=task)
    if args.checkpoint:
        analysis.load_checkpoint(probe, args.checkpoint)
    probe.eval()

    c = analysis.contributions(probe, batch.inputs, norm=args.norm)  # (T+1,)
    fit = analysis.fit_lambda(c, min_distance=args.min_distance, max_distance=args.max_distance)
    name = args.model if args.model != "controller" else f"controller-{args.controller or 'ln_lstm'}"
    state = "checkpoint " + os.path.basename(args.checkpoint) if args.checkpoint else "untrained"
    target = "" if args.model in analysis.PROBES else f", target {args.target}"
    print(f"model {name} ({state}), task {args.task}, T={args.seq_len} ({c.size} encoder steps), "
          f"batch {args.batch_size}, norm {args.norm}{target}")
    print(f"c_TT = {c[-1]:.4g}, c_1T = {c[0]:.4g}")
    print(f"fitted lambda = {fit.lam:.4f} (log-linear fit over T-i = {fit.min_distance}..{fit.max_distance}, "
          f"R^2 = {fit.r2:.3f})")
    try:
        print(f"Theorem 1 lambda (sum c = c_TT f_lambda(T)) = {analysis.equivalent_lambda(c):.4f}")
    except ValueError as exc:
        print(f"Theorem 1 lambda: undefined ({exc})")

    print()
    memory_size = _memory_size(args, probe)
    try:
        check_compresses(args.seq_len, memory_size)
    except ValueError as exc:  # the measurement stands; the bound has nothing to say
        print(f"no bound table: {exc}")
    else:
        with _progress(args.seq_len) as progress:
            table = schedule_table(args.seq_len, memory_size, fit.lam, _cache_size(args, probe), rule=args.rule,
                                   progress=progress)
        print(format_schedule_table(table))

    title = f"Contributions to h_T: {name} ({state}), {args.task}, T = {args.seq_len}"
    fig = figure_contributions(c, fit, title)
    path = _save(fig, args.out, f"contributions_{_slug(name)}_{_slug(args.task)}_T{args.seq_len}.png")
    print(path)
    return 0


def _memory_size(args, probe) -> int:
    """D for the predicted bounds: --memory-size, else the analysed model's, else the paper's 4."""
    if args.memory_size is not None:
        return args.memory_size
    cfg = getattr(getattr(probe, "model", None), "cfg", None)
    return getattr(cfg, "memory_size", None) or FALLBACK_MEMORY_SIZE


def _takes(model: str, values, key: str) -> bool:
    """Whether the registered model ``model`` with settings ``values`` (e.g. its writer) has the setting ``key``."""
    from uwbench.config import section_keys
    from uwbench.registry import MODELS

    return model in MODELS and key in section_keys(MODELS.entry(model).config, values)


def _cache_size(args, probe=None) -> int:
    """L for the cached_uniform row: --cache-size, else the analysed model's, else the cached_uniform
    writer's default (its one home, ``CachedUniformConfig``), so every writer gets a row."""
    if args.cache_size is not None:
        return args.cache_size
    cfg = getattr(getattr(probe, "model", None), "cfg", None)
    options = getattr(cfg, "writer_config", None)
    if getattr(options, "cache_size", None):
        return options.cache_size
    from uwbench.writing.cached_uniform import CachedUniformConfig

    return CachedUniformConfig.cache_size


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)


def _save(fig, out: str, filename: str) -> str:
    os.makedirs(out, exist_ok=True)
    from uwbench.png import save_png

    return save_png(fig, os.path.join(out, filename), dpi=120)
