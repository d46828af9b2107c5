"""A writer that is not in the paper: front-loaded writing.

Uniform writing (paper Eq. 7) spreads its writes evenly over the sequence. This writer makes exactly as
many writes as uniform writing on the same sequence and memory, but packs them towards the start: write k
of m falls at step ceil(n (k/m)^p) - 1 of the n encoder steps, so with ``power`` p = 1 the positions are
uniform writing's own (wherever the memory has fewer slots than the sequence has steps), and with p = 2
(the default) the gaps grow linearly, short early and long late.
The last write is always the end marker's step, as with uniform writing.

It is a one-file plugin: benchmark it with

    uwbench leaderboard --plugin examples/front_loaded_writer.py --writer front_loaded --workers 2

(docs/extending.md, "The leaderboard"). ``--set model.power=1.5`` changes its setting.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List

from uwbench.registry import WRITERS
from uwbench.theory import positions_to_mask, uniform_positions
from uwbench.writing.base import Writer


@dataclass
class FrontLoadedConfig:
    power: float = 2.0  # p: 1 = uniform writing's positions; above 1, denser early and sparser late

    def __post_init__(self):
        if not self.power > 0:
            raise ValueError(f"`power > 0` must hold, got {self.power}")


def front_loaded_positions(n_steps: int, n_writes: int, power: float) -> List[int]:
    """``n_writes`` distinct 0-indexed steps of ``n_steps``, write k at ceil(n (k/m)^p) - 1, the last at n - 1."""
    if n_writes >= n_steps:
        return list(range(n_steps))
    raw = [max(0, math.ceil(n_steps * (k / n_writes) ** power) - 1) for k in range(1, n_writes + 1)]
    positions: List[int] = []
    for p in raw:  # crowded early writes move to the next free step
        positions.append(max(p, positions[-1] + 1) if positions else p)
    for i in range(n_writes - 1, -1, -1):  # and back from the end if that ran past it
        positions[i] = min(positions[i], n_steps - n_writes + i)
    return positions


@WRITERS.register("front_loaded", config=FrontLoadedConfig,
                  help="as many writes as uniform writing, packed towards the start (gaps grow as k^p)")
class FrontLoadedWriter(Writer):
    def schedule(self, n_steps: int) -> List[bool]:
        n_writes = len(uniform_positions(n_steps, self.cfg.memory_size))
        return positions_to_mask(front_loaded_positions(n_steps, n_writes, self.options.power), n_steps)
