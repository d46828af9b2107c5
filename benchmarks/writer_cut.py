"""UW's and CUW's time cut per task at a chosen size, against the share of memory work they can skip.

    PYTHONPATH=. python benchmarks/writer_cut.py [--seq-len 30] [--memory-size 2] [--tasks copy reverse add max]
                                                 [--compile] [--repeats 7] [--json PATH]

The ``writers`` section of ``uwbench bench`` (regular, UW, CUW and the bound, a DNC whose encoder never
touches the memory, interleaved in one process; one thread; CPU ms per iteration) at the size of the
paper studies' cpu profiles (T = 30, D = 2) instead of the headline's (T = 50, D = 4), on the tasks of
Tables 1-2. It answers one question: is the time cut a study measures (seconds per 100 updates of
whole training runs, two runs sharing two cores) the cut of one iteration, or the machine's noise?
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq-len", type=int, default=30)
    p.add_argument("--memory-size", type=int, default=2)
    p.add_argument("--tasks", nargs="+", default=["copy", "reverse", "add", "max"])
    p.add_argument("--compile", action="store_true", help="compile each candidate's step (the default path of a long run)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json", help="write the result here")
    args = p.parse_args(argv)

    import torch

    from uwbench.bench import sections
    from uwbench.bench.workloads import PAPER

    torch.set_num_threads(1)
    cfg = {**PAPER, "seq_len": args.seq_len, "memory_size": args.memory_size}
    out = sections.writers(cfg, args.repeats, 2, tasks=args.tasks, compile=args.compile, log=print)
    out["machine"] = sections.machine_info()
    out["load_average"] = sections.load_average()
    print(f"\nT = {args.seq_len}, D = {args.memory_size}, {'compiled' if args.compile else 'eager'}, CPU ms per "
          "iteration (median of interleaved rounds); cut = 1 - t / t(regular); bound = the encoder's memory share "
          "x the held fraction of the encoder")
    print("| model | task | steps (enc + dec) | regular | UW | CUW | UW cut (bound) | CUW cut (bound) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for row in out["rows"]:
        ms, red, exp = row["ms"], row["reduction"], row["expected_reduction"]

        def cut(k):
            return f"{100 * red[k]:.0f}% ({100 * exp[k]:.0f}%)" if k in red else "-"

        print(f"| {row['model']} | {row['task']} | {row['encoder_steps']} + {row['decoder_steps']} | "
              f"{ms['regular']:.1f} | {ms.get('uniform', float('nan')):.1f} | "
              f"{ms.get('cached_uniform', float('nan')):.1f} | {cut('uniform')} | {cut('cached_uniform')} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
