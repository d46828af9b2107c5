"""The writers' time cut on the native path, each candidate timed in blocks of back-to-back iterations.

    PYTHONPATH=. python benchmarks/writer_cut_blocks.py [--tasks copy double add] [--block 11] [--json PATH]

``uwbench bench --sections writers`` interleaves the candidates one iteration at a time, which keeps
load from other processes fair but makes every iteration start with caches full of another model's
buffers (each native model keeps tens of MB of workspace). Here each candidate (regular, UW, CUW, CUW's
schedule without its attention, and the bound: a DNC whose encoder never touches the memory) runs a
block of iterations back to back, the
blocks in the order A B C D, then D C B A, so drift hits all alike; the figure is the median CPU time
of a candidate's iterations over both blocks. Headline setting (T = 50, D = 4, batch 64, 1 thread).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=["copy", "double", "add"])
    p.add_argument("--block", type=int, default=11, help="timed iterations per block (after 3 untimed)")
    p.add_argument("--json", help="write the result here")
    args = p.parse_args(argv)

    import torch

    from uwbench.bench import sections
    from uwbench.bench.workloads import (CUW_SCHEDULE, NO_ENCODER_MEMORY, PAPER, make_batch, make_task,
                                         memory_values, uwbench_workload)

    torch.set_num_threads(1)
    kinds = ("regular", "uniform", "cached_uniform", CUW_SCHEDULE, NO_ENCODER_MEMORY)
    rows = []
    for task_name in args.tasks:
        task = make_task(task_name, PAPER["seq_len"])
        batch = make_batch(task, PAPER["batch"])
        work = {k: uwbench_workload("dnc", task, batch, {**memory_values(PAPER), "writer": k}, native=True)
                for k in kinds}
        times = {k: [] for k in kinds}
        for order in (kinds, kinds[::-1]):
            for k in order:
                for _ in range(3):
                    work[k].run()
                for _ in range(args.block):
                    c0 = time.process_time()
                    work[k].run()
                    times[k].append(time.process_time() - c0)
        ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        te = batch.inputs.shape[1]
        share = 1 - ms[NO_ENCODER_MEMORY] / ms["regular"]
        row = {"task": task_name, "ms": {k: round(v, 2) for k, v in ms.items()}, "encoder_memory_share": round(share, 3),
               "reduction": {}, "expected_reduction": {}}
        for k in ("uniform", "cached_uniform", CUW_SCHEDULE):
            held = 1 - sum(work[k].model.writer.schedule(te)) / te
            row["reduction"][k] = round(1 - ms[k] / ms["regular"], 3)
            row["expected_reduction"][k] = round(share * held, 3)
        row["attention_ms"] = round(ms["cached_uniform"] - ms[CUW_SCHEDULE], 2)
        rows.append(row)
        print(f"{task_name}: regular {ms['regular']:.1f} ms; " + "; ".join(
            f"{k} {ms[k]:.1f} ms: cut {row['reduction'][k]:.0%} ({row['expected_reduction'][k]:.0%})"
            for k in ("uniform", "cached_uniform", CUW_SCHEDULE))
              + f"; no encoder memory {ms[NO_ENCODER_MEMORY]:.1f} ms: share "
              f"{share:.0%}", flush=True)
    out = {"rows": rows, "machine": sections.machine_info(), "load_average": sections.load_average(),
           "method": __doc__.strip().splitlines()[0]}
    if args.json:
        sections.write_json(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
