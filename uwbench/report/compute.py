"""What a study's runs cost: core-hours, GPU-hours, updates and seeds (the report's compute line)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

import pandas as pd

from uwbench.report import tables


THREAD_COLUMNS = ("threads", "torch_threads")  # read when the snapshot records a thread count


@dataclass
class Compute:
    core_hours: float
    gpu_hours: float
    n_runs: int
    n_timed: int
    n_trials: int
    n_finals: int
    updates: List[int]
    seeds: List[int]
    seeds_per_cell: int
    threads_recorded: bool

    def text(self) -> str:
        parts = [f"{self.core_hours:.2f} CPU core-hours" + (f" and {self.gpu_hours:.2f} GPU-hours" if self.gpu_hours else "")
                 + f" over {_count(self.n_runs, 'run')} ({_count(self.n_trials, 'search trial')}, "
                 f"{_count(self.n_finals, 'final run')}; {self.n_timed} with recorded times): training plus "
                 "evaluation wall time"
                 + (" × each run's threads" if self.threads_recorded else
                    " × 1 thread per CPU run (the trainer's CPU default; runs.csv records no thread count)")]
        if self.updates:
            lo, hi = self.updates[0], self.updates[-1]
            parts.append(f"{lo:,} updates per final run" if lo == hi else f"{lo:,}-{hi:,} updates per final run")
        if self.seeds:
            parts.append(f"final seeds {', '.join(str(s) for s in self.seeds)} (up to {self.seeds_per_cell} per cell)")
        return "; ".join(parts) + "."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def compute(runs: pd.DataFrame, curves: pd.DataFrame) -> Compute:
    """Core-hours (training + evaluation seconds × threads, CPU runs; GPU runs as GPU-hours), updates per
    final run (the last step of its learning curve) and the final seeds."""
    if len(runs) == 0:
        return Compute(0.0, 0.0, 0, 0, 0, 0, [], [], 0, False)
    secs = runs["train_seconds"].fillna(0.0).astype(float) + runs["eval_seconds"].fillna(0.0).astype(float)
    timed = (runs["train_seconds"].notna() | runs["eval_seconds"].notna())
    col = next((c for c in THREAD_COLUMNS if c in runs.columns and runs[c].notna().any()), None)
    threads = runs[col].astype(float).fillna(1.0) if col else pd.Series(1.0, index=runs.index)
    gpu = runs["device"].map(lambda d: isinstance(d, str) and d.startswith("cuda"))
    core_h = float((secs * threads)[timed & ~gpu].sum()) / 3600.0
    gpu_h = float(secs[timed & gpu].sum()) / 3600.0
    finals = runs[runs["role"] == "final"]
    updates: List[int] = []
    if len(curves) and len(finals):
        mine = curves[curves["run_id"].isin(set(finals["run_id"]))]
        if len(mine):
            updates = sorted({int(v) for v in mine.groupby("run_id")["step"].max()})
    done = finals[finals["status"] == "finished"]
    seeds = sorted({int(s) for s in done["seed"] if tables._isnum(s)})
    per_cell = int(done.groupby("cell")["seed"].nunique().max()) if len(done) else 0
    return Compute(core_h, gpu_h, len(runs), int(timed.sum()), int((runs["role"] == "trial").sum()), len(finals),
                   updates, seeds, per_cell, col is not None)


