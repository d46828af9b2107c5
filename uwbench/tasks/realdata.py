"""Shared plumbing of the real-data tasks: where they look for files, how they say what is missing,
and the lazily built batch lists of their validation and test splits.

Nothing is downloaded: every dataset is read from a local folder in its standard layout. The data
folder is, in order: the task's ``data_dir`` field, the ``UWBENCH_DATA`` environment variable, then
``./data``. Each dataset has its own sub-folder there (see ``docs/data.md``); ``uwbench data check``
lists what is found and what is missing.

No torch here, so ``uwbench data check`` and the error messages stay cheap.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

from uwbench.errors import DataNotFoundError

DATA_ENV = "UWBENCH_DATA"
DEFAULT_DATA_DIR = "data"


def data_root(data_dir: Optional[str] = None) -> str:
    """The data folder: ``data_dir`` if given, else ``$UWBENCH_DATA``, else ``./data`` (absolute)."""
    root = data_dir or os.environ.get(DATA_ENV) or DEFAULT_DATA_DIR
    return os.path.abspath(os.path.expanduser(root))


def root_hint(data_dir: Optional[str] = None) -> str:
    """One sentence saying where the data folder came from and how to move it."""
    if data_dir:
        source = "task.data_dir"
    elif os.environ.get(DATA_ENV):
        source = f"${DATA_ENV}"
    else:
        source = f"the default ./{DEFAULT_DATA_DIR}"
    return (f"The data folder is {data_root(data_dir)} (from {source}); set {DATA_ENV}=/path/to/data or "
            "task.data_dir to use another one. See docs/data.md.")


@dataclass
class DataStatus:
    """What ``uwbench data check`` prints for one dataset."""

    name: str  # dataset name, e.g. "mnist"
    tasks: Sequence[str]  # the task names that read it
    found: bool
    where: str  # the folder (or file) found, or the one expected
    missing: List[str] = field(default_factory=list)  # files to place, when not found
    note: str = ""  # where the files come from (the source archive)


def find_first(candidates: Sequence[str]) -> Optional[str]:
    """The first existing path of ``candidates`` (None if none exists)."""
    for path in candidates:
        if os.path.exists(path):
            return path
    return None


def missing_error(dataset: str, folder: str, files: Sequence[str], data_dir: Optional[str],
                  note: str = "") -> DataNotFoundError:
    """The error a task raises when its files are absent: what to put where, and how to move the folder."""
    msg = f"{dataset} data not found: put {', '.join(files)} in {folder}"
    msg += f" (source: {note}). " if note else ". "
    return DataNotFoundError(msg + root_hint(data_dir))


class LazyBatches:
    """A fixed list of batches built on demand: ``make(i)`` builds batch i of ``n``. The test split of
    a real dataset is iterated in a fixed order without holding every dense batch in memory."""

    def __init__(self, n: int, make: Callable[[int], object]):
        self.n = n
        self.make = make

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return self.make(i % self.n)

    def __iter__(self):
        return (self.make(i) for i in range(self.n))
