"""The GPU section of ``uwbench bench``: training updates per second on CUDA, per execution path and
batch size, and how many trials can share one GPU.

Each figure comes from the training loop itself (``uwbench.training.loop.train``: sampling, forward,
loss, backward, clipping, Adam), a regular DNC at the paper's Table 1 sizes on copy:

- ``paths``: for batch 64 and 256, the eager path, the compiled steps (each kind of step captured as
  a CUDA graph, ``mode="reduce-overhead"``) and the whole sequence captured (``train.cuda_graph``):
  steady-state updates per second (the first update, with its compilation or capture, is given
  apart) and the peak GPU memory of the run;
- ``sharing``: k trials started together as separate processes on the one GPU (k = 1, 2, 4, 8), each
  on the default path at batch 64: the sum of their updates per second, and each trial's own. The
  sum stops growing where the GPU is full; that k is how many trials a sweep should put on it
  (``--workers`` with ``resources.gpus_per_trial`` 1/k under Ray, or k workers on one visible device).

Without a CUDA device the section records why it was skipped and measures nothing.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

GPU_BATCHES = (64, 256)
GPU_PATHS = {  # path -> its train settings
    "eager": {"cuda_graph": False, "compile": False},
    "compiled": {"cuda_graph": False, "compile": True},
    "cuda_graph": {"cuda_graph": True, "compile": False},
}
SHARING = (1, 2, 4, 8)
GPU_UPDATES = {"quick": 20, "default": 300, "full": 1000}  # timed updates per run (after the first)

_WORKER = ("import json, sys\n"
           "from uwbench.training.loop import train\n"
           "r = train(json.loads(sys.argv[1]), progress=False)\n"
           "print('RESULT ' + json.dumps({'status': r.status, 'path': r.path, 'seconds_per_100': r.seconds_per_100, "
           "'error': r.error}))\n")


def unavailable_reason() -> Optional[str]:
    import torch

    return None if torch.cuda.is_available() else "no CUDA GPU on this machine (torch.cuda.is_available() is False)"


def run_config(cfg: Dict[str, Any], batch: int, updates: int, settings: Dict[str, Any]) -> Dict[str, Any]:
    """The training run of one measurement: ``updates`` timed updates plus the first, no evaluation
    until the end."""
    return {"task": {"name": "copy", "seq_len": cfg["seq_len"], "test_size": batch},
            "model": {"name": "dnc", "hidden_size": cfg["hidden"], "memory_size": cfg["memory_size"],
                      "word_size": cfg["word_size"], "read_heads": cfg["read_heads"]},
            "train": {"steps": updates + 1, "batch_size": batch, "eval_every": updates + 1, "eval_batches": 1,
                      "device": "cuda", "checkpoint_every": 0, **settings}}


def _updates_per_s(seconds_per_100: Optional[float]) -> Optional[float]:
    return None if not seconds_per_100 else round(100.0 / seconds_per_100, 1)


def paths(cfg: Dict[str, Any], updates: int, log=print) -> List[Dict[str, Any]]:
    import torch

    from uwbench.training.loop import train

    rows = []
    for batch in GPU_BATCHES:
        for name, settings in GPU_PATHS.items():
            log(f"gpu: {name} at batch {batch} ({updates} updates)")
            torch.cuda.reset_peak_memory_stats()
            res = train(run_config(cfg, batch, updates, settings), progress=False)
            rows.append({"batch": batch, "path": res.path, "status": res.status, "error": res.error,
                         "updates_per_s": _updates_per_s(res.seconds_per_100),
                         "first_update_s": None if res.first_update_seconds is None
                         else round(res.first_update_seconds, 2),
                         "peak_memory_mb": round(torch.cuda.max_memory_allocated() / 2 ** 20, 1)})
    return rows


def sharing(cfg: Dict[str, Any], updates: int, log=print) -> List[Dict[str, Any]]:
    """k trials as k processes started together on the one GPU, for each k in ``SHARING``."""
    run_cfg = json.dumps(run_config(cfg, GPU_BATCHES[0], updates, {}))
    rows = []
    for k in SHARING:
        log(f"gpu: {k} trial(s) sharing the GPU")
        started = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", _WORKER, run_cfg], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
                 for _ in range(k)]
        results, errors = [], []
        for proc in procs:
            output, _ = proc.communicate()
            lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                errors.append(" | ".join(output.strip().splitlines()[-3:]))
                continue
            results.append(json.loads(lines[-1][len("RESULT "):]))
        each = [_updates_per_s(r["seconds_per_100"]) for r in results]
        row = {"trials": k, "finished": sum(r["status"] == "finished" for r in results),
               "paths": sorted({r["path"] for r in results}), "updates_per_s_each": each,
               "updates_per_s_total": round(sum(u for u in each if u), 1),
               "wall_s": round(time.perf_counter() - started, 1)}
        if errors:
            row["errors"] = errors
        rows.append(row)
    return rows


def gpu(cfg: Dict[str, Any], mode: str, log=print) -> Dict[str, Any]:
    """The section's result: ``{"skipped": why}`` without a CUDA device."""
    reason = unavailable_reason()
    if reason is not None:
        log(f"gpu: skipped, {reason}")
        return {"skipped": reason}
    import torch

    updates = GPU_UPDATES[mode]
    props = torch.cuda.get_device_properties(0)
    return {"config": {**cfg, "task": "copy", "model": "dnc", "updates": updates},
            "device": {"name": props.name, "memory_gb": round(props.total_memory / 2 ** 30, 1)},
            "paths": paths(cfg, updates, log), "sharing": sharing(cfg, updates, log)}
