"""Training helpers of the model tests: the "it learns" check, and eager against another path on the
same batches."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread for the test (shared 2-core machines); autouse where a module imports it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def fit_and_score(model, task, updates: int, lr: float = 1e-2, batch_size: int = 32) -> float:
    """Train ``model`` on ``task`` with Adam for ``updates`` steps (seeded batches), then its per-token
    accuracy on 256 fresh sequences: the "it learns" checks of the model and writer tests."""
    import torch

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(0)
    for _ in range(updates):
        batch = task.sample(batch_size, gen)
        loss = task.loss(model(batch.inputs, batch.decoder_inputs), batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    batch = task.sample(256, torch.Generator().manual_seed(99))
    with torch.no_grad():
        pred = model(batch.inputs, batch.decoder_inputs).argmax(-1)
    return (pred == batch.targets).float().mean().item()


def assert_passes_match(task, eager, other, call=None, seeds=(0, 1, 2), lr=None, device="cuda") -> None:
    """Forward + loss + backward of ``eager`` and of ``other`` (called through ``call``, default the model
    itself) on the same fresh batches: outputs and every parameter's gradient match (float32
    tolerances). ``lr``: after each batch, an SGD step of that size on both, so the next passes run on
    weights changed in place."""
    import torch

    for seed in seeds:
        batch = task.sample(4, torch.Generator().manual_seed(seed)).to(device)
        results = []
        for model, fn in ((eager, eager), (other, call or other)):
            model.zero_grad(set_to_none=True)
            out = fn(batch.inputs, batch.decoder_inputs)
            task.loss(out, batch).backward()
            results.append((out.detach().clone(), {n: p.grad.clone() for n, p in model.named_parameters()}))
        (out_e, g_e), (out_o, g_o) = results
        torch.testing.assert_close(out_o, out_e, rtol=1e-4, atol=1e-5)
        for name, g in g_e.items():
            torch.testing.assert_close(g_o[name], g, rtol=1e-3, atol=1e-5, msg=name)
        if lr is not None:
            with torch.no_grad():
                for a, b in zip(eager.parameters(), other.parameters()):
                    a.sub_(lr * a.grad)
                    b.sub_(lr * b.grad)
