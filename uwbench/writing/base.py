"""The writer contract: a writer decides on which encoder steps a memory model writes (paper §2.2-2.3).

A writer is one file in ``uwbench/writing``: a ``Writer`` subclass and, when it has settings, its own
config dataclass, registered together::

    @dataclass
    class EveryKConfig:
        every: int = 3  # write on every k-th encoder step

    @WRITERS.register("every_k", config=EveryKConfig, help="write on every k-th encoder step")
    class EveryKWriter(Writer):
        def schedule(self, n_steps):
            return [(t + 1) % self.options.every == 0 for t in range(n_steps)]

The writer's settings sit flat in the model section of a run config, next to the model's own
(``model.writer: every_k``, ``model.every: 2``; ``--set model.cache_size=5``), and are checked by the
chosen writer's config dataclass: a setting of another writer is an error that names its owner. The
model config says which of its fields names the writer (``uwbench.config.Part``); the built writer
config is ``cfg.writer_config``, and the writer sees it as ``self.options``.
"""
from __future__ import annotations

from typing import Any, List, Optional


class Writer:
    """Decides the encoder write steps. ``schedule(n_steps)`` returns one bool per encoder step
    (True = write), shared by the whole batch so a held step can skip the memory work with plain
    Python control flow (docs/reference.md §5.2).

    ``cfg`` is the model's config (the writer reads its ``memory_size`` D, for instance), ``options`` the
    writer's own config (``cfg.writer_config``; None for a writer without settings), ``max_steps`` the
    task's longest encoder length (None when the model is built without a task).

    ``cached`` writers (CUW) attend over a cache of controller states at each write step; they also
    provide ``build_attention(hidden_size, read_size)`` returning a module mapping
    ``(h (B, H), cache (B, n, H), r (B, read_size)) -> (a (B, H), alpha (B, n))``, which the model owns
    (so its parameters train and are saved)."""

    cached: bool = False

    def __init__(self, cfg: Any, max_steps: Optional[int]):
        self.cfg = cfg
        self.options = getattr(cfg, "writer_config", None)
        self.max_steps = max_steps

    def schedule(self, n_steps: int) -> List[bool]:
        raise NotImplementedError
