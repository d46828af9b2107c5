"""Errors that reach the user as one clear line (the CLI prints them without a traceback)."""
from __future__ import annotations

from uwbench.config import ConfigError
from uwbench.registry import UnknownNameError


class DataNotFoundError(FileNotFoundError):
    """A dataset file is missing; the message says what to place where."""


# Everything the CLI reports as "error: <message>" (exit code 2) instead of a traceback.
UserError = (ConfigError, UnknownNameError, DataNotFoundError, ValueError, FileNotFoundError)
