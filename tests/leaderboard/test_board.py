"""The board (``uwbench/leaderboard/board.py``) on fixtures: Welch, Holm, ranks, time, regimes; the rule for
baselines that have not converged (their columns marked † and not counted for any row; a board committed with
at least 80% of its baseline cells converged); updates, budgets and code versions."""
from __future__ import annotations

import pytest

from uwbench.leaderboard import board as board_mod
from uwbench.leaderboard import render as board_render
from uwbench.report.verdicts.judge import stats

from tests.leaderboard.boards import (BASELINES, D_HIGH, D_LOW, T, curve_rows, fixture_board_groups, flat, rising,
                                      run_rows, snapshot)


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


# ---- updates, budgets and versions ----


def test_a_run_still_going_counts_for_neither_the_boards_updates_nor_its_cells():
    """A board previewed mid-sweep: the run in flight has fewer updates and is not finished."""
    going = [dict(r, status="running", steps=150) for r in run_rows("dnc_uw", "copy", D_LOW, [60])]
    board = board_mod.build(snapshot(*fixture_board_groups(), (going, curve_rows(going, steps=150))))
    assert board.steps == 400 and board.seeds == 3
    assert board.row("dnc_uw").cells[board_mod.Position("copy", T, D_LOW)].n == 3


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
