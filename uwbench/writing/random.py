"""Random writing (RW, the paper's baseline in Tables 1-2): one Bernoulli write mask per model
instance, reused for every batch (docs/reference.md §5.3).

p = ``write_prob`` or the paper's (D+1)/T, with T = the longest encoder length - 1 (tokens without the
end marker). The mask covers the longest encoder sequence of the task and shorter sequences use its
prefix. It is drawn from ``torch.Generator().manual_seed(writer_seed)`` when a seed is given, else from
torch's global RNG, which the trainer seeds, so a run's mask is reproducible either way.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, List, Optional

import torch
from pydantic import Field

from uwbench.config import check
from uwbench.registry import WRITERS
from uwbench.writing.base import Writer
from uwbench.errors import UserError


@dataclass
class RandomConfig:
    # the Bernoulli p; None means the paper's (D+1)/T
    write_prob: Optional[Annotated[float, Field(gt=0, le=1)]] = None
    writer_seed: Optional[int] = None  # the mask's seed; None draws from the run's seeded RNG

    def __post_init__(self):
        check(self)  # the rules in the annotations (uwbench.config)


def write_probability(options: RandomConfig, memory_size: int, max_steps: int) -> float:
    """``options.write_prob`` if set, else (D+1)/T capped at 1 (T = max_steps - 1 tokens)."""
    if options.write_prob is not None:
        return options.write_prob
    return min(1.0, (memory_size + 1) / max(max_steps - 1, 1))


@WRITERS.register("random", config=RandomConfig,
                  help="random writing: one seeded Bernoulli mask per run, p = (D+1)/T")
class RandomWriter(Writer):
    def __init__(self, cfg: Any, max_steps: Optional[int]):
        if max_steps is None or max_steps < 1:
            raise UserError(
                "the random writer draws one mask over the task's longest encoder sequence: "
                f"`max_steps >= 1` must hold, got {max_steps!r} (build the model with its task)"
            )
        super().__init__(cfg, max_steps)
        self.write_prob = write_probability(self.options, cfg.memory_size, max_steps)
        seed = self.options.writer_seed
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        # DEVIATION: the authors' code draws p = 0.5 (docs/reference.md §5.3); the paper (and our default)
        # says (D+1)/T.
        self.mask: List[bool] = (torch.rand(max_steps, generator=generator) < self.write_prob).tolist()

    def schedule(self, n_steps: int) -> List[bool]:
        if n_steps > len(self.mask):
            raise ValueError(f"`n_steps <= {len(self.mask)}` (the random mask's length) must hold, got {n_steps}")
        return self.mask[:n_steps]
