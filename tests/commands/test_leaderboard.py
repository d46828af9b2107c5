"""`uwbench leaderboard` (``uwbench/commands/leaderboard.py``): its options (`--show`, `--min-converged`, what
would make an unfair row is refused before any run), and end to end in subprocesses: the contract check refuses
a broken plugin before any run; a toy plugin writer is swept at the suite's smoke profile into a real MLflow
store and gets its row against baselines from a runs.csv fixture."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from uwbench.leaderboard import render as board_render

from tests.leaderboard.boards import D_LOW, SUITE, curve_rows, fixture_board, run_rows, snapshot


# ---- the command's options ----


def test_min_converged_is_a_share_and_only_for_recording_baselines(capsys):
    from uwbench.cli import main

    assert main(["leaderboard", "--show", "--min-converged", "0.5"]) == 2
    assert "--min-converged applies to --record-baselines alone" in capsys.readouterr().err
    assert main(["leaderboard", "--record-baselines", "--min-converged", "80"]) == 2
    assert "--min-converged 80: give a share between 0 and 1" in capsys.readouterr().err


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
    assert mine["vs_uniform_not_testable_at_this_budget"] == 0
    cells = pd.read_csv(out / "cells.csv").set_index("row")
    # a CPU-time ratio where both rows' cell had runs with a core to themselves (a loaded machine may give none)
    timed = cells.loc[["dnc_toy_every2", "dnc"], "cpu_seconds_per_100"].notna().all()
    assert (mine["cpu_time_vs_regular"] > 0) if timed else pd.isna(mine["cpu_time_vs_regular"])
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
