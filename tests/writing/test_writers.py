"""Writers: schedules (regular, uniform, cached uniform, random), the random mask's seeding, the CUW
cache (exactly the states since the last write, attention replacing h), and every writer learning a
tiny copy task."""
from __future__ import annotations

import pytest
import torch
from tests.helpers.learning import fit_and_score

from uwbench.config import build
from uwbench.models.base import build_model
from uwbench.models.memory_base import MANNConfig
from uwbench.registry import WRITERS
from uwbench.tasks import build_task
from uwbench.writing.cached_uniform import CacheAttention
from uwbench.writing.random import RandomWriter

torch.set_num_threads(1)  # CI runners and the dev machine have 2 shared cores

ALL = ["regular", "uniform", "cached_uniform", "random"]


def copy_task(seq_len):
    return build_task("copy", {"seq_len": seq_len})


def writer(name, max_steps=51, **values):
    return WRITERS.get(name)(build(MANNConfig, {"writer": name, **values}, "model"), max_steps)


def positions(mask):
    return [t for t, w in enumerate(mask) if w]


def test_all_writers_registered():
    assert set(ALL) <= set(WRITERS.names())
    assert [WRITERS.get(n).cached for n in ALL] == [False, False, True, False]


def test_regular_writes_every_step():
    assert writer("regular").schedule(7) == [True] * 7


def test_uniform_schedule_at_the_papers_settings():
    # docs/reference.md §5.1: T=50, D=4 -> s = 10, positions 10..50 on the 51 encoder steps (eos written)
    assert positions(writer("uniform", memory_size=4).schedule(51)) == [10, 20, 30, 40, 50]
    assert positions(writer("uniform", memory_size=4).schedule(101)) == [20, 40, 60, 80, 100]
    assert positions(writer("uniform", memory_size=24).schedule(51)) == list(range(2, 51, 2))
    # the paper's Eq. 7: 1-indexed t = k * floor(T/(D+1)) on the T tokens -> 0-indexed 9, 19, ...
    assert positions(writer("uniform", memory_size=4, schedule="paper").schedule(51)) == [9, 19, 29, 39, 49]


def test_cached_uniform_interval_is_min_of_s_and_cache_size():
    assert positions(writer("cached_uniform", memory_size=4, cache_size=5).schedule(51)) == list(range(5, 51, 5))
    assert positions(writer("cached_uniform", memory_size=4, cache_size=100).schedule(51)) == [10, 20, 30, 40, 50]
    assert positions(writer("cached_uniform", memory_size=4, cache_size=1).schedule(8)) == list(range(1, 8))


def test_random_mask_is_reproducible_by_seed():
    a = writer("random", max_steps=200, writer_seed=7)
    b = writer("random", max_steps=200, writer_seed=7)
    c = writer("random", max_steps=200, writer_seed=8)
    assert a.mask == b.mask and a.mask != c.mask
    torch.manual_seed(3)
    d = writer("random", max_steps=200)
    torch.manual_seed(3)
    e = writer("random", max_steps=200)
    assert d.mask == e.mask  # without a seed: the (trainer-seeded) global RNG
    assert a.schedule(50) == a.schedule(50) == a.mask[:50]  # one mask, reused for every batch


def test_random_mask_probability():
    w = writer("random", max_steps=20001, memory_size=4, writer_seed=0)
    assert w.write_prob == pytest.approx(5 / 20000)
    w = writer("random", max_steps=51, memory_size=4)
    assert w.write_prob == pytest.approx(0.1)  # (D+1)/T, docs/reference.md §5.3
    w = writer("random", max_steps=20001, write_prob=0.3, writer_seed=0)
    assert abs(sum(w.mask) / len(w.mask) - 0.3) < 0.02
    assert writer("random", max_steps=3, memory_size=4).write_prob == 1.0  # (D+1)/T capped at 1


def test_random_writer_needs_the_task_and_covers_its_length():
    with pytest.raises(ValueError, match="max_steps >= 1"):
        RandomWriter(MANNConfig(writer="random"), None)
    with pytest.raises(ValueError, match="n_steps <= 11"):
        writer("random", max_steps=11).schedule(12)


def test_random_mask_survives_a_checkpoint():
    task = copy_task(30)
    torch.manual_seed(0)
    a = build_model("dnc", 10, 10, {"writer": "random", "hidden_size": 8, "word_size": 4}, task=task)
    torch.manual_seed(1)
    b = build_model("dnc", 10, 10, {"writer": "random", "hidden_size": 8, "word_size": 4}, task=task)
    assert a.writer.mask != b.writer.mask
    b.load_state_dict(a.state_dict())
    assert b.writer.mask == a.writer.mask and b.writer.schedule(31) == a.writer.schedule(31)


def test_cache_attention_is_a_convex_combination():
    torch.manual_seed(0)
    att = CacheAttention(hidden_size=5, read_size=3, attention_size=4)
    assert sum(p.numel() for p in att.parameters()) == 4 * (2 * 5 + 3 + 1)
    h, r = torch.randn(2, 5), torch.randn(2, 3)
    cache = torch.randn(2, 4, 5)
    a, alpha = att(h, cache, r)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(2))
    torch.testing.assert_close(a, (alpha.unsqueeze(-1) * cache).sum(1))
    one, alpha1 = att(h, cache[:, :1], r)
    assert torch.equal(alpha1, torch.ones(2, 1)) and torch.allclose(one, cache[:, 0])


@pytest.mark.parametrize("controller", ["ln_lstm", "gru"])
def test_cuw_cache_holds_exactly_the_states_since_the_last_write(controller):
    torch.manual_seed(0)
    task = copy_task(12)
    model = build_model("dnc", 10, 10, {"writer": "cached_uniform", "memory_size": 2, "cache_size": 3,
                                        "hidden_size": 8, "word_size": 4, "controller": controller}, task=task)
    model.tracing = True
    steps, attended = [], []  # controller calls: (incoming state, outgoing h); attention calls
    step, attend = model.controller.step, model.cache_attention.forward

    def spy_step(gx, state):
        h, new = step(gx, state)
        steps.append((state, h))
        return h, new

    def spy_attend(h, cache, r):
        a, alpha = attend(h, cache, r)
        attended.append((len(steps), h, cache, r, a))
        return a, alpha

    model.controller.step, model.cache_attention.forward = spy_step, spy_attend
    batch = task.sample(3, torch.Generator().manual_seed(0))
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
    te = batch.inputs.shape[1]
    write_steps = positions(model.writer.schedule(te))
    assert write_steps == [3, 6, 9, 12]  # s = floor(13 / 3) = 4, interval min(4, L=3) = 3
    assert [t for t, *_ in attended] == write_steps  # attention only at encoder write steps
    zero = torch.zeros(3, 8)
    outs = [zero] + [h for _, h in steps[:te]]  # outs[t] = h_{t-1}
    last = 0
    for t, h, cache, r, a in attended:
        want = torch.stack(outs[last:t + 1], dim=1)  # h_{last-1} .. h_{t-1}: the states since the last write
        assert torch.equal(cache, want)
        assert torch.equal(h, outs[t])  # the query is h_{t-1}
        assert torch.equal(steps[t][0][0], a)  # a_t replaces h_{t-1} as the controller's incoming state
        last = t + 1
        assert torch.equal(r, model.trace["read_vectors"][:, t - 1])  # r_{t-1}
    assert [a.shape[1] for a in model.trace["cache_attention"].values()] == [4, 3, 3, 3]


def test_cuw_keeps_the_lstm_cell():
    torch.manual_seed(0)
    task = copy_task(6)
    model = build_model("dnc", 10, 10, {"writer": "cached_uniform", "memory_size": 2, "cache_size": 2,
                                        "hidden_size": 8, "word_size": 4}, task=task)
    calls = []  # (incoming state, (h, outgoing state))
    step = model.controller.step

    def spy_step(gx, state):
        out = step(gx, state)
        calls.append((state, out))
        return out

    model.controller.step = spy_step
    batch = task.sample(2, torch.Generator().manual_seed(1))
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
    write_steps = positions(model.writer.schedule(batch.inputs.shape[1]))
    assert write_steps == [2, 4, 6]
    for t in write_steps:
        produced_h, produced_c = calls[t - 1][1][1]
        incoming_h, incoming_c = calls[t][0]
        assert torch.equal(incoming_c, produced_c)  # c_{t-1} kept
        assert not torch.equal(incoming_h, produced_h)  # h_{t-1} replaced by a_t
    for t in (1, 3, 5):  # held steps: the state passes through untouched
        assert all(torch.equal(a, b) for a, b in zip(calls[t][0], calls[t - 1][1][1]))


@pytest.mark.parametrize("name", ALL)
def test_every_writer_learns_a_tiny_copy_task(name):
    """T=6, D=2 (uniform: writes at 2, 4, 6; random: p = 0.5). Chance with the eos learned is about
    (6/9 + 1)/7 = 0.24."""
    torch.manual_seed(0)
    task = copy_task(6)
    model = build_model("dnc", 10, 10, {"writer": name, "memory_size": 2, "hidden_size": 32, "word_size": 16},
                        task=task)
    acc = fit_and_score(model, task, updates=100)
    assert acc > 0.35, acc
