"""Board fixtures shared by the leaderboard tests: snapshots written the way `uwbench leaderboard` writes one
(runs and curves of rows at two positions of the copy task), and a fixture board."""
from __future__ import annotations

import os

from uwbench.snapshot import Snapshot, curves_text, runs_text

from tests.helpers import ROOT

SUITE = os.path.join(ROOT, "studies", "leaderboard.yaml")

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


def fixture_board_groups() -> list:
    return [flat("dnc", "copy", D_LOW, [50, 51, 49], cpu=2.0), flat("dnc_uw", "copy", D_LOW, [80, 81, 79]),
            flat("dnc_mine", "copy", D_LOW, [85, 86, 84], cpu=1.5),
            rising("dnc_mine", "copy", D_HIGH, [90, 91, 89]), flat("dnc_uw", "copy", D_HIGH, [70, 72, 71])]


def fixture_board() -> Snapshot:
    """Baselines (the DNC and DNC+UW) and a new row at Copy 33% and 50%; the DNC has no cell at 50%, so that
    column is not counted (3 of 4 baseline cells converged) and the new row's cell there is rising."""
    return snapshot(*fixture_board_groups())
