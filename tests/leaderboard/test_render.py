"""The board's files (``uwbench/leaderboard/render.py``): every committed board, and a fixture board, rebuilds
from its runs.csv and curves.csv with no difference."""
from __future__ import annotations

import glob
import os
import shutil

import pytest

from uwbench.leaderboard import board as board_mod
from uwbench.leaderboard import render as board_render
from uwbench.snapshot import Snapshot

from tests.helpers import ROOT
from tests.leaderboard.boards import fixture_board


# ---- a board rebuilds from its snapshot alone ----


COMMITTED_BOARDS = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(ROOT, "reports", "*", "board.md")))


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
