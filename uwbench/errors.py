"""Errors that reach the user as one clear line (the CLI prints them without a traceback).

``UserError`` is the base of every error that is the user's to fix (a bad setting, an unknown name, a
missing file, a study or a snapshot that is not valid): its message already says what is wrong and the fix.
The project's error types derive from it (``ConfigError``, ``UnknownNameError``, ``SpecError``,
``SweepError``, ...), and so should a plugin's. It subclasses ``ValueError``, so code that caught a
``ValueError`` for a bad input (a config dataclass's ``__post_init__``, a sweep recording a trial's failure)
goes on catching it; but a plain ``ValueError`` is no longer taken for the user's: it is a bug.

``one_line(exc)`` is the whole rule: the message the ``uwbench`` command prints for an exception and
its exit code. A ``UserError`` is printed as it is, exit code 2. A known condition of the machine (out of
memory, a file the system refuses, a damaged database) gets its fix added (``KNOWN``, one entry each), exit
code 2. Anything else is a bug (of uwbench or of a plugin): its type and first line, said to be a bug, with
how to see the traceback (``--debug`` or ``UWBENCH_DEBUG=1``), exit code 1.

This module sits at the bottom of the package: it imports no other uwbench module (``uwbench.env`` tells it the
folders a run writes, ``WRITTEN_FOLDERS``), so every module may import it.

A fault of the machine around a run (``fault(exc)``: a full disk, a tracking server or a database that does
not answer, a damaged kernel library; ``FAULTS``, one entry each) is not the run's result: a sweep stops on it
with one line that names it and the fix (``MachineFault``), leaves the runs it touched unfinished, and the
same command after the fix runs them. It is found anywhere in the exception's chain (a library's error
raised while handling an ``OSError`` is that ``OSError``'s fault), short of an error raised ``from None``.
"""
from __future__ import annotations

import errno
import os
import re
from typing import Callable, List, Optional, Tuple


class UserError(ValueError):
    """An error the user fixes (a setting, a name, a file): the CLI prints its message as one line, exit code
    2. The message says what is wrong and the fix; it is a ``ValueError`` for the callers that catch one."""


class NotFoundError(UserError, FileNotFoundError):
    """A file or folder the command needs is missing; the message says how to make it or where to put it."""


class DataNotFoundError(NotFoundError):
    """A dataset file is missing; the message says what to place where."""


USER_EXIT = 2  # the input or the machine must change; the message says how
UNEXPECTED_EXIT = 1  # not foreseen: the traceback (with --debug) says where
DEBUG_HINT = "run again with --debug (or UWBENCH_DEBUG=1) for the traceback"
BUG = "a bug in uwbench or a plugin, not an error of the input"  # what an unexpected error is said to be
AGAIN = "then run the same command"  # what every fault's fix ends with: the unfinished runs run then


class MachineFault(Exception):
    """A fault of the machine stopped a run (``fault``); the message names it and the fix. Not a
    ``ValueError``: nothing that records a run's own failure (a bad setting, a crash of the model) takes it
    for one."""


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


# ---- faults of the machine ----

FULL = (errno.ENOSPC, errno.EDQUOT)
FULL_TEXT = ("database or disk is full", "No space left on device", "Disk quota exceeded", "[Errno 28]", "[Errno 122]")


def _chain(exc: BaseException):
    """``exc``, then what it was raised from or while handling, and so on (each once); not past an error
    raised ``from None`` (its message was chosen to replace what it handled)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)


# The folders a run writes, each as a function giving its path (``uwbench.env`` adds the runs folder and the
# checkpoint folder): where a full disk that the system did not name is looked for. Filled from above, so
# that this module imports no other.
WRITTEN_FOLDERS: List[Callable[[], str]] = []


def full_folder(path: Optional[str] = None) -> str:
    """Where the disk is full: ``path`` when the system named it, else the fullest of the folders a run
    writes (``WRITTEN_FOLDERS``: the runs folder, the checkpoint folder), by the free space left on their file
    systems."""
    if path:
        return str(path)
    folders = [where() for where in WRITTEN_FOLDERS] or [os.getcwd()]

    def free(folder: str) -> float:
        while folder and not os.path.exists(folder):
            folder = os.path.dirname(folder)
        try:
            st = os.statvfs(folder or "/")
        except OSError:
            return float("inf")
        return st.f_bavail * st.f_frsize

    return min(folders, key=free)


def disk_full(path: Optional[str] = None) -> str:
    return f"the disk is full at {full_folder(path)}: free space, {AGAIN}"


def _full_disk(exc: BaseException) -> Optional[str]:
    if isinstance(exc, OSError) and exc.errno in FULL:
        return disk_full(exc.filename)
    return None


def _damaged_library(exc: BaseException) -> Optional[str]:
    """A shared library the dynamic loader refuses (cut short by a full disk or a kill while it was written)."""
    text = str(exc)
    found = re.search(r"(/\S+\.so(?:\.\d+)*)\b.*(file too short|invalid ELF header|not in ELF format)", text)
    if not isinstance(exc, OSError) or found is None:
        return None
    return f"the kernel library {found.group(1)} is damaged ({found.group(2)}): delete it (it is built again), {AGAIN}"


def _database_down(exc: BaseException) -> Optional[str]:
    """A database server (an Optuna storage, an MLflow store on PostgreSQL) that stopped answering."""
    if type(exc).__module__.split(".")[0] not in ("sqlalchemy", "psycopg", "psycopg2"):
        return None
    text = first_line(getattr(exc, "orig", None) or exc)
    signs = ("Connection refused", "could not connect", "server closed the connection", "connection is closed",
             "Connection timed out", "terminating connection")
    if not any(s in text for s in signs):
        return None
    return f"the database server does not answer ({text}): start it, or fix the URL, {AGAIN}"


# Faults of the machine around a run: each turns an exception into its one line (None: not this one). A
# module that knows a fault of its own (an MLflow server that does not answer) adds it with ``@fault_kind``.
FAULTS: List[Callable[[BaseException], Optional[str]]] = [_full_disk, _damaged_library, _database_down]


def fault_kind(explain: Callable[[BaseException], Optional[str]]):
    """Register ``explain(exc) -> message or None`` as one more fault of the machine (a decorator)."""
    FAULTS.append(explain)
    return explain


def fault(exc: BaseException) -> Optional[str]:
    """The one line naming the fault of the machine behind ``exc`` (anywhere in its chain), or None when
    ``exc`` is not one (the run's own failure, or an error of the input)."""
    for e in _chain(exc):
        if isinstance(e, MachineFault):
            return str(e)
        for explain in FAULTS:
            message = explain(e)
            if message is not None:
                return message
    return None


def fault_in_text(text: Optional[str]) -> bool:
    """Whether a recorded error message (a run's ``error`` tag) reads as a full disk: what a run ended by
    one before faults were told apart, or whose last write could not be corrected, holds."""
    return bool(text) and any(sign in text for sign in FULL_TEXT)


# Known conditions of the machine: each turns an exception into its one line (None: not this one). A module
# that knows a condition of its own (a damaged MLflow store) adds it with ``@known``.
KNOWN: List[Callable[[BaseException], Optional[str]]] = [_out_of_memory, _os_error]


def known(explain: Callable[[BaseException], Optional[str]]):
    """Register ``explain(exc) -> message or None`` as one more known condition (a decorator)."""
    KNOWN.append(explain)
    return explain


def one_line(exc: BaseException) -> Tuple[str, int]:
    """The message ``uwbench`` prints for ``exc`` (one line) and the exit code."""
    message = fault(exc)
    if message is not None:
        return message, USER_EXIT
    if isinstance(exc, UserError):
        return str(exc), USER_EXIT
    for known in KNOWN:
        message = known(exc)
        if message is not None:
            return message, USER_EXIT
    return f"{type(exc).__name__}: {first_line(str(exc))} ({BUG}; {DEBUG_HINT})", UNEXPECTED_EXIT
