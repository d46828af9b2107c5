"""The leaderboard's steps (``uwbench/leaderboard/steps.py``): baselines swept on two machines make one board
(and the 80% rule refuses it), a new row must be made like the baselines and its study is the suite with one
group, and a board folder among the reports (the index links it; no study report replaces it)."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.helpers import ROOT
from tests.leaderboard.boards import D_HIGH, D_LOW, SUITE, fixture_board, flat, snapshot


# ---- recording the baselines, on one machine or two ----


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


# ---- a new row: made like the baselines, its study the suite with one group ----


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


# ---- a board folder among the reports ----


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
