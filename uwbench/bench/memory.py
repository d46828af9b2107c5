"""Peak memory of one training iteration, in a fresh process per point (the scaling tables).

After the model, the batch and a small warm-up iteration exist, the resident-set high-water mark is
reset to the current RSS (``5`` into ``/proc/self/clear_refs``); the figure is VmHWM minus that RSS
over one training iteration. Without ``clear_refs`` it falls back to the growth of ``ru_maxrss``, a
lower bound. Run a point with ``python -m uwbench.bench.memory point JSON``.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any, Dict, Optional, Sequence

from uwbench.bench.timing import interleave
from uwbench.bench.workloads import (NN_LSTM, PYPI_DNC, Workload, make_batch, make_task, nn_lstm_workload,
                                     pypi_dnc_workload, uwbench_workload)


def measure_point(point: Dict[str, Any]) -> Dict[str, Any]:
    """Build the workload, run a small warm-up iteration (batch 2, length 5), then one measured iteration
    for the peak-RSS growth, then ``repeats`` timed iterations. ``point``: impl (ours | ours_compiled |
    pypi_dnc | nn_lstm), model, writer, batch, seq_len, hidden, memory_size, word_size, repeats."""
    import torch

    torch.set_num_threads(1)
    impl = point["impl"]

    def build(batch_size: int, seq_len: int) -> Workload:
        task = make_task("copy", seq_len)
        batch = make_batch(task, batch_size)
        if impl == PYPI_DNC:
            return pypi_dnc_workload(task, batch, point["hidden"], point["memory_size"], point["word_size"])
        if impl == NN_LSTM:
            return nn_lstm_workload(task, batch)
        values = {"hidden_size": point["hidden"], "memory_size": point["memory_size"],
                  "word_size": point["word_size"], "writer": point.get("writer", "regular")}
        return uwbench_workload(point.get("model", "dnc"), task, batch, values, compile=impl == "ours_compiled")

    compiled = impl == "ours_compiled"
    if not compiled:
        build(2, 5).run()  # kernels, thread pools, allocator arenas
    work = build(point["batch"], point["seq_len"])
    base_kb = reset_peak_rss()
    t0 = time.perf_counter()
    work.run()  # compiled: the compilation, whose own memory hides the iteration's (no peak reported)
    first = time.perf_counter() - t0
    peak_kb = peak_rss()
    timing = interleave({"x": work.run}, repeats=point.get("repeats", 3), warmup=1)["x"]
    timing.first_call = first
    growth = None if compiled else round((peak_kb - base_kb) / 1024, 1)
    return {**point, "id": work.id, "label": work.label, "parameters": work.parameters, **timing.as_dict(),
            "peak_rss_growth_mb": growth, "rss_before_mb": round(base_kb / 1024, 1)}


def status_kb(field_name: str) -> Optional[int]:
    """A ``/proc/self/status`` field in KiB (None where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_rss() -> int:
    """Reset the process's resident-set high-water mark to the current RSS (Linux: ``5`` into
    /proc/self/clear_refs) and return the current RSS in KiB, so the next ``peak_rss`` measures from
    here. Without that interface the import-time peak stays, and the growth shown is a lower bound."""
    import resource

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        current = status_kb("VmRSS")
        if current is not None:
            return current
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_rss() -> int:
    """The resident-set high-water mark in KiB (VmHWM; ru_maxrss where /proc is missing)."""
    import resource

    hwm = status_kb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def run_point(point: Dict[str, Any], timeout: float = 1800.0) -> Dict[str, Any]:
    """``measure_point`` in a subprocess (so each point's peak memory is its own)."""
    cmd = [sys.executable, "-m", "uwbench.bench.memory", "point", json.dumps(point)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**point, "error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {**point, "error": " | ".join(tail) or f"exit code {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "point":
        print(json.dumps(measure_point(json.loads(argv[1]))))
        return 0
    print("usage: python -m uwbench.bench.memory point JSON   (use `uwbench bench` for the benchmarks)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1:]))
