"""`uwbench leaderboard`: the contract check refuses a broken plugin before any run; a toy plugin writer is
swept at the suite's smoke profile into a real MLflow store and gets its row against baselines from a
runs.csv fixture; the board's statistics (Welch, Holm, ranks, time, regimes) on fixtures; the rule for
baselines that have not converged (their columns marked † and not counted for any row; a board committed
with at least 80% of its baseline cells converged); `--show`; every committed board, and a fixture board,
rebuilds from its runs.csv and curves.csv with no difference."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from uwbench.leaderboard import board as board_mod
from uwbench.leaderboard import render as board_render
from uwbench.report.verdicts.judge import stats
from uwbench.snapshot import Snapshot, curves_text, runs_text

from tests.helpers import ROOT

SUITE = os.path.join(ROOT, "studies", "leaderboard.yaml")

# ---- fixtures: a snapshot written the way `uwbench leaderboard` writes one ----

T, D_LOW, D_HIGH = 6, 1, 2  # the two positions of the fixtures: copy at (D+1)/T = 33% and 50%
CELL = {"dnc": ("dnc", "regular"), "dnc_uw": ("dnc", "uniform"), "ntm": ("ntm", "regular"),
        "dnc_mine": ("dnc", "mine"), "mymem": ("mymem", "regular")}
BASELINES = ("dnc", "dnc_uw", "ntm")


def run_rows(row: str, task: str, d: int, values, cpu=1.0, profile="smoke", steps=400, **extra):
    model, writer = CELL[row]
    cell = f"{row}-{task}-D{d}"
    study = "leaderboard" if row in BASELINES else f"leaderboard_{row}"  # a new row is a study of its own
    return [{"study": study, "cell": cell, "role": "final", "status": "finished", "seed": s,
             "run_id": f"{cell}-s{s}", "task": task, "model": model, "writer": writer, "seq_len": T, "memory_size": d,
             "hidden_size": 8, "compression_ratio": (d + 1) / T, "lr": 1e-3, "clip": 10, "steps": steps,
             "profile": profile, "device": "cpu", "test_accuracy": v / 100, "best_eval_accuracy": v / 100,
             "mean_seconds_per_100": cpu, "mean_cpu_seconds_per_100": cpu, "clip_mode": "per_tensor", "decoder_write": False,
             "git_sha": "c0de001", **extra} for s, v in enumerate(values)]


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
    # a new row's own cell does not decide the column: every baseline converged, so it is counted and ranked
    assert b.excluded == [] and cell.rank == 1.0 and mine.mean_rank == 1.0
    assert "**Baselines: 2 of 2 cells converged** (100%" in text and "Every column is counted" in text
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


# ---- the rule for baselines that have not converged ----

D_THIRD = 3  # a third position: copy at (D+1)/T = 67%


def collapsed_late(row, task, d, value, **kw):
    """Runs flat at ``value`` up to a best evaluation at step 375 whose last one (400) falls to the guessing
    level's training loss: each run collapsed late, and reads as converged up to its best evaluation."""
    runs = run_rows(row, task, d, [value, value + 1, value - 1], **kw)
    curves = []
    for r in runs:
        for step in range(25, 401, 25):
            acc = r["test_accuracy"] + (0.0001 if step == 375 else -0.3 if step == 400 else 0.0)
            curves.append({"run_id": r["run_id"], "metric": "eval_accuracy", "step": step, "value": acc})
            curves.append({"run_id": r["run_id"], "metric": "train_loss", "step": step,
                           "value": 2.5 if step == 400 else 0.1})
    return runs, curves


def _three_baselines(ntm_high):
    """The DNC, DNC+UW and NTM at Copy 33% (all converged) and at Copy 50% (the NTM's cell ``ntm_high``),
    and a new row, best at 33% and worst at 50%: counting 50% would put UW first."""
    return snapshot(
        flat("dnc", "copy", D_LOW, [50, 51, 49]), flat("dnc_uw", "copy", D_LOW, [80, 81, 79]),
        flat("ntm", "copy", D_LOW, [40, 41, 39]), flat("dnc_mine", "copy", D_LOW, [90, 91, 89]),
        flat("dnc", "copy", D_HIGH, [60, 61, 59]), flat("dnc_uw", "copy", D_HIGH, [70, 71, 69]),
        ntm_high("ntm", "copy", D_HIGH, [65, 66, 64]), flat("dnc_mine", "copy", D_HIGH, [10, 11, 9]))


def test_a_baseline_cell_not_converged_takes_its_column_out_of_every_rows_rank_and_tallies(tmp_path):
    from uwbench.leaderboard import steps as lb

    counted = board_mod.build(_three_baselines(flat))  # every baseline converged: both columns count
    low, high = counted.positions
    assert counted.excluded == [] and counted.counted == [low, high]
    assert [r.name for r in counted.rows][:2] == ["dnc_uw", "dnc_mine"]
    assert counted.row("dnc_mine").mean_rank == 2.5 and sum(counted.row("dnc_mine").counts("uniform").values()) == 2

    b, _ = lb.write_board(_three_baselines(rising), str(tmp_path))  # the NTM still rises at 50%
    assert b.baseline_study == "leaderboard" and len(b.baseline_cells) == 6
    assert [(u.row, u.position, u.state) for u in b.unconverged] == [("ntm", high, "rising")]
    assert b.excluded == [high] and b.counted == [low] and b.converged_share() == pytest.approx(5 / 6)
    assert [r.name for r in b.rows] == ["dnc_mine", "dnc_uw", "dnc", "ntm"]  # ranked on 33% alone
    for row in b.rows:  # every row alike: no rank and no test at 50%, whatever its own cell there
        assert row.cells[high].rank is None and high not in row.tests.get("uniform", {})
        assert row.mean_rank == row.cells[low].rank and row.mean_value() == row.cells[low].mean
    mine = b.row("dnc_mine")
    assert mine.counts("uniform") == {"better": 1, "worse": 0, "n.s.": 0, "not testable at this budget": 0}
    vs_uw = mine.tests["uniform"][low]
    assert vs_uw.p_holm == pytest.approx(vs_uw.p)  # a Holm family of one: the 50% test is not in it
    assert b.row("ntm").counts("regular") == {"better": 0, "worse": 1, "n.s.": 0, "not testable at this budget": 0}

    table = board_render.board_table(b)
    assert table.columns[2:4] == ["Copy 33%", f"Copy 50% {board_render.NOT_CONVERGED}"]
    ntm_line = table.rows[[r.name for r in b.rows].index("ntm")]
    assert ntm_line[3] == f"65.0 ± 1.0 {board_render.NOT_CONVERGED}" and ntm_line[2] == "40.0 ± 1.0"
    text = (tmp_path / "board.md").read_text()
    assert ("**Baselines: 5 of 6 cells converged** (83%; a board is committed with at least 80%). Not converged "
            f"({board_render.NOT_CONVERGED}, not testable): NTM at Copy 50% (rising). The columns with one (Copy 50%) "
            f"are marked {board_render.NOT_CONVERGED} and left out for every row alike: the mean rank, the mean value "
            "and the tallies are over the other 1 of 2 columns, where every baseline cell converged.") in text
    import pandas as pd

    cells = pd.read_csv(tmp_path / "cells.csv").set_index(["row", "memory_size"])
    assert cells.loc[("dnc_mine", D_HIGH), "vs_uniform"] == "not testable at this budget"
    assert cells.loc[("dnc_mine", D_HIGH), "vs_uniform_reason"] == ("column not counted: a baseline cell has not "
                                                                     "converged (NTM: rising)")
    assert pd.isna(cells.loc[("dnc_mine", D_HIGH), "rank"]) and cells.loc[("dnc_mine", D_LOW), "rank"] == 1
    assert pd.read_csv(tmp_path / "board.csv").set_index("row").loc["dnc_mine", "ranked_columns"] == 1


def test_a_baseline_cell_with_runs_that_collapsed_late_counts_and_is_named():
    b = board_mod.build(snapshot(flat("dnc", "copy", D_LOW, [50, 51, 49]),
                                 collapsed_late("dnc_uw", "copy", D_LOW, 80)))
    uw = b.row("dnc_uw").cells[b.positions[0]]
    assert uw.regime.converged and uw.regime.collapsed == (375, 375, 375)
    assert b.excluded == [] and uw.rank == 1.0
    assert ("Converged with runs that collapsed late (read up to their best evaluation, the checkpoint their test "
            "value measures): DNC+UW at Copy 33% (3 of 3 runs).") in board_render.markdown(b)


def _baselines_at_three(stuck_high, stuck_third):
    """Six baseline cells (the DNC and DNC+UW at 33%, 50% and 67%): UW's cell at 50% and the DNC's at 67%
    when asked have not converged; the DNC's runs at 33% failed when ``stuck_third`` (no finished run)."""
    groups = [flat("dnc_uw", "copy", D_LOW, [80, 81, 79]), flat("dnc", "copy", D_HIGH, [60, 61, 59]),
              flat("dnc_uw", "copy", D_THIRD, [70, 71, 69]),
              (rising if stuck_high else flat)("dnc_uw", "copy", D_HIGH, [70, 71, 69]),
              (rising if stuck_third else flat)("dnc", "copy", D_THIRD, [60, 61, 59])]
    failed = run_rows("dnc", "copy", D_LOW, [50, 51, 49])
    for r in failed:
        r.update(status="failed", test_accuracy="", best_eval_accuracy="")
    groups.append((failed, []))
    return snapshot(*groups)


def test_a_board_is_committed_when_at_least_80_percent_of_its_baseline_cells_converged(tmp_path):
    from uwbench.leaderboard import steps as lb

    assert board_mod.MIN_CONVERGED == 0.8
    five = board_mod.build(_baselines_at_three(stuck_high=False, stuck_third=False))  # 5 of 6: the failed cell
    assert [(u.row, u.state) for u in five.unconverged] == [("dnc", "no finished run")]
    board_mod.check_committable(five)
    four = board_mod.build(_baselines_at_three(stuck_high=True, stuck_third=False))  # 4 of 6 = 67%
    with pytest.raises(ValueError) as refused:
        board_mod.check_committable(four)
    assert str(refused.value).startswith(
        "4 of 6 baseline cells converged (67%): a board is committed when at least 80% did. Not converged: DNC at "
        "Copy 33% (no finished run); DNC+UW at Copy 50% (rising). Run the baselines at sizes or a budget where more "
        "converge")
    board_mod.check_committable(four, minimum=4 / 6)  # the threshold itself is met
    out = tmp_path / "board"
    with pytest.raises(ValueError, match="3 of 6 baseline cells converged"):
        lb.write_board(_baselines_at_three(stuck_high=True, stuck_third=True), str(out),
                       min_converged=board_mod.MIN_CONVERGED)
    assert not out.exists()  # refused before any file is written
    board, _ = lb.write_board(_baselines_at_three(stuck_high=True, stuck_third=True), str(out))  # a board to read
    assert board.counted == [] and {r.mean_rank for r in board.rows} == {None}
    assert "no column is counted, so no row has a mean rank" in (out / "board.md").read_text()
    assert not (out / "pareto.png").exists() and "pareto.png" not in (out / "board.md").read_text()


def test_baselines_swept_on_two_machines_make_one_board_and_the_rule_refuses_it_below_80(
        tmp_path, tracking_uri, capsys, monkeypatch):
    """The suite at its smoke profile (7 baseline cells x 2 seeds of 4 updates: too few evaluations for a
    slope). Machine A sweeps one cell and records it into the board folder: runs.csv and curves.csv alone,
    no board until every run is recorded. Machine B, its stores empty, is refused the record until it restores
    A's runs (`uwbench restore`); then it sweeps the other 12 runs only, and its record holds all 14. The rule
    refuses the 7-cell board (0% converged) and leaves the folder as it was."""
    import pandas as pd

    from uwbench.cli import main
    from uwbench.leaderboard import readme as board_readme
    from uwbench.tracking.mlflow import search_runs

    common = ["--suite", SUITE, "--profile", "smoke"]
    sweep = ["sweep", SUITE, "--profile", "smoke", "--workers", "0", "--no-progress", "--no-system-metrics"]
    board = tmp_path / "board"
    assert main([*sweep, "--tracking-uri", tracking_uri, "--cells", "dnc-*"]) == 0  # machine A: dnc-copy-D1
    capsys.readouterr()
    assert main(["leaderboard", "--record-baselines", "--board", str(board), "--tracking-uri", tracking_uri,
                 *common]) == 0
    assert (f"baselines in progress: 2 of 14 runs recorded into {board} (runs.csv, curves.csv, progress.md); 12 to run, in 6 "
            "cells (dnc_cuw2-copy-D1, dnc_cuw5-copy-D1, dnc_rw-copy-D1, dnc_uw-copy-D1, ... (2 more)). The board is "
            f"written when every run is: on any machine, put them back (`uwbench restore {SUITE} --from {board}`)"
            in capsys.readouterr().out)
    a_runs = pd.read_csv(board / "runs.csv")
    a_curves_before = pd.read_csv(board / "curves.csv")
    assert sorted(a_runs["cell"]) == ["dnc-copy-D1"] * 2
    assert sorted(os.listdir(board)) == ["curves.csv", "progress.md", "runs.csv"]  # no board until every run is
    progress = (board / "progress.md").read_text()
    table = {c[0]: c[1:] for c in ([v.strip() for v in line.strip("|").split("|")]
                                   for line in progress.splitlines() if line.startswith("| "))}
    assert "**2 of 14 baseline runs recorded** (" in progress and len(table) == 9  # the header, its rule, 7 rows
    assert table["dnc"][0] == "2 of 2" and table["dnc"][3] == "none" and float(table["dnc"][1]) >= 0
    assert table["dnc"][2] == "0 of 1: not Copy 33% (unknown)"  # 4 updates: too few evaluations for a slope
    assert table["dnc_uw"] == ["0 of 2", "0.00", "0 of 0", "dnc_uw-copy-D1"]
    assert main(["leaderboard", "--rebuild", "--board", str(board), "--suite", SUITE]) == 0
    assert "the baselines are being recorded (2 of 14 runs): no board to rebuild" in capsys.readouterr().out
    assert sorted(os.listdir(board)) == ["curves.csv", "progress.md", "runs.csv"]
    block = board_readme.render(str(board), ROOT)  # the README's block while the baselines are being recorded
    assert block.startswith("No board yet: the baselines are being recorded, **2 of 14 runs** so far")
    assert "12 runs in 6 cells remain" in block

    monkeypatch.setenv("UWBENCH_RUNS_DIR", str(tmp_path / "machine_b"))  # machine B: its own Optuna storage
    uri_b = f"sqlite:///{tmp_path / 'b.db'}"
    assert main([*sweep, "--tracking-uri", uri_b, "--cells", "ntm-*"]) == 0  # a cell swept before restoring
    before = (board / "runs.csv").read_text()
    capsys.readouterr()
    assert main(["leaderboard", "--record-baselines", "--board", str(board), "--tracking-uri", uri_b, *common]) == 2
    assert (f"error: {board} records 2 baseline runs of this suite that this MLflow store lacks, in 1 cells "
            f"(dnc-copy-D1): recording would drop them. Put them back first (`uwbench restore {SUITE} --from {board}`"
            in capsys.readouterr().err)
    assert (board / "runs.csv").read_text() == before
    assert main(["restore", SUITE, "--from", str(board), "--profile", "smoke", "--tracking-uri", uri_b]) == 0
    assert "restored 2 run(s)" in capsys.readouterr().out
    assert main([*sweep, "--tracking-uri", uri_b]) == 0
    b_finals = search_runs(["leaderboard"], uri=uri_b).query("`tags.role` == 'final'")
    assert len(b_finals) == 14 and (b_finals["tags.cell"] == "dnc-copy-D1").sum() == 2  # A's cell not run again

    capsys.readouterr()
    assert main(["leaderboard", "--record-baselines", "--board", str(board), "--tracking-uri", uri_b, *common]) == 2
    err = capsys.readouterr().err
    assert ("error: 0 of 7 baseline cells converged (0%): a board is committed when at least 80% did. Not "
            "converged: DNC at Copy 33% (unknown); DNC+CUW (L=2) at Copy 33% (unknown);") in err
    assert (board / "runs.csv").read_text() == before
    assert main(["leaderboard", "--record-baselines", "--board", str(board), "--min-converged", "0",
                 "--tracking-uri", uri_b, *common]) == 0
    assert "0 of 7 baseline cells converged, 0 of 1 columns counted" in capsys.readouterr().out
    assert "**Baselines: 0 of 7 cells converged** (0%" in (board / "board.md").read_text()
    assert not (board / "progress.md").exists()  # the board replaces it
    runs = pd.read_csv(board / "runs.csv")
    assert len(runs) == 14 and not runs.duplicated(["cell", "seed"]).any()
    restored = runs[runs["cell"] == "dnc-copy-D1"].sort_values("seed")
    assert list(restored["test_accuracy"]) == list(a_runs.sort_values("seed")["test_accuracy"])  # A's, not re-run
    assert list(restored["run_id"]) == list(a_runs.sort_values("seed")["run_id"])  # under A's run ids, not B's
    curves = pd.read_csv(board / "curves.csv")
    assert set(curves["run_id"]) == set(runs["run_id"])
    a_curves = a_curves_before.sort_values(["run_id", "metric", "step"]).reset_index(drop=True)
    b_curves = curves[curves["run_id"].isin(set(a_runs["run_id"]))].sort_values(["run_id", "metric", "step"])
    pd.testing.assert_frame_equal(b_curves.reset_index(drop=True), a_curves)

    recorded = {name: (board / name).read_text() for name in ("runs.csv", "curves.csv", "board.md")}
    uri_c = f"sqlite:///{tmp_path / 'c.db'}"  # machine C, a fresh clone: restores the whole board, records it
    monkeypatch.setenv("UWBENCH_RUNS_DIR", str(tmp_path / "machine_c"))
    assert main(["restore", SUITE, "--from", str(board), "--profile", "smoke", "--tracking-uri", uri_c]) == 0
    assert main(["leaderboard", "--record-baselines", "--board", str(board), "--min-converged", "0",
                 "--tracking-uri", uri_c, *common]) == 0
    assert {name: (board / name).read_text() for name in recorded} == recorded  # no diff: every run id kept


def test_min_converged_is_a_share_and_only_for_recording_baselines(capsys):
    from uwbench.cli import main

    assert main(["leaderboard", "--show", "--min-converged", "0.5"]) == 2
    assert "--min-converged applies to --record-baselines alone" in capsys.readouterr().err
    assert main(["leaderboard", "--record-baselines", "--min-converged", "80"]) == 2
    assert "--min-converged 80: give a share between 0 and 1" in capsys.readouterr().err


# ---- a board rebuilds from its snapshot alone; `--show` prints it ----

COMMITTED_BOARDS = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(ROOT, "reports", "*", "board.md")))


def fixture_board_groups() -> list:
    return [flat("dnc", "copy", D_LOW, [50, 51, 49], cpu=2.0), flat("dnc_uw", "copy", D_LOW, [80, 81, 79]),
            flat("dnc_mine", "copy", D_LOW, [85, 86, 84], cpu=1.5),
            rising("dnc_mine", "copy", D_HIGH, [90, 91, 89]), flat("dnc_uw", "copy", D_HIGH, [70, 72, 71])]


def fixture_board() -> Snapshot:
    """Baselines (the DNC and DNC+UW) and a new row at Copy 33% and 50%; the DNC has no cell at 50%, so that
    column is not counted (3 of 4 baseline cells converged) and the new row's cell there is rising."""
    return snapshot(*fixture_board_groups())


def rebuild_differences(folder: str, tmp_path) -> list:
    """`uwbench leaderboard --rebuild` of a fresh folder holding a copy of ``folder``'s runs.csv and
    curves.csv alone, against ``folder`` by the reports' rule (``report.compare``: text byte for byte,
    figures by pixels within its tolerance; no file missing or left over); empty when there is no diff."""
    from uwbench.leaderboard import steps as lb
    from uwbench.cli import main
    from uwbench.report.rendering import compare

    fresh = tmp_path / "rebuilt" / os.path.basename(folder)
    fresh.mkdir(parents=True)
    for name in lb.SNAPSHOT_FILES:
        if os.path.exists(os.path.join(folder, name)):
            shutil.copy(os.path.join(folder, name), fresh / name)
    assert main(["leaderboard", "--rebuild", "--board", str(fresh)]) == 0
    return compare.folder_differences(folder, str(fresh))


@pytest.mark.parametrize("folder", COMMITTED_BOARDS, ids=[os.path.basename(f) for f in COMMITTED_BOARDS])
def test_a_committed_board_rebuilds_from_its_runs_csv_with_no_diff_and_meets_the_rule(folder, tmp_path):
    differ = rebuild_differences(folder, tmp_path)
    assert not differ, f"{folder}: the rebuild differs from the committed board:\n" + "\n".join(differ)
    board_mod.check_committable(board_mod.build(Snapshot.from_dir(folder)))  # >= MIN_CONVERGED of its baselines


def test_a_fixture_board_rebuilds_from_its_runs_csv_with_no_diff(tmp_path):
    from uwbench.leaderboard import steps as lb
    from uwbench.cli import main

    board = tmp_path / "leaderboard"
    _, files = lb.write_board(fixture_board(), str(board))
    assert sorted(os.path.basename(f) for f in files) == sorted(lb.SNAPSHOT_FILES + board_render.FILES)
    assert rebuild_differences(str(board), tmp_path) == []
    rebuilt = tmp_path / "rebuilt" / "leaderboard"
    assert [n for n in os.listdir(board) if (board / n).read_bytes() != (rebuilt / n).read_bytes()] == []
    before = {n: (board / n).read_bytes() for n in os.listdir(board)}
    assert main(["leaderboard", "--rebuild", "--board", str(board)]) == 0  # in place: nothing changes
    assert {n: (board / n).read_bytes() for n in os.listdir(board)} == before
    # the comparison can fail: one changed accuracy in runs.csv is another board
    edited = tmp_path / "edited"
    shutil.copytree(board, edited)
    runs = (edited / "runs.csv").read_text()
    (edited / "runs.csv").write_text(runs.replace(",0.5,", ",0.45,", 1))
    assert main(["leaderboard", "--rebuild", "--board", str(edited)]) == 0
    from uwbench.report.rendering import compare

    assert {d.split(":")[0] for d in compare.folder_differences(str(board), str(edited))} >= {
        "board.md", "board.csv", "cells.csv", "runs.csv"}


def _copy_board(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_a_run_still_going_counts_for_neither_the_boards_updates_nor_its_cells():
    """A board previewed mid-sweep: the run in flight has fewer updates and is not finished."""
    going = [dict(r, status="running", steps=150) for r in run_rows("dnc_uw", "copy", D_LOW, [60])]
    board = board_mod.build(snapshot(*fixture_board_groups(), (going, curve_rows(going, steps=150))))
    assert board.steps == 400 and board.seeds == 3
    assert board.row("dnc_uw").cells[board_mod.Position("copy", T, D_LOW)].n == 3


def test_writing_the_board_folder_rewrites_the_readme_board_block_beside_it(tmp_path, capsys):
    """`--rebuild` (as `--record-baselines` and `--commit-row`) rewrites the board block of the README beside
    the board folder's parent from the folder's files: the rows in the board's order with their numbers, the
    baselines' account and the figure; a README without the markers is left alone."""
    from uwbench.leaderboard import steps as lb
    from uwbench.cli import main
    from uwbench.leaderboard import readme as board_readme
    from uwbench.report.rendering import readme_block

    folder = tmp_path / "reports" / "leaderboard"
    readme = tmp_path / "README.md"
    stale = f"# Copy\n\n{board_readme.BEGIN}\nold board\n{board_readme.END}\n\nafter\n"
    readme.write_text(stale, encoding="utf-8")
    empty = board_readme.render(str(folder), str(tmp_path))
    assert empty.startswith("No board is committed yet (`reports/leaderboard/runs.csv` is absent)")
    board, _ = lb.write_board(fixture_board(), str(folder))
    capsys.readouterr()
    assert main(["leaderboard", "--rebuild", "--board", str(folder)]) == 0
    assert f"rewrote the board block of {readme}" in capsys.readouterr().out
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# Copy\n\n") and text.endswith(f"{board_readme.END}\n\nafter\n")
    block = readme_block.current_block(text, board_readme.BEGIN, board_readme.END)
    assert block == board_readme.render(str(folder), str(tmp_path)) != empty
    assert "old board" not in block and "[`reports/leaderboard/board.md`](reports/leaderboard/board.md)" in block
    assert "**Baselines: 3 of 4 cells converged** (75%" in block and "(reports/leaderboard/pareto.png)" in block
    lines = [[f.strip() for f in x.strip("|").split("|")] for x in block.splitlines()
             if x.startswith("| ") and x[2].isdigit()]
    assert [x[1] for x in lines] == [r.label for r in board.rows]  # the board's order
    mine = next(x for x in lines if x[1] == board.row("dnc_mine").label)
    assert mine[2] == "85.0"  # the mean over the counted column alone (Copy 50% is not counted)
    dnc = next(x for x in lines if x[1] == board.row("dnc").label)
    assert dnc[-1] == f"{3 * 400 * 2.0 / 100 / 3600:.2f}" == "0.01"  # 3 runs x 400 updates x 2 CPU s per 100
    # another board folder beside the same README (a preview, a row's own board) leaves it alone
    assert main(["leaderboard", "--rebuild", "--board", str(_copy_board(folder, tmp_path / "runs" / "preview"))]) == 0
    assert readme.read_text(encoding="utf-8") == text and "rewrote" not in capsys.readouterr().out
    # a README without the markers is left alone, and an unchanged board rewrites nothing
    assert main(["leaderboard", "--rebuild", "--board", str(folder)]) == 0
    assert "rewrote" not in capsys.readouterr().out
    readme.write_text("# No markers\n", encoding="utf-8")
    assert main(["leaderboard", "--rebuild", "--board", str(folder)]) == 0
    assert readme.read_text(encoding="utf-8") == "# No markers\n"


def test_show_prints_the_committed_board_and_says_how_to_build_a_missing_one(tmp_path, capsys, monkeypatch):
    from uwbench.leaderboard import steps as lb
    from uwbench.cli import main

    board = tmp_path / "leaderboard"
    lb.write_board(fixture_board(), str(board))
    capsys.readouterr()
    assert main(["leaderboard", "--show", "--board", str(board)]) == 0
    out = capsys.readouterr().out
    assert out == (board / "board.md").read_text()
    assert "**Baselines: 3 of 4 cells converged** (75%" in out and "DNC at Copy 50% (no finished run)" in out
    (tmp_path / "checkout").mkdir()
    monkeypatch.chdir(tmp_path / "checkout")  # a checkout with no committed board: the default --board
    assert main(["leaderboard", "--show"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    assert err.startswith(f"uwbench leaderboard: error: no board at {os.path.join(lb.BOARD_DIR, 'board.md')}: "
                          "build it by recording the baselines (`uwbench sweep studies/leaderboard.yaml --workers "
                          "2`, then `uwbench leaderboard --record-baselines`)")
    lb.write_snapshot(fixture_board(), lb.BOARD_DIR)  # baselines still being recorded: runs.csv, no board
    os.makedirs("studies")
    shutil.copy(SUITE, lb.SUITE)
    for command in (["--show"], ["--writer", "uniform"]):
        assert main(["leaderboard", *command]) == 2
        assert (f"no board at {lb.BOARD_DIR} yet: its baselines are being recorded, 0 of 14 runs so far (runs.csv); "
                "the board is written when every run is: put them back (`uwbench restore studies/leaderboard.yaml "
                f"--from {lb.BOARD_DIR}`), sweep the rest") in capsys.readouterr().err


def test_a_new_row_must_be_made_like_the_baselines():
    from uwbench.leaderboard import steps as lb

    base = snapshot(flat("dnc", "copy", D_LOW, [50, 51, 49], profile="cpu"))
    mine = snapshot(flat("dnc_mine", "copy", D_LOW, [50, 51, 49]))
    with pytest.raises(ValueError, match="profile smoke and the baselines' cpu"):
        lb.check_comparable(base, mine, "leaderboard")
    longer = snapshot(flat("dnc_mine", "copy", D_LOW, [50, 51, 49], profile="cpu", steps=800))
    with pytest.raises(ValueError, match="steps 800 and the baselines' 400"):
        lb.check_comparable(base, longer, "leaderboard")
    clipped = snapshot(flat("dnc_mine", "copy", D_LOW, [50, 51, 49], profile="cpu", clip_mode="per_variable"))
    with pytest.raises(ValueError, match="clip_mode per_variable and the baselines' per_tensor"):
        lb.check_comparable(base, clipped, "leaderboard")
    writing = snapshot(flat("dnc_mine", "copy", D_LOW, [50, 51, 49], profile="cpu", decoder_write=True))
    with pytest.raises(ValueError, match="decoder_write true and the baselines. false"):
        lb.check_comparable(base, writing, "leaderboard")
    elsewhere = snapshot(flat("dnc_mine", "copy", D_HIGH, [50, 51, 49], profile="cpu"))
    with pytest.raises(ValueError, match=r"cells the baselines lack \(task, T, D\): \[\('copy', 6, 2\)\]"):
        lb.check_comparable(base, elsewhere, "leaderboard")
    lb.check_comparable(base, snapshot(flat("dnc_mine", "copy", D_LOW, [50, 51, 49], profile="cpu")), "leaderboard")
    merged = lb.merge(base, mine)
    assert sorted(set(merged.runs["cell"])) == ["dnc-copy-D1", "dnc_mine-copy-D1"]
    assert len(merged.curves) == len(base.curves) + len(mine.curves)


def test_a_column_with_a_longer_budget_is_compared_and_shown_column_by_column():
    """A profile's cell_set may give one column more updates (every row alike): a new row must match the
    baselines column by column, and the board names the column's budget."""
    from uwbench.leaderboard import steps as lb

    def two(row, low_steps, high_steps):
        runs = (run_rows(row, "copy", D_LOW, [50, 51, 49], profile="cpu", steps=low_steps)
                + run_rows(row, "copy", D_HIGH, [70, 71, 69], profile="cpu", steps=high_steps))
        return runs, curve_rows(runs[:3], steps=low_steps) + curve_rows(runs[3:], steps=high_steps)

    base = snapshot(*(two(row, 400, 800) for row in BASELINES))
    lb.check_comparable(base, snapshot(two("dnc_mine", 400, 800)), "leaderboard")
    with pytest.raises(ValueError, match=r"steps 400 and the baselines' 800 at \(task, T, D\) \('copy', 6, 2\)"):
        lb.check_comparable(base, snapshot(two("dnc_mine", 400, 400)), "leaderboard")
    board = board_mod.build(lb.merge(base, snapshot(two("dnc_mine", 400, 800))))
    assert board.steps == 400 and set(board.updates.values()) == {400, 800}
    text = board_render.updates_text(board)
    assert text == "400 updates (800 at Copy 50%)"
    assert text in board_render.markdown(board)
    one = board_mod.build(snapshot(*fixture_board_groups()))
    assert board_render.updates_text(one) == "400 updates"
    assert board_render.seeds_text(board) == "3 seeds per cell"
    early = board_mod.build(snapshot(flat("dnc", "copy", D_LOW, [50])))  # a preview after the first run
    assert board_render.seeds_text(early) == "1 seed per cell" and "1 seed per cell" in board_render.markdown(early)


def test_the_new_rows_study_is_the_suite_with_one_group(tmp_path):
    from uwbench.leaderboard import steps as lb
    from uwbench.spec import load_plan

    path = lb.writer_study(SUITE, "dnc_every", "dnc", "uniform", {"schedule": "paper"}, str(tmp_path))
    assert os.path.basename(path) == "leaderboard_dnc_every.yaml"
    suite, mine = load_plan(SUITE, "cpu"), load_plan(path, "cpu")
    assert [c.id for c in mine.cells] == [c.id.replace("dnc_uw-", "dnc_every-") for c in suite.cells
                                          if c.id.startswith("dnc_uw-")]
    for column in ("add-D7", "copy-D1"):  # copy-D1: a column the suite's cell_set gives its own budget
        twin = suite.cell(f"dnc_uw-{column}").config
        ours = mine.cell(f"dnc_every-{column}").config
        assert ours["task"] == twin["task"] and ours["train"] == twin["train"]
        assert ours["model"] == {**twin["model"], "schedule": "paper"}
    assert mine.seeds == suite.seeds
    with pytest.raises(ValueError, match="the suite sets .*hidden_size"):
        lb.writer_study(SUITE, "dnc_big", "dnc", "uniform", {"hidden_size": 64}, str(tmp_path))
    with pytest.raises(ValueError, match="row name 'dnc_uw' is a baseline row"):
        lb.writer_study(SUITE, "dnc_uw", "dnc", "uniform", {}, str(tmp_path))


# ---- the contract check ----


def test_the_contract_check_passes_the_builtin_writers_and_names_what_a_broken_one_breaks():
    from uwbench.registry import WRITERS
    from uwbench.leaderboard import contract

    for writer in WRITERS.names():
        net = contract._build(contract.probe_config("dnc", {"writer": writer}))[1]
        assert contract.schedule_problems(net.writer) == [], writer

    class Short:
        def schedule(self, n):
            return [True] * (n - 1)

    class Floats:
        def schedule(self, n):
            return [0.5] * n

    class Coin:
        calls = 0

        def schedule(self, n):
            Coin.calls += 1
            return [Coin.calls % 2 == 0] * n

    class Never:
        def schedule(self, n):
            return [False] * n

    assert contract.schedule_problems(Short()) == [
        "schedule(2) has 1 entries: it must have one per encoder step (2)"]
    assert "holds 0.5: every entry must be True or False" in contract.schedule_problems(Floats())[0]
    assert "changed between two calls" in contract.schedule_problems(Coin())[0]
    assert contract.schedule_problems(Never()) == ["schedule(8) never writes: the memory would stay empty"]
    assert "no writer 'nope' is registered" in contract.writer_problems("nope")[0]
    assert "takes no writer" in contract.writer_problems("uniform", "lstm")[0]
    assert "has no `writer` setting" in contract.model_problems("lstm")[0]


def test_the_command_refuses_what_would_make_an_unfair_row_before_running(tmp_path, capsys):
    from uwbench.cli import main

    board = str(tmp_path / "none")
    assert main(["leaderboard", "--writer", "uniform", "--set", "train.steps=3", "--board", board]) == 2
    assert "--set train.*: the leaderboard takes only the writer's or the model's own settings" in capsys.readouterr().err
    assert main(["leaderboard", "--model", "lstm", "--board", board]) == 2
    assert "model 'lstm' breaks the memory-model contract" in capsys.readouterr().err
    assert main(["leaderboard", "--writer", "uniform", "--board", board, "--suite", SUITE]) == 2
    assert "no baselines at" in capsys.readouterr().err
    assert main(["leaderboard", "--show", "--writer", "uniform"]) == 2
    assert main(["leaderboard"]) == 2
    assert "give --writer NAME" in capsys.readouterr().err


# ---- `uwbench leaderboard` end to end, in subprocesses (a plugin registers into that process only) ----

TOY_WRITER = '''
from typing import List
from uwbench.registry import WRITERS
from uwbench.writing.base import Writer


@WRITERS.register("toy_every2", help="test only: write on every second step")
class ToyEvery2(Writer):
    def schedule(self, n_steps: int) -> List[bool]:
        return [t % 2 == 1 for t in range(n_steps)]
'''

SHORT_SCHEDULE = '''
from uwbench.registry import WRITERS
from uwbench.writing.base import Writer


@WRITERS.register("toy_short", help="test only: one entry short")
class Short(Writer):
    def schedule(self, n_steps):
        return [True] * (n_steps - 1)
'''

BAD_ATTENTION = '''
import torch
from uwbench.registry import WRITERS
from uwbench.writing.base import Writer


class MeanAttention(torch.nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(hidden_size, hidden_size))

    def forward(self, h, cache, r):
        a = cache.mean(1) @ self.w  # (B, H)
        return a, a  # alpha should be (B, n)


@WRITERS.register("toy_cached", help="test only: an attention with the wrong alpha shape")
class Cached(Writer):
    cached = True

    def schedule(self, n_steps):
        return [t % 2 == 1 for t in range(n_steps)]

    def build_attention(self, hidden_size, read_size):
        return MeanAttention(hidden_size)
'''


def _leaderboard(tmp_path, uri, *args, timeout=300):
    env = dict(os.environ, UWBENCH_RUNS_DIR=str(tmp_path / "mlruns"), PYTHONUNBUFFERED="1")
    for key in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "UWBENCH_PLUGINS"):
        env.pop(key, None)
    cmd = [sys.executable, "-m", "uwbench.cli", "leaderboard", "--suite", SUITE, "--profile", "smoke",
           "--tracking-uri", uri, "--workers", "0", "--no-progress", "--no-system-metrics", *args]
    return subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=timeout)


def _smoke_baselines(folder) -> None:
    """A committed board's snapshot at the smoke profile: the DNC and DNC+UW on copy at T=6, D=1, 2 seeds."""
    from uwbench.leaderboard import steps as lb

    groups = []
    for row, values, cpu in (("dnc", [20.0, 22.0], 2.0), ("dnc_uw", [30.0, 29.0], 1.0)):
        runs = run_rows(row, "copy", D_LOW, values, cpu=cpu, steps=4)
        groups.append((runs, curve_rows(runs, steps=4, every=1)))
    lb.write_board(snapshot(*groups), str(folder))


def test_a_plugin_writer_gets_its_row_and_can_commit_it(tmp_path, tracking_uri):
    import pandas as pd

    from uwbench.tracking.mlflow import experiment_exists, search_runs

    (tmp_path / "toy_writer.py").write_text(textwrap.dedent(TOY_WRITER))
    committed, out = tmp_path / "committed", tmp_path / "out"
    _smoke_baselines(committed)
    args = ("--plugin", "toy_writer.py", "--writer", "toy_every2", "--board", str(committed), "--out", str(out))
    done = _leaderboard(tmp_path, tracking_uri, *args, "--commit-row")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "contract: writer 'toy_every2' on model 'dnc' keeps it" in done.stdout
    assert "Baselines: 0 of 2 cells converged (0%; a board is committed with at least 80%)" in done.stdout
    board = pd.read_csv(out / "board.csv").set_index("row")
    assert sorted(board.index) == ["dnc", "dnc_toy_every2", "dnc_uw"]
    mine = board.loc["dnc_toy_every2"]
    assert mine["label"] == "DNC+toy_every2" and mine["copy_T6_D1_n"] == 2
    assert 0 <= mine["copy_T6_D1_mean"] <= 100 and mine["copy_T6_D1_std"] >= 0
    assert mine["vs_uniform_row"] == "dnc_uw" and mine["vs_regular_row"] == "dnc"
    # 4 updates cannot converge: no baseline cell did (too few evaluations for a slope), so the one column is
    # not counted for any row: no rank, no test, nothing tallied, and the header says so
    assert mine["copy_T6_D1_regime"] == "unknown" and mine["ranked_columns"] == 0 and pd.isna(mine["mean_rank"])
    assert [mine[f"vs_{w}_{o}"] for w in ("uniform", "regular") for o in ("better", "worse", "ns")] == [0] * 6
    assert mine["vs_uniform_not_testable_at_this_budget"] == 0 and mine["cpu_time_vs_regular"] > 0
    text = (out / "board.md").read_text()
    assert "DNC+toy_every2" in text and "**Baselines: 0 of 2 cells converged** (0%" in text
    assert f"Copy 33% {board_render.NOT_CONVERGED} |" in text and not (out / "pareto.png").exists()
    cells = pd.read_csv(out / "cells.csv").set_index("row")
    assert cells.loc["dnc_toy_every2", "vs_uniform"] == "not testable at this budget"
    runs = search_runs(["leaderboard_dnc_toy_every2"], uri=tracking_uri)
    finals = runs[runs["tags.role"] == "final"]
    assert sorted(finals["tags.cell"]) == ["dnc_toy_every2-copy-D1"] * 2 and set(finals["tags.status"]) == {"finished"}
    assert not experiment_exists("leaderboard", tracking_uri)  # the baselines were not run again
    committed_runs = pd.read_csv(committed / "runs.csv")
    assert set(committed_runs["study"]) == {"leaderboard", "leaderboard_dnc_toy_every2"}
    assert (committed / "board.md").read_text() == (out / "board.md").read_text()

    again = _leaderboard(tmp_path, tracking_uri, *args)  # the same command resumes: nothing left to run
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing to do: every planned run is recorded" in again.stdout
    assert len(search_runs(["leaderboard_dnc_toy_every2"], uri=tracking_uri)) == len(runs)


@pytest.mark.parametrize("source, writer, reason", [
    (SHORT_SCHEDULE, "toy_short", "schedule(2) has 1 entries: it must have one per encoder step (2)"),
    (BAD_ATTENTION, "toy_cached", "the attention's outputs have shapes [(3, 6), (3, 6)] for a cache of 1: they "
                                  "must be [(3, 6), (3, 1)]"),
], ids=["schedule-length", "attention-shape"])
def test_a_plugin_that_breaks_the_contract_is_refused_before_any_run(tmp_path, tracking_uri, source, writer, reason):
    from uwbench.tracking.mlflow import experiment_exists

    (tmp_path / "broken.py").write_text(textwrap.dedent(source))
    committed = tmp_path / "committed"
    _smoke_baselines(committed)
    done = _leaderboard(tmp_path, tracking_uri, "--plugin", "broken.py", "--writer", writer, "--board", str(committed))
    assert done.returncode == 2
    assert f"uwbench leaderboard: error: writer {writer!r} breaks the writer contract" in done.stderr
    assert reason in done.stderr
    assert not (tmp_path / "mlruns" / "leaderboard").exists()  # no study written
    assert not experiment_exists(f"leaderboard_dnc_{writer}", tracking_uri)  # and nothing run


# ---- the example writer ----


@pytest.fixture
def front_loaded():
    """examples/front_loaded_writer.py imported as a plugin is, then unregistered (later tests see the
    registry they expect)."""
    import importlib.util

    from uwbench.registry import WRITERS

    path = os.path.join(ROOT, "examples", "front_loaded_writer.py")
    spec = importlib.util.spec_from_file_location("uwbench_test_front_loaded", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass reads the module's namespace
    spec.loader.exec_module(module)
    yield module
    WRITERS.unregister("front_loaded")
    del sys.modules[spec.name]


def test_the_example_writer_writes_as_often_as_uw_but_earlier_and_keeps_the_contract(front_loaded):
    from uwbench.theory import uniform_positions
    from uwbench.leaderboard import contract

    for n, d in ((21, 1), (21, 4), (21, 7), (41, 3), (41, 15), (7, 1), (5, 3)):
        uw = uniform_positions(n, d)
        mine = front_loaded.front_loaded_positions(n, len(uw), 2.0)
        assert len(mine) == len(set(mine)) == len(uw) and mine == sorted(mine)
        assert mine[-1] == n - 1 == uw[-1]  # the end marker's step is written, as by UW
        assert sum(mine) < sum(uw)  # earlier on the whole
        assert front_loaded.front_loaded_positions(n, len(uw), 1.0) == uw  # power 1: UW's own positions
    assert front_loaded.front_loaded_positions(21, 5, 2.0) == [0, 3, 7, 13, 20]
    assert contract.writer_problems("front_loaded", "dnc", {"power": 1.5}) == []
    assert "`power > 0` must hold, got 0" in contract.writer_problems("front_loaded", "dnc", {"power": 0})[0]


def test_a_board_says_when_its_rows_ran_at_different_versions_of_the_code():
    from uwbench.leaderboard import board as board_mod

    same = board_mod.build(snapshot(flat("dnc", "copy", D_LOW, [50, 51, 49]),
                                    flat("dnc_mine", "copy", D_LOW, [60, 61, 59])))
    assert [r.code for r in same.rows] == [("c0de001",), ("c0de001",)]
    assert board_render.code_note(same) == "" and "versions of the code" not in board_render.markdown(same)
    two = board_mod.build(snapshot(flat("dnc", "copy", D_LOW, [50, 51, 49]),
                                   flat("dnc_mine", "copy", D_LOW, [60, 61, 59], git_sha="beef002")))
    note = board_render.code_note(two)
    assert "2 versions of the code: `beef002` (DNC+mine); `c0de001` (DNC)" in note
    assert note in board_render.markdown(two) and "CPU-time ratio" in note


def test_the_reports_index_links_a_board_folder_to_its_board_or_its_progress(tmp_path):
    """A board folder (board.md, or progress.md while its baselines are being recorded) is no study report:
    the reports' index links its page, and the README's results block leaves it out."""
    from uwbench.leaderboard import steps as lb
    from uwbench.report.rendering import index, readme_block

    studies = tmp_path / "studies"
    studies.mkdir()
    shutil.copy(SUITE, studies / "leaderboard.yaml")
    folder = tmp_path / "reports" / "leaderboard"
    lb.write_snapshot(fixture_board(), str(folder))
    (folder / lb.PROGRESS_FILE).write_text("# progress\n")
    entries = {e["id"]: e for e in index.index_entries(str(tmp_path / "reports"), str(studies))}
    assert entries["leaderboard"]["link"] == "leaderboard/progress.md"
    assert entries["leaderboard"]["status"] == "baselines being recorded"
    assert readme_block.entries(str(tmp_path / "reports"), str(studies)) == []
    lb.write_board(fixture_board(), str(folder))
    assert not (folder / lb.PROGRESS_FILE).exists()
    entries = {e["id"]: e for e in index.index_entries(str(tmp_path / "reports"), str(studies))}
    assert entries["leaderboard"]["link"] == "leaderboard/board.md" and entries["leaderboard"]["status"] == "leaderboard"


def test_a_study_report_is_refused_in_a_board_folder(tmp_path, capsys):
    """`uwbench report` of the suite into its board folder would replace the board's runs.csv."""
    from uwbench.leaderboard import steps as lb
    from uwbench.cli import main

    folder = tmp_path / "reports" / "leaderboard"
    lb.write_snapshot(fixture_board(), str(folder))
    (folder / lb.PROGRESS_FILE).write_text("# progress\n")
    before = (folder / "runs.csv").read_text()
    assert main(["report", SUITE, "--out", str(tmp_path / "reports"), "--source", "csv"]) == 2
    assert "is a leaderboard folder (board.md or progress.md): a study report there would replace" in \
        capsys.readouterr().err
    assert (folder / "runs.csv").read_text() == before
