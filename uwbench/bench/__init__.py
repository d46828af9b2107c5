"""Speed and memory benchmarks (``uwbench bench``; the method is in benchmarks/README.md).

One module per job, results keyed by ids (never by display labels):

    timing.py      the interleaved timing harness (CPU-time and wall medians)
    workloads.py   one training iteration of each model as a closure, with its id and label
    memory.py      peak resident memory of one iteration, one subprocess per point (/proc probes)
    sections.py    the tables: headline, writers, trainer overhead, end to end, scaling; the whole run
    population.py  member-updates per second against the population size, the solo run beside each
    gpu.py         the GPU section: updates per second on CUDA per path and batch size, trials per GPU
    targets.py     the pass/fail targets as data, evaluated from the sections' results
    render.py      Markdown tables of a result
    readme.py      benchmarks/README.md's result tables, from the committed results (nothing timed)

Importing the package is cheap: torch is imported inside the functions.
"""
from __future__ import annotations

from uwbench.bench.render import format_tables
from uwbench.bench.sections import SECTIONS, run_benchmarks, write_result

__all__ = ["SECTIONS", "format_tables", "run_benchmarks", "write_result"]
