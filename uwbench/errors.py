"""Errors that reach the user as one clear line (the CLI prints them without a traceback).

``one_line(exc)`` is the whole rule: the message the ``uwbench`` command prints for an exception and
its exit code. A ``UserError`` (a bad setting, a missing file: its message already says what is wrong and
the fix) is printed as it is, exit code 2. A known condition of the machine (out of memory, a file the
system refuses, a damaged database) gets its fix added (``KNOWN``, one entry each), exit code 2. Anything
else is unexpected: its type and first line, with how to see the traceback (``--debug`` or
``UWBENCH_DEBUG=1``), exit code 1.
"""
from __future__ import annotations

import re
from typing import Callable, List, Optional, Tuple

from uwbench.config import ConfigError
from uwbench.registry import UnknownNameError


class DataNotFoundError(FileNotFoundError):
    """A dataset file is missing; the message says what to place where."""


# Everything the CLI reports as "error: <message>" (exit code 2) instead of a traceback.
UserError = (ConfigError, UnknownNameError, DataNotFoundError, ValueError, FileNotFoundError)

USER_EXIT = 2  # the input or the machine must change; the message says how
UNEXPECTED_EXIT = 1  # not foreseen: the traceback (with --debug) says where
DEBUG_HINT = "run again with --debug (or UWBENCH_DEBUG=1) for the traceback"


def first_line(text: str) -> str:
    """The first non-empty line of ``text`` (libraries' messages often append paragraphs of background)."""
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def first_sentence(text: str) -> str:
    """The first sentence of ``text``'s first line (MLflow's messages go on for a paragraph)."""
    return re.split(r"(?<=[\w)'\"])\. (?=[A-Z])", first_line(text), maxsplit=1)[0].rstrip(".")


def _out_of_memory(exc: BaseException) -> Optional[str]:
    text = str(exc)
    oom = (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
           or (isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)))
    if not oom:
        return None
    return (f"out of memory ({first_line(text) or type(exc).__name__}); lower the batch size, the sequence length "
            "or the memory size (--batch-size, --seq-len, --memory-size, or the study's settings)")


def _os_error(exc: BaseException) -> Optional[str]:
    if not isinstance(exc, OSError) or exc.strerror is None:
        return None
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror}{where}; check that the path exists and that this user may write there"


# Known conditions of the machine: each turns an exception into its one line (None: not this one). A module
# that knows a condition of its own (a damaged MLflow store) adds it with ``@known``.
KNOWN: List[Callable[[BaseException], Optional[str]]] = [_out_of_memory, _os_error]


def known(explain: Callable[[BaseException], Optional[str]]):
    """Register ``explain(exc) -> message or None`` as one more known condition (a decorator)."""
    KNOWN.append(explain)
    return explain


def one_line(exc: BaseException) -> Tuple[str, int]:
    """The message ``uwbench`` prints for ``exc`` (one line) and the exit code."""
    if isinstance(exc, UserError):
        return str(exc), USER_EXIT
    for known in KNOWN:
        message = known(exc)
        if message is not None:
            return message, USER_EXIT
    return f"{type(exc).__name__}: {first_line(str(exc))} ({DEBUG_HINT})", UNEXPECTED_EXIT
