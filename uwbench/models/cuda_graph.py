"""The whole-sequence path on CUDA: a training forward and its backward each replayed as one CUDA graph.

On a GPU a memory model's step is hundreds of small kernels, each launched from Python: at the
paper's sizes the launches, not the arithmetic, set the time. ``GraphedTraining`` captures the model's
whole training forward (every encoder and decoder step, the write schedule baked in) and its backward
with ``torch.cuda.make_graphed_callables``, once per input shape, and from then on replays the two
graphs: one launch each, whatever the number of steps. The write schedule is a function of the
sequence length alone for every writer (regular, UW, CUW and RW's mask, drawn once per model), so one
capture per shape is exact.

What a capture holds fixed, and so what the wrapper checks or leaves to the eager model:

- shapes and dtypes of the inputs: a new shape is a new capture, all in one memory pool, up to
  ``MAX_CAPTURES`` (a task drawing its length per batch has several shapes; past the limit, new shapes
  run the eager model, with a warning);
- the parameters' storage: the optimiser updates them in place, which the replays see; the graphs'
  gradients are static buffers, which autograd copies into ``p.grad`` like any other gradient;
- training mode with autograd on: evaluation (``model.eval()`` or ``torch.no_grad``) and traced
  forwards run the eager model;
- no per-sequence lengths (document classification's ``lengths``): such batches run the eager model.

``unsupported_reason`` names why a model or device cannot take the path (the training loop's
``train.cuda_graph`` setting decides from it, ``training/compile_policy.py``).
"""
from __future__ import annotations

import warnings
from typing import Dict, Optional, Tuple

import torch
from torch import nn

WARMUP_ITERS = 3  # forward + backward passes on a side stream before the capture (lazy CUDA initialisation)
MAX_CAPTURES = 8  # input shapes captured per model; more run eager


def unsupported_reason(model, device: torch.device, lengths: bool = False) -> Optional[str]:
    """Why ``model`` on ``device`` cannot be captured whole, or None when it can; ``lengths``: the task's
    batches carry per-sequence lengths."""
    if device.type != "cuda":
        return f"CUDA graphs need a CUDA device, the run is on {device}"
    if not getattr(model, "capturable", False):
        return (f"{type(model).__name__}'s forward is not known to be free of host synchronisation (the memory "
                "models and the lstm baseline are)")
    if lengths:
        return "the task's batches carry per-sequence lengths, which a captured graph cannot follow"
    if any(b.requires_grad for b in model.buffers()):
        return "a buffer of the model requires grad (only parameters may be trainable in a captured graph)"
    if not torch.cuda.is_available():
        return "CUDA graphs need a CUDA device, and torch finds none"
    return None


class _Forward(nn.Module):
    """The model's forward without per-sequence lengths, as a module of its own: the capture replaces
    this module's forward, never the model's (evaluation keeps calling the model itself)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, inputs: torch.Tensor, decoder_inputs: torch.Tensor) -> torch.Tensor:
        return self.model(inputs, decoder_inputs)


class GraphedTraining:
    """Call as the model: ``out = graphed(inputs, decoder_inputs, lengths)``. Training forwards with
    autograd replay the captured graphs (one capture per (inputs, decoder_inputs) shape and dtype);
    everything else runs the eager model."""

    def __init__(self, model: nn.Module, warmup_iters: int = WARMUP_ITERS, max_captures: int = MAX_CAPTURES):
        self.model = model
        self.warmup_iters = warmup_iters
        self.max_captures = max_captures
        self.captures: Dict[Tuple, nn.Module] = {}
        self.pool = None  # one memory pool for every capture: replays never overlap (one update at a time)
        self.warned = False

    def _key(self, inputs: torch.Tensor, decoder_inputs: torch.Tensor) -> Tuple:
        return (tuple(inputs.shape), tuple(decoder_inputs.shape), inputs.dtype, decoder_inputs.dtype,
                inputs.device)

    def replays(self, inputs, decoder_inputs, lengths=None) -> bool:
        """Whether this call replays a captured graph (else it runs the eager model)."""
        return (lengths is None and self.model.training and torch.is_grad_enabled()
                and not getattr(self.model, "tracing", False) and inputs.is_cuda)

    def __call__(self, inputs: torch.Tensor, decoder_inputs: torch.Tensor,
                 lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        if not self.replays(inputs, decoder_inputs, lengths):
            return self.model(inputs, decoder_inputs, lengths)
        key = self._key(inputs, decoder_inputs)
        graphed = self.captures.get(key)
        if graphed is None:
            if len(self.captures) >= self.max_captures:
                if not self.warned:
                    warnings.warn(f"more than {self.max_captures} input shapes in one run: the rest run without a "
                                  "CUDA graph (set train.cuda_graph=false for a task that draws its length per batch)",
                                  stacklevel=2)
                    self.warned = True
                return self.model(inputs, decoder_inputs, lengths)
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()
            # static copies: the graphs read their inputs from these; each call copies its batch in
            sample = (inputs.detach().clone(), decoder_inputs.detach().clone())
            # allow_unused_input: a parameter the forward does not reach gets no gradient, as in eager
            graphed = torch.cuda.make_graphed_callables(_Forward(self.model), sample,
                                                        num_warmup_iters=self.warmup_iters,
                                                        allow_unused_input=True, pool=self.pool)
            self.captures[key] = graphed
        return graphed(inputs, decoder_inputs)  # (B, Td, O): a static buffer, valid until the next replay
