"""Every report committed under reports/ is what `uwbench report` makes of its own runs.csv: rebuilt from
the snapshot alone (runs.csv, curves.csv, traces.csv copied to a fresh folder), every file comes out with
the same bytes, and no committed file is missing from the rebuild or left over by it."""
from __future__ import annotations

import glob
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(ROOT, "reports", "*", "runs.csv"))
                   if not os.path.exists(os.path.join(os.path.dirname(p), "board.md")))  # boards: test_leaderboard.py
INPUTS = ("runs.csv", "curves.csv", "traces.csv")  # the snapshot; everything else is derived from it


def _files(folder):
    return sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f)))


def test_reports_are_committed():
    assert COMMITTED, "reports/ holds no report with a runs.csv"


@pytest.mark.parametrize("folder", COMMITTED, ids=[os.path.basename(f) for f in COMMITTED])
def test_committed_report_rebuilds_from_its_runs_csv(folder, tmp_path):
    from uwbench.cli import main

    study = os.path.basename(folder)
    out = tmp_path / "reports"
    fresh = out / study
    fresh.mkdir(parents=True)
    for name in INPUTS:
        if os.path.exists(os.path.join(folder, name)):
            shutil.copy(os.path.join(folder, name), fresh / name)
    assert main(["report", "--from-csv", str(fresh / "runs.csv"), "--out", str(out),
                 "--studies-dir", os.path.join(ROOT, "studies")]) == 0
    committed, rebuilt = _files(folder), _files(str(fresh))
    assert rebuilt == committed, (sorted(set(committed) - set(rebuilt)), sorted(set(rebuilt) - set(committed)))
    differ = [n for n in committed if (fresh / n).read_bytes() != open(os.path.join(folder, n), "rb").read()]
    assert not differ, f"{study}: these files differ from the committed report: {differ}"
