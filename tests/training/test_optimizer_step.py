"""The trainer steps its optimiser with torch's multi-tensor kernels on every device (fewer calls per update
than the per-tensor loop torch picks on a CPU by default), and that changes no number: over a short run of
the DNC, the parameters after each update equal those of the per-tensor loop bit for bit."""
from __future__ import annotations

import pytest
import torch

from uwbench.training.config import resolve_run
from uwbench.training.loop import OPTIMIZERS, _Trainer, check_run

CONFIG = {"task": {"name": "copy", "seq_len": 6, "test_size": 8},
          "model": {"name": "dnc", "hidden_size": 16, "memory_size": 3, "word_size": 8, "read_heads": 1},
          "train": {"steps": 4, "batch_size": 4, "eval_every": 100, "eval_batches": 1, "seed": 3, "device": "cpu",
                    "checkpoint_every": 0}}


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_the_multi_tensor_step_is_the_per_tensor_step(optimizer):
    cfg = {**CONFIG, "train": {**CONFIG["train"], "optimizer": optimizer}}
    resolved = resolve_run(cfg)
    trainer = _Trainer(resolved, check_run(resolved), None, None, None, None)
    assert trainer.optimizer.defaults["foreach"] is True
    model = trainer.model
    twin = [p.detach().clone().requires_grad_() for p in model.parameters()]
    loop = OPTIMIZERS[optimizer](twin, lr=resolved.train.lr, foreach=False)
    for _ in range(4):
        batch = trainer.task.sample(4, trainer.generators["train"])
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.task.loss(model(batch.inputs, batch.decoder_inputs), batch).backward()
        for p, q in zip(model.parameters(), twin):
            q.grad = None if p.grad is None else p.grad.clone()
        trainer.optimizer.step()
        loop.step()
        assert all(torch.equal(p.detach(), q.detach()) for p, q in zip(model.parameters(), twin))
