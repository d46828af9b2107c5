"""Random writing (RW, the paper's baseline in Tables 1-2): one Bernoulli write mask per model
instance, reused for every batch (reference §3.1, decision D16).

p = ``write_prob`` or the paper's (D+1)/T, with T = the longest encoder length - 1 (tokens without the
end marker). The mask covers the longest encoder sequence of the task and shorter sequences use its
prefix. It is drawn from ``torch.Generator().manual_seed(writer_seed)`` when a seed is given, else from
torch's global RNG, which the trainer seeds, so a run's mask is reproducible either way.
"""
from __future__ import annotations

from typing import List, Optional

import torch

from uwbench.models.memory_base import MANNConfig, Writer
from uwbench.registry import WRITERS


def write_probability(cfg: MANNConfig, max_steps: int) -> float:
    """``cfg.write_prob`` if set, else (D+1)/T capped at 1 (T = max_steps - 1 tokens)."""
    if cfg.write_prob is not None:
        return cfg.write_prob
    return min(1.0, (cfg.memory_size + 1) / max(max_steps - 1, 1))


@WRITERS.register("random", help="random writing: one seeded Bernoulli mask per run, p = (D+1)/T")
class RandomWriter(Writer):
    def __init__(self, cfg: MANNConfig, max_steps: Optional[int]):
        if max_steps is None or max_steps < 1:
            raise ValueError(
                "the random writer draws one mask over the task's longest encoder sequence: "
                f"`max_steps >= 1` must hold, got {max_steps!r} (build the model with its task)"
            )
        super().__init__(cfg, max_steps)
        self.write_prob = write_probability(cfg, max_steps)
        generator = None if cfg.writer_seed is None else torch.Generator().manual_seed(cfg.writer_seed)
        # DEVIATION: the authors' code draws p = 0.5 (reference §3.1); the paper (and our default) says (D+1)/T.
        self.mask: List[bool] = (torch.rand(max_steps, generator=generator) < self.write_prob).tolist()

    def schedule(self, n_steps: int) -> List[bool]:
        if n_steps > len(self.mask):
            raise ValueError(f"`n_steps <= {len(self.mask)}` (the random mask's length) must hold, got {n_steps}")
        return self.mask[:n_steps]
