"""The ``uwbench`` command: thin dispatch to ``uwbench/commands/<name>.py``.

Each command module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``,
and imports heavy libraries (torch, mlflow, optuna, ray) only inside ``run`` so that
``uwbench --help`` stays instant.

A failing command prints one line, ``uwbench <command>: error: <what is wrong and the fix>``
(``uwbench.errors.one_line``): exit code 2 for a ``UserError`` or a known condition of the machine; any
other exception is a bug, said to be one, exit code 1. The traceback only with ``--debug`` (before or after
the command name) or ``UWBENCH_DEBUG=1``.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

# Order is the order shown by `uwbench --help`.
COMMANDS = ("demo", "ls", "train", "params", "validate", "sweep", "restore", "report", "leaderboard", "theory", "trace",
            "bench", "data")


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
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _available_commands():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        _add_debug(p)
        p.set_defaults(_run=module.run)
    return parser


def _add_debug(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after the command name too (and after a subcommand's name, as in ``theory bound``);
    SUPPRESS keeps the value of a ``--debug`` given earlier."""
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _add_debug(sub)


DEBUG_HELP = "on an error, show the traceback instead of the one-line message (also UWBENCH_DEBUG=1)"


def run() -> None:
    """The ``uwbench`` command: ``main`` on the command line's arguments, then the process ends with its exit
    status, less the interpreter's teardown (``uwbench.shutdown``). An exception ``main`` lets through (none
    should) ends the process the ordinary way, with its traceback."""
    from uwbench.shutdown import exit_now

    exit_now(main())


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        _check_names(args)
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print(f"uwbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError as exc:
        if not _stdout_closed():  # another pipe broke (a child process's): an error like any other
            return _fail(args, exc)
        return _quiet_stdout()
    except Exception as exc:  # noqa: BLE001 - the last resort: any other exception is shown as a bug
        return _fail(args, exc)


def _check_names(args) -> None:
    """Names given on the command line that become a folder: an MLflow experiment's name is its artifact
    folder's (``<store>/artifacts/<name>/``), so it must be one plain name (``uwbench.paths.folder_name``)."""
    experiment = getattr(args, "experiment", None)
    if experiment is not None:
        from uwbench.paths import folder_name

        folder_name(experiment, "--experiment", "its runs' artifacts go to a folder of that name beside the "
                                                "MLflow store: give a plain name such as my_experiment")


SIGPIPE_EXIT = 141  # the shell's exit status for a process ended by SIGPIPE (128 + 13), as `cmd | head` expects


def _fail(args, exc: BaseException) -> int:
    """Print ``exc`` as ``uwbench``'s one-line error (or raise it with --debug) and give the exit code."""
    from uwbench import env
    from uwbench.errors import one_line

    if args.debug or env.debug():
        raise exc
    message, code = one_line(exc)
    print(f"uwbench {args.command}: error: {message}", file=sys.stderr)
    return code


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (``uwbench ... | head``): polling such a pipe's
    writing end reports an error condition (POLLERR) without writing to it."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        events = poller.poll(0)
    except (AttributeError, OSError, ValueError):  # no poll on this platform, or stdout is not a file
        return False
    return any(event & select.POLLERR for _, event in events)


def _quiet_stdout() -> int:
    """The reader of our output left (``| head``): nothing is wrong, so no error message. Standard output is
    pointed at the null device so the interpreter's own flush at exit does not complain either."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return SIGPIPE_EXIT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
