"""The command line in this process, as the bad-input and fault tests call it."""
from __future__ import annotations

import os
from typing import List

from uwbench.cli import main


def run(argv: List[str]) -> int:
    """``uwbench ARGV`` in this process, its environment as it was afterwards (a sweep sets variables)."""
    saved = dict(os.environ)
    try:
        return main(argv)
    finally:
        os.environ.clear()
        os.environ.update(saved)
