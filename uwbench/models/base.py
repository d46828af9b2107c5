"""The model interface and the model builder.

Every model is a seq2seq module:

    outputs = model(inputs, decoder_inputs, lengths=None)   # (B, Te, I), (B, Td, I) -> (B, Td, O)

One controller serves encoder and decoder; its final encoder state starts the decoder (reference
§2.1). The encoder emits no outputs. ``lengths`` (B,) is given only when encoder lengths differ
inside a batch (document tasks); models that cannot handle that raise a clear error.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping

import torch
import torch.nn as nn

from uwbench.config import build
from uwbench.registry import MODELS

OUTPUT_CLIP = 20.0  # logits are clipped to +-20 (reference §2.1, D9)


class Seq2SeqModel(nn.Module):
    """Base class; subclasses implement ``forward``. ``trace`` collects per-step memory traces when
    ``tracing`` is True (off by default, free when off)."""

    tracing: bool = False

    def __init__(self):
        super().__init__()
        self.trace: Dict[str, Any] = {}

    def forward(self, inputs: torch.Tensor, decoder_inputs: torch.Tensor, lengths=None) -> torch.Tensor:
        raise NotImplementedError

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def build_model(name: str, input_size: int, output_size: int, values: Mapping[str, Any] | None = None,
                task=None) -> Seq2SeqModel:
    """Build a registered model from config values (unknown keys rejected with the allowed ones).

    ``task`` is passed to factories that need more than sizes (e.g. the longest encoder length to draw
    a random writer's mask)."""
    entry = MODELS.entry(name)
    cfg = build(entry.config, dict(values or {}), f"model ({name})")
    return entry.factory(cfg, input_size=input_size, output_size=output_size, task=task)
