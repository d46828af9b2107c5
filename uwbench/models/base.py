"""The model interface and the model builder.

Every model is a seq2seq module:

    outputs = model(inputs, decoder_inputs, lengths=None)   # (B, Te, I), (B, Td, I) -> (B, Td, O)

One controller serves encoder and decoder; its final encoder state starts the decoder
(docs/reference.md §3.1). The encoder emits no outputs. ``lengths`` (B,) is given only when encoder
lengths differ inside a batch (document tasks); models that cannot handle that raise a clear error.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

import torch
import torch.nn as nn

from uwbench.models.params import count_parameters
from uwbench.registry import MODELS
from uwbench.errors import UserError

OUTPUT_CLIP = 20.0  # logits are clipped to +-20 (docs/reference.md §3.4)


class Seq2SeqModel(nn.Module):
    """Base class; subclasses implement ``forward``. ``trace`` collects per-step memory traces when
    ``tracing`` is True (off by default, free when off)."""

    tracing: bool = False
    # its training forward makes no host synchronisation and no branch on tensor values, so it can be
    # captured whole as a CUDA graph (models/cuda_graph.py)
    capturable: bool = False

    def __init__(self):
        super().__init__()
        self.trace: Dict[str, Any] = {}

    def forward(self, inputs: torch.Tensor, decoder_inputs: torch.Tensor, lengths=None) -> torch.Tensor:
        raise NotImplementedError

    def num_parameters(self) -> int:
        return count_parameters(self)


def build_model(name: str, input_size: int, output_size: int, values: Any = None, task=None) -> nn.Module:
    """Build the registered model ``name``: ``values`` are its settings (a mapping; unknown keys are
    rejected with the allowed ones) or its already built config.

    ``task`` is passed to factories that need more than sizes (e.g. the longest encoder length to draw
    a random writer's mask), and the task's input modules (``Task.input_modules``, e.g. a trainable
    word embedding) become submodules of the model under their names, so the optimizer, the device
    move and the checkpoint include them. This is the one place a model is made from its name."""
    is_config = dataclasses.is_dataclass(values) and not isinstance(values, type)
    cfg = values if is_config else MODELS.build_config(name, values)
    model = MODELS.get(name)(cfg, input_size=input_size, output_size=output_size, task=task)
    for key, module in (task.input_modules() if task is not None else {}).items():
        if hasattr(model, key):
            raise UserError(f"task {task.name!r} has an input module {key!r}, a name model {name!r} already uses")
        model.add_module(key, module)
    return model
