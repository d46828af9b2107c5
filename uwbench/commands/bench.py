"""``uwbench bench``: speed and memory benchmarks against torch.nn.LSTM and PyPI dnc (benchmarks/README.md).

    uwbench bench                 the paper's configuration: headline table, writers, trainer overhead,
                                  the default `uwbench train` end to end against the eager path,
                                  scaling on a small grid (about 25 minutes on 2 cores)
    uwbench bench --quick         a CI-sized run that exercises every section (numbers mean little)
    uwbench bench --full          adds the scaling table up to D = 256 and T = 1000 (much longer)
    uwbench bench --refresh-docs  times nothing: rewrites benchmarks/README.md's result tables from the
                                  committed results (``uwbench.bench.readme``)

Prints markdown tables and writes the JSON result under ``benchmarks/results/`` (``--out``); a result
written there also rewrites benchmarks/README.md's result tables. torch is
imported inside ``run`` so ``uwbench --help`` stays instant.
"""
from __future__ import annotations

from uwbench.bench.sections import SECTIONS  # imports no torch
from uwbench.errors import UserError

HELP = "benchmark the models' speed and memory against torch.nn.LSTM and PyPI dnc"

DEFAULT_OUT = "benchmarks/results"


def add_arguments(p) -> None:
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="CI-sized configuration (checks the machinery)")
    size.add_argument("--full", action="store_true", help="scaling up to D=256 and T=1000 (long)")
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                   help="which sections to run (default: all)")
    p.add_argument("--no-compile", dest="compile", action="store_false",
                   help="leave out the torch.compile'd candidates (they cost minutes of compilation)")
    p.add_argument("--repeats", type=int, help="timed rounds per table (default 7; 5 with --quick; the population "
                   "section 3, 2 with --quick)")
    p.add_argument("--population-sizes", type=int, nargs="+", metavar="K",
                   help="the population sizes K the population section measures (default 1 2 4 8 16 64 on a CPU, "
                        "up to 256 on a GPU)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"folder for the JSON result (default {DEFAULT_OUT})")
    p.add_argument("--name", help="file name of the JSON result (default bench-<date>-<mode>.json)")
    p.add_argument("--no-write", action="store_true", help="print the tables only")
    p.add_argument("--refresh-docs", action="store_true",
                   help="time nothing: rewrite benchmarks/README.md's result tables from benchmarks/results/")


def _refresh_docs() -> None:
    from uwbench.bench import readme

    path = readme.refresh()
    print(f"rewrote the result tables of {path}" if path else f"{readme.README}: the result tables are current")


def run(args) -> int:
    import os

    if args.refresh_docs:
        _refresh_docs()
        return 0
    from uwbench.spec.plugins import import_plugins

    import_plugins()  # $UWBENCH_PLUGINS: extra tasks, models, writers, as in `uwbench sweep`
    import sys

    from uwbench.bench import format_tables, run_benchmarks, write_result

    if args.repeats is not None and args.repeats < 1:
        raise UserError(f"`--repeats >= 1` must hold, got {args.repeats}")
    mode = "quick" if args.quick else "full" if args.full else "default"

    def log(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    if args.population_sizes and min(args.population_sizes) < 1:
        raise UserError(f"`--population-sizes` must all be at least 1, got {args.population_sizes}")
    result = run_benchmarks(mode, args.sections, compile=args.compile, repeats=args.repeats, log=log,
                            population_sizes=args.population_sizes)
    print(format_tables(result))
    if not args.no_write:
        path = write_result(result, args.out, args.name)
        print(f"\nwrote {path}")
        if "population" in result["sections"]:
            from uwbench.bench.population import figure

            print(f"wrote {figure(result['sections']['population'], os.path.splitext(path)[0] + '-population.png')}")
        if os.path.abspath(args.out) == os.path.abspath(DEFAULT_OUT):
            _refresh_docs()
    return 0
