"""Synthetic memorisation and reasoning tasks: copy, reverse, double (paper §3.2), add, max (§3.3).

Exactly as the authors' code generates them (docs/reference.md §2): tokens x_1..x_T uniform over 1..V-1,
token 0 is the end marker appended to input and target; one-hot of size V; the encoder reads T+1
steps; the decoder gets all-zero inputs for T_out+1 steps and predicts the target then the marker.
One T per batch, optionally drawn from [seq_len_min, seq_len] per batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Callable, ClassVar, Optional

import torch
import torch.nn.functional as F
from pydantic import Field

from uwbench.config import ConfigError, check
from uwbench.registry import TASKS
from uwbench.tasks.base import Batch, ClassificationTask

END = 0  # the end-of-sequence token (one-hot index 0)


@dataclass
class SyntheticConfig:
    # The task's protocol for a memory model's decoder (docs/reference.md §5.4): read-only, as in the
    # authors' first commit and the paper's synthetic runs; a run's `model.decoder_write` overrides it.
    DECODER_WRITE: ClassVar[bool] = False

    seq_len: Annotated[int, Field(ge=2)] = 50  # T, the number of input tokens (the encoder reads T+1 steps)
    seq_len_min: Optional[int] = None  # if set, T ~ U{seq_len_min..seq_len} once per batch
    vocab_size: Annotated[int, Field(ge=3)] = 10  # V: tokens 1..V-1 plus the end marker 0 (docs/reference.md §2.1)
    test_size: Annotated[int, Field(ge=1)] = 640
    test_seed: int = 20190506  # the fixed test set's seed, independent of the run's seed

    def __post_init__(self):
        check(self)  # the rules in the annotations (uwbench.config); the one between two fields below
        if self.seq_len_min is not None and not 2 <= self.seq_len_min <= self.seq_len:
            raise ConfigError(
                f"`2 <= seq_len_min <= seq_len` must hold, got seq_len_min={self.seq_len_min}, "
                f"seq_len={self.seq_len}"
            )


@dataclass
class MaxConfig(SyntheticConfig):
    vocab_size: int = 50  # the paper's max task draws from a larger range (docs/reference.md §2.1)


# Target rules on x (B, T) -> y (B, T_out), docs/reference.md §2.2 (1-indexed in the comments).
def copy_target(x: torch.Tensor) -> torch.Tensor:
    return x  # y_i = x_i


def reverse_target(x: torch.Tensor) -> torch.Tensor:
    return x.flip(1)  # y_i = x_{T+1-i}


def double_target(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, x], dim=1)  # x_1..x_T x_1..x_T


def add_target(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[1] // 2
    return torch.div(x[:, :half] + x.flip(1)[:, :half], 2, rounding_mode="floor")  # floor((x_i + x_{T+1-i})/2)


def max_target(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[1] // 2
    return torch.maximum(x[:, 0 : 2 * half : 2], x[:, 1 : 2 * half : 2])  # max(x_{2i-1}, x_{2i})


class SyntheticTask(ClassificationTask):
    def __init__(self, config: SyntheticConfig, rule: Callable[[torch.Tensor], torch.Tensor], name: str):
        super().__init__(config)
        self.rule = rule
        self.name = name
        self.input_size = config.vocab_size
        self.output_size = config.vocab_size

    def max_encoder_steps(self) -> int:
        return self.config.seq_len + 1

    def draw_length(self, generator: torch.Generator) -> int:
        lo = self.config.seq_len_min
        if lo is None:
            return self.config.seq_len
        return int(torch.randint(lo, self.config.seq_len + 1, (1,), generator=generator))

    def make_batch(self, tokens: torch.Tensor) -> Batch:
        """Tokens (B, T) in 1..V-1 -> the encoded batch."""
        v = self.config.vocab_size
        b = tokens.shape[0]
        end = torch.full((b, 1), END, dtype=torch.long)
        y = torch.cat([self.rule(tokens), end], dim=1)  # (B, T_out+1)
        x = torch.cat([tokens, end], dim=1)  # (B, T+1)
        inputs = F.one_hot(x, v).float()  # (B, T+1, V)
        decoder_inputs = torch.zeros(b, y.shape[1], v)  # (B, T_out+1, V) all zero (docs/reference.md §2.1)
        return Batch(inputs=inputs, decoder_inputs=decoder_inputs, targets=y)

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        t = self.draw_length(generator)
        tokens = torch.randint(1, self.config.vocab_size, (batch_size, t), generator=generator)  # (B, T)
        return self.make_batch(tokens)


def _register(name: str, rule, config=SyntheticConfig, help: str = ""):
    @TASKS.register(name, config=config, help=help)
    def factory(cfg):
        return SyntheticTask(cfg, rule, name)

    return factory


_register("copy", copy_target, help="copy x_1..x_T (paper §3.2)")
_register("reverse", reverse_target, help="reverse x_T..x_1 (paper §3.2)")
_register("double", double_target, help="copy twice x_1..x_T x_1..x_T (paper §3.1-3.2)")
_register("add", add_target, help="floor((x_i + x_{T+1-i})/2), i <= T/2 (paper §3.3)")
_register("max", max_target, config=MaxConfig, help="max(x_{2i-1}, x_{2i}), i <= T/2 (paper §3.3)")
