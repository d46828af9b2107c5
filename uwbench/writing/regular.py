"""Regular writing: the memory is written and read at every encoder step (a plain DNC/NTM,
reference §3.1 ``hold_mem_mode = 0``)."""
from __future__ import annotations

from typing import List

from uwbench.models.memory_base import Writer
from uwbench.registry import WRITERS


@WRITERS.register("regular", help="write and read at every step (plain DNC / NTM)")
class RegularWriter(Writer):
    def schedule(self, n_steps: int) -> List[bool]:
        return [True] * n_steps
