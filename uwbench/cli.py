"""The ``uwbench`` command: thin dispatch to ``uwbench/commands/<name>.py``.

Each command module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``,
and imports heavy libraries (torch, mlflow, optuna, ray) only inside ``run`` so that
``uwbench --help`` stays instant.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

# Order is the order shown by `uwbench --help`.
COMMANDS = ("demo", "ls", "train", "params", "validate", "sweep", "report", "leaderboard", "theory", "bench",
            "data")


def _available_commands():
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"uwbench.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"uwbench.commands.{name}":
                continue  # command not built yet
            raise
        yield name, module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="uwbench",
        description="Benchmark and sweep memory-augmented neural networks with uniform writing "
        "(Le, Tran & Venkatesh, ICLR 2019).",
    )
    from uwbench import __version__

    parser.add_argument("--version", action="version", version=f"uwbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _available_commands():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    from uwbench.errors import UserError

    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        print(f"uwbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"uwbench {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
