"""Uniform Writing (paper §2.2, Eq. 7): write at evenly spaced encoder steps, hold the memory and the
read vector in between (docs/reference.md §5.1-5.2).

The positions come from ``uwbench.theory.uniform_positions`` so the model and the theory use one
schedule. ``schedule`` picks the rule: ``code`` (default: positions k*s with s = floor((T+1)/(D+1)) on
the T+1 encoder steps, end marker included, as the authors' code does) or ``paper`` (Eq. 7 on the T
tokens).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Literal

from uwbench.registry import WRITERS
from uwbench.theory import positions_to_mask, uniform_positions
from uwbench.writing.base import Writer


@dataclass
class UniformConfig:
    schedule: Literal["code", "paper"] = "code"  # UW positions: the authors' code or the paper's Eq. 7


@WRITERS.register("uniform", config=UniformConfig, help="uniform writing: D+1 evenly spaced writes (paper Eq. 7)")
class UniformWriter(Writer):
    def schedule(self, n_steps: int) -> List[bool]:
        positions = uniform_positions(n_steps, self.cfg.memory_size, rule=self.options.schedule)
        return positions_to_mask(positions, n_steps)
