"""The task interface: every task is a seq2seq problem over one-hot or real-valued steps.

An encoder reads ``inputs`` (B, Te, I); a decoder then runs ``decoder_inputs`` (B, Td, I) and its
outputs (B, Td, O) are scored against ``targets``. Classification tasks (documents, pixel MNIST)
use a one-step decoder; regression tasks (sinusoid) use real targets and MSE.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional

import torch
import torch.nn.functional as F

from uwbench.registry import TASKS

TEST_CHUNK = 64  # the fixed test set is stored in chunks of this many sequences


@dataclass
class Batch:
    inputs: torch.Tensor  # (B, Te, I) encoder inputs
    decoder_inputs: torch.Tensor  # (B, Td, I) decoder inputs (all zero for the synthetic tasks)
    targets: torch.Tensor  # (B, Td) class ids, or (B, Td, O) real values for regression
    lengths: Optional[torch.Tensor] = None  # (B,) valid encoder steps when lengths differ in a batch

    def to(self, device) -> "Batch":
        return replace(
            self,
            inputs=self.inputs.to(device, non_blocking=True),
            decoder_inputs=self.decoder_inputs.to(device, non_blocking=True),
            targets=self.targets.to(device, non_blocking=True),
            lengths=None if self.lengths is None else self.lengths.to(device, non_blocking=True),
        )

    @property
    def size(self) -> int:
        return self.inputs.shape[0]


class Task:
    """Base class. Subclasses set ``input_size``, ``output_size`` and implement ``sample``."""

    name: str = "task"
    input_size: int
    output_size: int
    metric: str = "accuracy"  # the headline metric: a measure of ``uwbench.metrics`` (its direction lives there)

    def __init__(self, config):
        self.config = config
        self._test: Optional[List[Batch]] = None

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        raise NotImplementedError

    def max_encoder_steps(self) -> int:
        """Longest encoder length the task can produce (used to size per-run write masks)."""
        raise NotImplementedError

    def eval_batches(self, n: int, batch_size: int, generator: torch.Generator) -> List[Batch]:
        """Batches for model selection during training. Synthetic tasks draw fresh sequences; tasks
        with a fixed dataset override this to draw from their validation split."""
        return [self.sample(batch_size, generator) for _ in range(n)]

    def input_modules(self) -> Dict[str, torch.nn.Module]:
        """Trainable modules the task computes its batches' inputs with (e.g. a trainable word embedding),
        by the name the model holds them under. The model builder (``uwbench.models.base.build_model``
        with ``task=``) makes them submodules of the model it builds, so the optimizer, the device move
        and the checkpoint include them; the task never changes a model. Default: none."""
        return {}

    def test_batches(self) -> List[Batch]:
        """The fixed, seeded test set (``config.test_size`` sequences in chunks of TEST_CHUNK)."""
        if self._test is None:
            g = torch.Generator().manual_seed(int(self.config.test_seed))
            sizes = [TEST_CHUNK] * (self.config.test_size // TEST_CHUNK)
            if self.config.test_size % TEST_CHUNK:
                sizes.append(self.config.test_size % TEST_CHUNK)
            self._test = [self.sample(n, g) for n in sizes]
        return self._test

    def loss(self, outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        raise NotImplementedError

    def score(self, outputs: torch.Tensor, batch: Batch) -> Dict[str, torch.Tensor]:
        """Per-batch sums for the metrics: ``{"name": (sum tensor, count)}`` summed over batches."""
        raise NotImplementedError


class ClassificationTask(Task):
    """Targets are class ids per decoder step; loss is the mean token cross-entropy over all decoder
    steps (end marker included, docs/reference.md §8.1); the metric is per-token accuracy (§8.4)."""

    def loss(self, outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        # outputs (B, Td, O), targets (B, Td)
        return F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]), batch.targets.reshape(-1))

    def score(self, outputs: torch.Tensor, batch: Batch):
        correct = (outputs.argmax(-1) == batch.targets).sum()  # () tokens right
        return {"accuracy": (correct, batch.targets.numel())}


class RegressionTask(Task):
    """Real-valued targets; loss and metric are the mean squared error over decoder steps."""

    metric = "mse"

    def loss(self, outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        return F.mse_loss(outputs, batch.targets)

    def score(self, outputs: torch.Tensor, batch: Batch):
        return {"mse": (((outputs - batch.targets) ** 2).sum(), batch.targets.numel())}


def build_task(name: str, values: Any = None) -> Task:
    """The registered task ``name``: ``values`` are its settings (a mapping; unknown keys are rejected
    with the allowed ones) or its already built config. The one place a task is made from its name."""
    is_config = dataclasses.is_dataclass(values) and not isinstance(values, type)
    return TASKS.get(name)(values if is_config else TASKS.build_config(name, values))
