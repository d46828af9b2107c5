"""Contracts shared by the memory-augmented models (DNC, NTM): their config and the ``Memory`` contract.

A memory-augmented model (``uwbench.models.mann``) is a controller, one external ``Memory`` and a
``Writer`` (``uwbench.writing.base``) that decides on which encoder steps the memory is written
(paper §2.2-2.3). Each step:

    controller input  [x_t ; r_{t-1}]           -> h_t                     (Eq. 3-4)
    interface         xi_t = clip(h_t W_xi, +-20)                          (docs/reference.md §3.3)
    write step        state = memory.write(state, iface); r_t, state = memory.read(state, iface)
    hold step         state and r_{t-1} carried unchanged (UW / CUW / RW, docs/reference.md §5.2)
    decoder output    y_t = clip(h_t W_y + r_t W_r, +-20)

A ``Memory`` implements:

    interface_size: int                       # width of xi it consumes
    read_size: int                            # width of vec(r)
    initial_state(batch, device, dtype) -> tuple of tensors
    initial_read(batch, device, dtype) -> (B, read_size)
    parse(xi) -> an object with the activated interface fields (xi already clipped)
    write(state, iface) -> state
    read(state, iface) -> (r (B, read_size), state)
    write_gate(iface) -> (B,) or None          # for traces: the write gate, if the memory has one
    trace_step(state, iface) -> dict of (B, ...) tensors   # optional, only called when tracing
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Optional, Tuple

from pydantic import Field

from uwbench.config import Part, check
from uwbench.registry import CONTROLLERS, WRITERS
from uwbench.writing.base import Writer  # noqa: F401  (the writer contract; its home is uwbench.writing.base)


@dataclass
class MANNConfig:
    """Configuration shared by the DNC and NTM models. Every field is a plain value, so sweeps can vary
    memory_size and the writer like any other setting. The writer's own settings (CUW's cache_size and
    attention_size, RW's write_prob, ...) belong to the writer's config dataclass in its file under
    ``uwbench/writing``; they sit flat next to these fields in a run config and are held here, built, as
    ``writer_config`` (``uwbench.config.Part``)."""

    PARTS: ClassVar[Tuple[Part, ...]] = (Part("writer", WRITERS, "writer_config"),)

    hidden_size: Annotated[int, Field(ge=1)] = 100  # H, controller units (paper: DNC/UW/RW 100, CUW 95)
    controller: str = "ln_lstm"  # ln_lstm | lstm | gru | rnn
    memory_size: Annotated[int, Field(ge=1)] = 4  # D = N, memory slots
    word_size: Annotated[int, Field(ge=1)] = 64  # W
    read_heads: Annotated[int, Field(ge=1)] = 1  # R
    writer: str = "regular"  # a name in uwbench.registry.WRITERS: regular | uniform | cached_uniform | random
    # The decoder writes and reads every step (the authors' released code); False: a read-only decoder.
    # A run takes its task's protocol where the task declares one (training/config.py: resolve_run).
    decoder_write: bool = True
    interface_clip: Annotated[float, Field(gt=0)] = 20.0
    writer_config: Optional[Any] = None  # the writer's own config; None: its defaults (built here)

    def __post_init__(self):
        check(self)  # the rules in the annotations (uwbench.config)
        CONTROLLERS.entry(self.controller)  # an unknown name: the error lists the known ones
        expected = WRITERS.entry(self.writer).config  # the writer's config dataclass (None: no settings)
        if self.writer_config is None and expected is not None:
            self.writer_config = expected()
        wrong = self.writer_config is not None if expected is None else not isinstance(self.writer_config, expected)
        if wrong:
            raise ValueError(f"writer {self.writer!r} takes a writer_config of type "
                             f"{getattr(expected, '__name__', None)}, got {type(self.writer_config).__name__}")
