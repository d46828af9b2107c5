"""What a study's runs cost: CPU core-hours, GPU-hours, updates and seeds (the report's compute line).

**CPU core-hours** are the runs' own CPU seconds, everywhere in uwbench: for each CPU run, its CPU seconds
per 100 training updates (``mean_cpu_seconds_per_100``) × its updates / 100. A run's updates are its
``steps``; a search trial's row leaves ``steps`` empty, so there they follow from its timings
(100 × ``train_seconds`` / ``mean_seconds_per_100``). Evaluation is not counted (its CPU time is not
recorded). Wall time × threads (training plus evaluation), what the line gave before runs recorded their CPU
seconds, is shown beside it under that name: on a shared machine it also counts the waiting for a core.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

import pandas as pd

from uwbench.values import is_number


THREAD_COLUMNS = ("threads", "torch_threads")  # read when the snapshot records a thread count
CPU_COLUMN = "mean_cpu_seconds_per_100"


@dataclass
class Compute:
    core_hours: float  # CPU core-hours: the runs' own CPU seconds (module docstring)
    gpu_hours: float
    n_runs: int
    n_timed: int
    n_trials: int
    n_finals: int
    updates: List[int]
    seeds: List[int]
    seeds_per_cell: int
    threads_recorded: bool
    n_cpu: int = 0  # CPU runs whose CPU seconds are recorded (the core-hours are theirs)
    wall_core_hours: float = 0.0  # training plus evaluation wall time × threads, CPU runs

    def text(self) -> str:
        if self.n_cpu:
            first = (f"{self.core_hours:.2f} CPU core-hours: the runs' own CPU seconds in training (CPU s per 100 "
                     f"updates × updates / 100; evaluation not counted), over the {self.n_cpu} of "
                     f"{_count(self.n_runs, 'run')} that recorded them")
        else:
            first = "CPU core-hours not recorded (no run of this snapshot has its CPU seconds)"
        threads = ("each run's threads" if self.threads_recorded else
                   "1 thread per CPU run (the trainer's CPU default; runs.csv records no thread count)")
        parts = [first + (f"; {self.gpu_hours:.2f} GPU-hours" if self.gpu_hours else ""),
                 f"wall time × {threads}, training plus evaluation: {self.wall_core_hours:.2f} core-hours",
                 f"{_count(self.n_runs, 'run')} ({_count(self.n_trials, 'search trial')}, "
                 f"{_count(self.n_finals, 'final run')}; {self.n_timed} with recorded times)"]
        if self.updates:
            lo, hi = self.updates[0], self.updates[-1]
            parts.append(f"{lo:,} updates per final run" if lo == hi else f"{lo:,}-{hi:,} updates per final run")
        if self.seeds:
            parts.append(f"final seeds {', '.join(str(s) for s in self.seeds)} (up to {self.seeds_per_cell} per cell)")
        return "; ".join(parts) + "."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _col(runs: pd.DataFrame, name: str) -> pd.Series:
    if name not in runs.columns:
        return pd.Series(float("nan"), index=runs.index)
    return pd.to_numeric(runs[name], errors="coerce")


def run_updates(runs: pd.DataFrame) -> pd.Series:
    """Each run's training updates: ``steps``, else (a search trial's row) 100 × train seconds / seconds
    per 100 updates; NaN where neither is recorded."""
    steps = _col(runs, "steps")
    sec100 = _col(runs, "mean_seconds_per_100")
    derived = 100.0 * _col(runs, "train_seconds") / sec100.where(sec100 > 0)
    return steps.where(steps.notna(), derived)


def cpu_seconds(runs: pd.DataFrame) -> pd.Series:
    """Each run's own CPU seconds in training (CPU seconds per 100 updates × updates / 100); NaN where the
    run recorded no CPU time."""
    return _col(runs, CPU_COLUMN) * run_updates(runs) / 100.0


def compute(runs: pd.DataFrame, curves: pd.DataFrame) -> Compute:
    """CPU core-hours (the CPU runs' own CPU seconds; module docstring), wall time × threads beside them,
    GPU-hours (GPU runs' training plus evaluation wall time), updates per final run (the last step of its
    learning curve) and the final seeds."""
    if len(runs) == 0:
        return Compute(0.0, 0.0, 0, 0, 0, 0, [], [], 0, False)
    secs = runs["train_seconds"].fillna(0.0).astype(float) + runs["eval_seconds"].fillna(0.0).astype(float)
    timed = (runs["train_seconds"].notna() | runs["eval_seconds"].notna())
    col = next((c for c in THREAD_COLUMNS if c in runs.columns and runs[c].notna().any()), None)
    threads = runs[col].astype(float).fillna(1.0) if col else pd.Series(1.0, index=runs.index)
    gpu = runs["device"].map(lambda d: isinstance(d, str) and d.startswith("cuda"))
    cpu_s = cpu_seconds(runs)[~gpu]
    wall_h = float((secs * threads)[timed & ~gpu].sum()) / 3600.0
    gpu_h = float(secs[timed & gpu].sum()) / 3600.0
    finals = runs[runs["role"] == "final"]
    updates: List[int] = []
    if len(curves) and len(finals):
        mine = curves[curves["run_id"].isin(set(finals["run_id"]))]
        if len(mine):
            updates = sorted({int(v) for v in mine.groupby("run_id")["step"].max()})
    done = finals[finals["status"] == "finished"]
    seeds = sorted({int(s) for s in done["seed"] if is_number(s)})
    per_cell = int(done.groupby("cell")["seed"].nunique().max()) if len(done) else 0
    return Compute(float(cpu_s.sum()) / 3600.0, gpu_h, len(runs), int(timed.sum()),
                   int((runs["role"] == "trial").sum()), len(finals), updates, seeds, per_cell, col is not None,
                   n_cpu=int(cpu_s.notna().sum()), wall_core_hours=wall_h)
