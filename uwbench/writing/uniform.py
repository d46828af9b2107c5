"""Uniform Writing (paper §2.2, Eq. 7): write at evenly spaced encoder steps, hold the memory and the
read vector in between (reference §3.1-3.2, mode 2).

The positions come from ``uwbench.theory.uniform_positions`` so the model and the theory use one
schedule. ``MANNConfig.schedule`` picks the rule: ``code`` (default, reference D3: positions k*s with
s = floor((T+1)/(D+1)) on the T+1 encoder steps, eos included) or ``paper`` (Eq. 7 on the T tokens).
"""
from __future__ import annotations

from typing import List

from uwbench.models.memory_base import Writer
from uwbench.registry import WRITERS
from uwbench.theory import positions_to_mask, uniform_positions


@WRITERS.register("uniform", help="uniform writing: D+1 evenly spaced writes (paper Eq. 7)")
class UniformWriter(Writer):
    def schedule(self, n_steps: int) -> List[bool]:
        positions = uniform_positions(n_steps, self.cfg.memory_size, rule=self.cfg.schedule)
        return positions_to_mask(positions, n_steps)
