"""A run that shared its CPU core while it trained (CPU time below the floor share of its wall time) spends
more CPU time per update, so its time is not its writer's: the summary leaves it out of the CPU figures,
the time table counts it and says so, a reduction with no timed run on a side is blank, and a time
comparison with fewer than two timed runs on a side is not testable on shared cores."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from uwbench import snapshot
from uwbench.report.analysis import cores
from uwbench.report.analysis.summary import cpu_recorded, summarize
from uwbench.report.analysis.timing import time_reductions
from uwbench.report.rendering.tables import time_table
from uwbench.report.verdicts import judge

from tests.report.test_report import FIXTURE, fixture_view

TIME_CLAIM = next(c for c in judge.CLAIMS if c.id == "uw-cuw-cut-time")


def _runs() -> pd.DataFrame:
    """The report fixture's runs, every one a one-thread CPU run with a core to itself (wall = CPU time)."""
    runs = snapshot.Snapshot.from_dir(FIXTURE).runs.copy()
    runs["device"], runs["torch_threads"] = "cpu", 1
    runs["mean_cpu_seconds_per_100"] = pd.to_numeric(runs["mean_seconds_per_100"], errors="coerce") * 0.99
    return runs


def _finals(runs: pd.DataFrame, cell: str) -> pd.Series:
    return (runs["cell"] == cell) & (runs["role"] == "final") & (runs["status"] == "finished")


def _share_out(runs: pd.DataFrame, where: pd.Series, share: float = 0.6, cost: float = 1.5) -> None:
    """The runs ``where`` took turns on a core: wall time over CPU time is 1 / ``share``, and their CPU
    time ``cost`` times what it was."""
    cpu = runs.loc[where, "mean_cpu_seconds_per_100"] * cost
    runs.loc[where, "mean_cpu_seconds_per_100"] = cpu
    runs.loc[where, "mean_seconds_per_100"] = cpu / share


def _timed_pair(summary: pd.DataFrame):
    """A uniform cell with a regular twin that both finished at least two final runs."""
    red = time_reductions(summary)
    done = summary.set_index("cell")
    for _, r in red.iterrows():
        if done.loc[r["cell"], "n"] >= 2 and done.loc[r["regular_cell"], "n"] >= 2:
            return r["cell"], r["regular_cell"]
    pytest.skip("the fixture has no uniform cell with a regular twin of two seeds")


def test_the_share_is_judged_for_one_thread_cpu_runs_only():
    runs = pd.DataFrame({"mean_cpu_seconds_per_100": [9.9, 6.0, 6.0, 6.0, None],
                         "mean_seconds_per_100": [10.0, 10.0, 10.0, 10.0, 10.0],
                         "torch_threads": [1, 1, 2, 1, 1], "device": ["cpu", "cpu", "cpu", "cuda", "cpu"]})
    share = cores.core_share(runs)
    assert share[0] == pytest.approx(0.99) and share[1] == pytest.approx(0.6)
    assert share[2:].isna().all()  # two threads, a GPU run, no CPU time: unknown
    assert list(cores.shared_core(runs)) == [False, True, False, False, False]  # unknown is never left out
    assert cores.core_share(runs.drop(columns=["torch_threads"])).isna().all()  # a snapshot without the column


def test_a_run_that_shared_its_core_is_left_out_of_the_cpu_figures():
    runs = _runs()
    uw, reg = _timed_pair(summarize(fixture_view(), runs))
    where = _finals(runs, reg)
    before = runs.loc[where, "mean_cpu_seconds_per_100"].to_numpy(dtype=float)
    first = runs.index[where][0]
    _share_out(runs, runs.index == first)
    row = summarize(fixture_view(), runs).set_index("cell").loc[reg]
    assert row["n_shared_core"] == 1 and row["n"] == len(before)  # still counted for accuracy
    assert row["cpu100_mean"] == pytest.approx(float(np.mean(before[1:])))
    assert sorted(row["cpu_samples"]) == pytest.approx(sorted(before[1:]))
    table = time_table(summarize(fixture_view(), runs), runs)
    assert "CPU-timed n" in table.columns
    line = next(r for r in table.csv_rows if r[0] == reg)
    assert line[table.csv_columns.index("n_shared_core")] == 1
    assert any("1 of" in n and "shared their core" in n for n in table.notes)


def test_with_no_timed_run_on_a_side_the_reduction_is_blank_and_the_claim_not_testable():
    runs = _runs()
    uw, reg = _timed_pair(summarize(fixture_view(), runs))
    ok = summarize(fixture_view(), runs)
    assert not time_table(ok, runs).columns.count("CPU-timed n")  # every run had its core: no column, no note
    base = judge.evaluate(TIME_CLAIM, ok, "accuracy", {})
    assert all(c.verdict != judge.NOT_TIMED for c in base.comparisons)
    _share_out(runs, _finals(runs, reg))  # every final run of the regular twin shared its core
    s = summarize(fixture_view(), runs)
    red = time_reductions(s).set_index("cell")
    assert red.loc[uw, "basis"] == "cpu" and red.loc[uw, "reduction"] is None  # not the wall figure instead
    result = judge.evaluate(TIME_CLAIM, s, "accuracy", {})
    mine = [c for c in result.comparisons if c.loser.n == 0 and c.loser.shared]
    assert mine and all(c.verdict == judge.NOT_TIMED for c in mine)
    assert "had a core to themselves" in mine[0].reason
    assert result.verdict in (judge.NO, judge.NOT_TESTABLE, judge.NOT_TIMED)
    assert judge.combine([judge.YES, judge.NOT_TIMED]) == judge.NOT_TIMED
    assert judge.combine([judge.NOT_TIMED, judge.NO]) == judge.NO


def test_one_rule_says_whether_a_cell_recorded_cpu_time():
    """The time table, the reductions and the verdicts ask one question of a cell: some run timed alone, or
    every run that recorded CPU time shared its core; a snapshot from before the CPU column has neither."""
    assert cpu_recorded({"cpu_samples": (6.1, 6.3), "n_shared_core": 0})
    assert cpu_recorded({"cpu_samples": (), "n_shared_core": 3})
    assert not cpu_recorded({"cpu_samples": (), "n_shared_core": 0})
    assert not cpu_recorded({"cpu_samples": float("nan"), "n_shared_core": float("nan")})
    runs = snapshot.Snapshot.from_dir(FIXTURE).runs.drop(columns=["mean_cpu_seconds_per_100"])
    old = summarize(fixture_view(), runs)  # no CPU column at all: wall seconds everywhere
    assert not any(cpu_recorded(r) for _, r in old.iterrows())
    assert set(time_reductions(old)["basis"]) <= {"wall"}
    assert "CPU s / 100" not in time_table(old, runs).columns


def test_the_reports_floor_is_where_committed_runs_stop_costing_more():
    """The floor is read from the measured groups (benchmarks/core_share.py on the committed reports): a
    group of runs above it costs within 5% of a core to itself on average, and some group below costs more."""
    from benchmarks import core_share

    root = os.path.join(os.path.dirname(__file__), "..", "..", "..", "reports")
    paths = [os.path.join(dp, "runs.csv") for dp, _, files in os.walk(root) if "runs.csv" in files]
    frame = core_share.ratios(paths)
    if not len(frame):
        pytest.skip("no committed report has one-thread CPU runs")
    groups = core_share.groups(frame)
    above = [g for g in groups if g["share_from"] >= cores.CORE_SHARE_FLOOR and g["runs"] >= 5]
    below = [g for g in groups if g["share_below"] <= cores.CORE_SHARE_FLOOR and g["runs"] >= 5]
    assert above and all(g["mean_ratio"] < 1.05 for g in above)
    assert below and max(g["mean_ratio"] for g in below) > 1.05
