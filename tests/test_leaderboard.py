"""`uwbench leaderboard`: the contract check refuses a broken plugin before any run; a toy plugin writer is
swept at the suite's smoke profile into a real MLflow store and gets its row against baselines from a
runs.csv fixture; the board's statistics (Welch, Holm, ranks, time, regimes) on fixtures; the board rebuilds
from its runs.csv and curves.csv with the same bytes."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from uwbench.report import board as board_mod
from uwbench.report import board_render, stats
from uwbench.report.runs import CURVE_COLUMNS, Snapshot, columns, curves_text, runs_text, to_csv_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = os.path.join(ROOT, "studies", "leaderboard.yaml")

# ---- fixtures: a snapshot written the way `uwbench leaderboard` writes one ----

T, D_LOW, D_HIGH = 6, 1, 2  # the two positions of the fixtures: copy at (D+1)/T = 33% and 50%
CELL = {"dnc": ("dnc", "regular"), "dnc_uw": ("dnc", "uniform"), "ntm": ("ntm", "regular"),
        "dnc_mine": ("dnc", "mine"), "mymem": ("mymem", "regular")}


def run_rows(row: str, task: str, d: int, values, cpu=1.0, profile="smoke", steps=400):
    model, writer = CELL[row]
    cell = f"{row}-{task}-D{d}"
    return [{"study": "leaderboard", "cell": cell, "role": "final", "status": "finished", "seed": s,
             "run_id": f"{cell}-s{s}", "task": task, "model": model, "writer": writer, "seq_len": T, "memory_size": d,
             "hidden_size": 8, "compression_ratio": (d + 1) / T, "lr": 1e-3, "clip": 10, "steps": steps,
             "profile": profile, "device": "cpu", "test_accuracy": v / 100, "best_eval_accuracy": v / 100,
             "mean_seconds_per_100": cpu, "mean_cpu_seconds_per_100": cpu} for s, v in enumerate(values)]


def curve_rows(runs, rise_per_1k=0.0, loss=0.1, steps=400, every=25):
    """Every run's evaluation curve ending at its test value (flat, or rising by ``rise_per_1k`` points per
    1,000 updates) and a training loss far below the guessing level (about 2.0 on copy)."""
    out = []
    for r in runs:
        for step in range(every, steps + 1, every):
            value = r["test_accuracy"] - rise_per_1k / 100 * (steps - step) / 1000
            out.append({"run_id": r["run_id"], "metric": "eval_accuracy", "step": step, "value": value})
            out.append({"run_id": r["run_id"], "metric": "train_loss", "step": step, "value": loss})
    return out


def snapshot(*groups) -> Snapshot:
    """``groups``: (runs, curves) pairs."""
    runs = [r for g in groups for r in g[0]]
    curves = [c for g in groups for c in g[1]]
    return Snapshot(runs_text(runs), curves_text(curves))


def flat(row, task, d, values, **kw):
    runs = run_rows(row, task, d, values, **kw)
    return runs, curve_rows(runs)


def rising(row, task, d, values, **kw):
    runs = run_rows(row, task, d, values, **kw)
    return runs, curve_rows(runs, rise_per_1k=25.0)


# ---- the board's statistics on fixtures ----


def test_welch_and_holm_decide_each_comparison_and_the_mean_rank_orders_the_board():
    snap = snapshot(
        flat("dnc", "copy", D_LOW, [50, 51, 49], cpu=2.0), flat("dnc_uw", "copy", D_LOW, [80, 81, 79], cpu=1.0),
        flat("dnc_mine", "copy", D_LOW, [90, 91, 89], cpu=1.5),
        flat("dnc", "copy", D_HIGH, [60, 61, 59], cpu=2.0), flat("dnc_uw", "copy", D_HIGH, [59.5, 58.5, 59.2], cpu=1.0),
        flat("dnc_mine", "copy", D_HIGH, [60, 61, 59], cpu=1.5))
    b = board_mod.build(snap)
    assert [r.name for r in b.rows] == ["dnc_mine", "dnc", "dnc_uw"]  # by mean rank
    mine = b.row("dnc_mine")
    low, high = b.positions
    assert low.label == "Copy 33%" and high.label == "Copy 50%"
    # ranks: 1st at 33%; tied first with the DNC at 50% (60.0 each, UW 59.07)
    assert mine.cells[low].rank == 1.0 and mine.cells[high].rank == 1.5 and mine.mean_rank == 1.25
    assert b.row("dnc_uw").mean_rank == 2.5 and b.row("dnc").mean_rank == 2.25
    vs_uw = mine.tests["uniform"]
    assert vs_uw[low].verdict == "yes" and vs_uw[high].verdict == "inconclusive"
    p_low = stats.welch([90, 91, 89], [80, 81, 79]).p
    p_high = stats.welch([60, 61, 59], [59.5, 58.5, 59.2]).p
    assert vs_uw[low].p == pytest.approx(p_low) and vs_uw[low].p_holm == pytest.approx(min(1.0, 2 * p_low))
    assert vs_uw[high].p_holm == pytest.approx(max(2 * p_low, p_high))
    assert mine.counts("uniform") == {"better": 1, "worse": 0, "n.s.": 1, "not testable at this budget": 0}
    assert mine.counts("regular") == {"better": 1, "worse": 0, "n.s.": 1, "not testable at this budget": 0}
    assert b.row("dnc_uw").counts("uniform") is None  # the reference is not tested against itself
    assert b.row("dnc").counts("uniform") == {"better": 0, "worse": 1, "n.s.": 1, "not testable at this budget": 0}
    assert mine.time_ratio == pytest.approx(0.75) and b.row("dnc").time_ratio == 1.0
    assert b.row("dnc_uw").time_ratio == pytest.approx(0.5)
    assert set(b.pareto()) == {"dnc_mine", "dnc_uw"}  # the DNC is beaten in both value and time by UW


def test_holm_keeps_two_borderline_differences_that_welch_alone_would_call():
    a, b_ = [10.0, 11.0, 12.0], [12.5, 13.5, 14.5]
    p = stats.welch(a, b_).p
    assert stats.ALPHA / 2 < p < stats.ALPHA  # significant alone, not as one of two
    alone = board_mod.build(snapshot(flat("dnc_uw", "copy", D_LOW, a), flat("dnc_mine", "copy", D_LOW, b_)))
    assert alone.row("dnc_mine").tests["uniform"][alone.positions[0]].verdict == "yes"
    two = board_mod.build(snapshot(flat("dnc_uw", "copy", D_LOW, a), flat("dnc_mine", "copy", D_LOW, b_),
                                   flat("dnc_uw", "copy", D_HIGH, a), flat("dnc_mine", "copy", D_HIGH, b_)))
    assert {c.verdict for c in two.row("dnc_mine").tests["uniform"].values()} == {"inconclusive"}


def test_a_cell_not_converged_makes_its_tests_not_testable_and_is_marked():
    snap = snapshot(flat("dnc_uw", "copy", D_LOW, [80, 81, 79]), rising("dnc_mine", "copy", D_LOW, [90, 91, 89]),
                    flat("dnc", "copy", D_LOW, [50, 51, 49]))
    b = board_mod.build(snap)
    mine = b.row("dnc_mine")
    cell = mine.cells[b.positions[0]]
    assert cell.regime.state == "rising" and cell.regime.slope == pytest.approx(25.0)
    comp = mine.tests["uniform"][b.positions[0]]
    assert comp.verdict == "not testable at this budget" and comp.p is None and "still improving" in comp.reason
    text = board_render.markdown(b)
    assert f"90.0 ± 1.0 {board_render.NOT_CONVERGED}" in text and "Cells not converged" in text
    stuck = board_mod.build(snapshot(flat("dnc_uw", "copy", D_LOW, [80, 81, 79]),
                                     (run_rows("dnc_mine", "copy", D_LOW, [12, 13, 11]),
                                      curve_rows(run_rows("dnc_mine", "copy", D_LOW, [12, 13, 11]), loss=2.5))))
    assert stuck.row("dnc_mine").cells[stuck.positions[0]].regime.state == "at the guessing level"


def test_a_new_memory_model_is_compared_with_the_dncs_references():
    b = board_mod.build(snapshot(flat("dnc", "copy", D_LOW, [50, 51, 49], cpu=2.0),
                                 flat("dnc_uw", "copy", D_LOW, [80, 81, 79], cpu=1.0),
                                 flat("ntm", "copy", D_LOW, [40, 41, 39], cpu=1.0),
                                 flat("mymem", "copy", D_LOW, [70, 71, 69], cpu=3.0)))
    assert b.row("mymem").references == {"uniform": "dnc_uw", "regular": "dnc"}
    assert b.row("mymem").time_ratio == pytest.approx(1.5)
    assert b.row("ntm").references == {"uniform": "dnc_uw", "regular": "dnc"}  # its own regular row is itself
    assert b.row("ntm").time_ratio == pytest.approx(0.5) and b.row("dnc").time_ratio == 1.0
    assert b.row("dnc").references == {"uniform": "dnc_uw"}


def test_a_board_refuses_runs_of_two_profiles():
    with pytest.raises(ValueError, match="mixes the runs of profiles cpu, smoke"):
        board_mod.build(snapshot(flat("dnc", "copy", D_LOW, [50, 51, 49], profile="cpu"),
                                 flat("dnc_uw", "copy", D_LOW, [80, 81, 79])))
