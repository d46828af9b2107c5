"""Where the native DNC iteration's time goes: process CPU time per kind of call, by wrapping the calls.

    PYTHONPATH=. python benchmarks/native_breakdown.py [iterations]

The regular DNC at the headline setting (copy T = 50, batch 64, paper sizes, 1 thread) on the native
path. Each kernel entry point (``_Plan.fn``), each ``torch.mm``/``addmm`` the driver makes, the node's
forward and backward and its weight gradients are wrapped with process-CPU timers; the wrappers cost
about 1 µs per call, so the wrapped iteration is slower than the bench's (benchmarks/README.md, "The
native path's own matrix products").
"""
from __future__ import annotations

import collections
import sys
import time

import torch

import uwbench.models.native as nat
from uwbench.bench.workloads import PAPER, make_batch, make_task, memory_values, uwbench_workload

ACC: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()


def timed(name, fn):
    def run(*args, **kwargs):
        start = time.process_time_ns()
        out = fn(*args, **kwargs)
        key = name(args) if callable(name) else name
        ACC[key] += time.process_time_ns() - start
        CALLS[key] += 1
        return out
    return run


def shapes(args) -> str:
    return " x ".join(str(tuple(a.shape)) for a in args if isinstance(a, torch.Tensor))


def main(n: int = 30) -> None:
    torch.set_num_threads(1)
    task = make_task("copy", PAPER["seq_len"])
    batch = make_batch(task, PAPER["batch"])
    work = uwbench_workload("dnc", task, batch, {**memory_values(PAPER), "writer": "regular"}, native=True)
    for _ in range(3):
        work.run()
    fn = nat._Plan.fn
    nat._Plan.fn = lambda self, name: timed(f"kernel {name}", fn(self, name))
    nat.torch.mm = timed(lambda a: f"torch.mm {shapes(a)}", torch.mm)  # the driver's module-level torch
    nat._Sequence.forward = staticmethod(timed("node forward (all of it)", nat._Sequence.forward))
    nat._Sequence.backward = staticmethod(timed("node backward (all of it)", nat._Sequence.backward))
    nat._weight_grads = timed("weight gradients (in the backward)", nat._weight_grads)
    start = time.process_time_ns()
    for _ in range(n):
        work.run()
    print(f"iteration, wrapped: {(time.process_time_ns() - start) / n / 1e6:.2f} ms CPU")
    for key, ns in sorted(ACC.items(), key=lambda kv: -kv[1]):
        print(f"{key:50s} {ns / n / 1e6:7.2f} ms  {CALLS[key] / n:5.0f} calls")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
