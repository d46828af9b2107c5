"""Regular writing: the memory is written and read at every encoder step (a plain DNC / NTM; the
authors' code's hold mode 0, docs/reference.md §5.2). No settings of its own."""
from __future__ import annotations

from typing import List

from uwbench.registry import WRITERS
from uwbench.writing.base import Writer


@WRITERS.register("regular", help="write and read at every step (plain DNC / NTM)")
class RegularWriter(Writer):
    def schedule(self, n_steps: int) -> List[bool]:
        return [True] * n_steps
