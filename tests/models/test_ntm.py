"""NTM memory: batched addressing against a written-out per-sample loop, shift and write on hand-made
weightings, parameter count, training on a tiny copy task, gradients, and frozen memory on held steps."""
from __future__ import annotations

import math

import pytest
import torch
from tests.helpers.learning import fit_and_score

from uwbench.models import ntm
from uwbench.models.memory_base import MANNConfig
from uwbench.models.ntm import NTMMemory

WRITERS = ("regular", "uniform", "cached_uniform", "random")  # every writer the NTM takes


torch.set_num_threads(1)  # CI runners and the dev machine have 2 shared cores


def _raw_iface(mem: NTMMemory, batch: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(batch, mem.interface_size, generator=gen, dtype=torch.float64) * 3.0


# ---- a slow, per-sample, per-slot version of Graves et al. Eq. 2-9 ----


def slow_address(memory, key, beta, g, s, gamma, w_prev):
    """memory (N, M), key (M), beta/g/gamma floats, s (3,) over offsets (-1, 0, +1), w_prev (N)."""
    n = memory.shape[0]
    sims = []
    for i in range(n):
        dot = sum(float(key[j]) * float(memory[i, j]) for j in range(memory.shape[1]))
        norms = math.sqrt(sum(float(v) ** 2 for v in memory[i])) * math.sqrt(sum(float(v) ** 2 for v in key))
        norms += ntm.COSINE_EPS
        sims.append(beta * dot / norms)
    top = max(sims)
    exps = [math.exp(v - top) for v in sims]
    wc = [e / sum(exps) for e in exps]
    wg = [g * wc[i] + (1 - g) * float(w_prev[i]) for i in range(n)]
    # circular convolution written as sum_j w_j s[(i - j) mod N], s indexed by offset in -1..+1
    wt = []
    for i in range(n):
        total = 0.0
        for j in range(n):
            for k, offset in enumerate((-1, 0, 1)):
                if (i - j - offset) % n == 0:
                    total += wg[j] * float(s[k])
        wt.append(total)
    powered = [v**gamma for v in wt]
    return [p / sum(powered) for p in powered]


@pytest.mark.parametrize("slots", [1, 2, 3, 5])
def test_addressing_matches_slow_loop(slots):
    gen = torch.Generator().manual_seed(slots)
    mem = NTMMemory(MANNConfig(memory_size=slots, word_size=6)).double()
    b = 4
    memory = torch.randn(b, slots, 6, generator=gen, dtype=torch.float64)
    w_prev = torch.softmax(torch.randn(b, slots, generator=gen, dtype=torch.float64), -1)
    iface = mem.parse(_raw_iface(mem, b, gen))
    for head in (iface.read, iface.write):
        fast = ntm.address(memory, head, w_prev)
        for n in range(b):
            slow = slow_address(memory[n], head.key[n], float(head.strength[n]), float(head.gate[n]),
                                head.shift[n], float(head.sharpen[n]), w_prev[n])
            torch.testing.assert_close(fast[n], torch.tensor(slow, dtype=torch.float64), rtol=1e-9, atol=1e-12)


def test_addressing_gradients_match_finite_differences():
    # sharpening divides by a detached maximum (it cancels in the ratio): the gradient must still be exact
    gen = torch.Generator().manual_seed(3)
    mem = NTMMemory(MANNConfig(memory_size=4, word_size=5)).double()
    memory = torch.randn(2, 4, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    w_prev = torch.softmax(torch.randn(2, 4, generator=gen, dtype=torch.float64), -1).requires_grad_()
    raw = _raw_iface(mem, 2, gen).requires_grad_()

    def f(memory, w_prev, raw):
        return ntm.address(memory, mem.parse(raw).write, w_prev)

    assert torch.autograd.gradcheck(f, (memory, w_prev, raw))


def test_write_and_read_match_slow_loop():
    gen = torch.Generator().manual_seed(0)
    mem = NTMMemory(MANNConfig(memory_size=5, word_size=4)).double()
    b = 3
    state = (torch.randn(b, 5, 4, generator=gen, dtype=torch.float64),
             torch.softmax(torch.randn(b, 5, generator=gen, dtype=torch.float64), -1),
             torch.softmax(torch.randn(b, 5, generator=gen, dtype=torch.float64), -1))
    iface = mem.parse(_raw_iface(mem, b, gen))
    written = mem.write(state, iface)
    r, after = mem.read(written, iface)
    for n in range(b):
        w = written[2][n]
        for i in range(5):
            for j in range(4):
                erase, add = float(iface.erase[n, j]), float(iface.add[n, j])
                want = float(state[0][n, i, j]) * (1 - float(w[i]) * erase) + float(w[i]) * add
                assert abs(float(written[0][n, i, j]) - want) < 1e-12
        wr = after[1][n]
        for j in range(4):
            want = sum(float(wr[i] * written[0][n, i, j]) for i in range(5))
            assert abs(float(r[n, j]) - want) < 1e-12
    assert torch.equal(after[0], written[0]) and torch.equal(after[2], written[2])  # read changes no memory


def test_parse_layout_and_activations():
    mem = NTMMemory(MANNConfig())
    assert mem.interface_size == 268 and mem.read_size == 64  # docs/reference.md §9.4: a 268-wide projection
    iface = mem.parse((torch.randn(7, 268) * 20).clamp(-20, 20))  # the frame clips to +-20
    for head in (iface.read, iface.write):
        assert head.key.shape == (7, 64) and head.shift.shape == (7, 3)
        assert (head.strength >= 0).all() and (head.sharpen >= 1).all()
        assert ((head.gate >= 0) & (head.gate <= 1)).all()
        torch.testing.assert_close(head.shift.sum(-1), torch.ones(7))
    assert ((iface.erase >= 0) & (iface.erase <= 1)).all() and (iface.add.abs() <= 1).all()
    assert torch.isfinite(torch.cat([h.sharpen for h in (iface.read, iface.write)])).all()


def test_read_heads_other_than_one_is_an_error():
    with pytest.raises(ValueError, match="read_heads == 1"):
        NTMMemory(MANNConfig(read_heads=2))


def test_weights_stay_normalised():
    gen = torch.Generator().manual_seed(1)
    mem = NTMMemory(MANNConfig(memory_size=4, word_size=8))
    state = mem.initial_state(16, "cpu")
    for _ in range(20):
        iface = mem.parse((torch.randn(16, mem.interface_size, generator=gen) * 10).clamp(-20, 20))
        state = mem.write(state, iface)
        _, state = mem.read(state, iface)
        for w in state[1:]:
            assert (w >= 0).all() and torch.isfinite(w).all()
            torch.testing.assert_close(w.sum(-1), torch.ones(16))


def test_gradients_finite_at_extreme_interface_values():
    # +-20 (the frame's clip) saturates every activation: near one-hot weights, gamma = 21, exact zeros
    gen = torch.Generator().manual_seed(2)
    mem = NTMMemory(MANNConfig(memory_size=4, word_size=8))
    raw = (torch.randint(0, 2, (8, 6, mem.interface_size), generator=gen).float() * 40 - 20).requires_grad_()
    state = mem.initial_state(8, "cpu")
    total = 0.0
    for t in range(6):
        iface = mem.parse(raw[:, t])
        state = mem.write(state, iface)
        r, state = mem.read(state, iface)
        total = total + r.square().sum() + state[0].sum()
    total.backward()
    assert torch.isfinite(raw.grad).all()
    for p in (mem.init_read_weights, mem.init_write_weights):  # the read vector is the frame's to use
        assert p.grad is not None and torch.isfinite(p.grad).all()


def test_shift_plus_one_moves_one_hot_with_wrap_around():
    n = 5
    w = torch.eye(n)  # sample i has all weight on slot i
    plus = torch.tensor([[0.0, 0.0, 1.0]]).expand(n, 3)  # offsets (-1, 0, +1)
    minus = torch.tensor([[1.0, 0.0, 0.0]]).expand(n, 3)
    still = torch.tensor([[0.0, 1.0, 0.0]]).expand(n, 3)
    assert torch.equal(ntm.circular_shift(w, plus), torch.roll(torch.eye(n), 1, dims=-1))
    assert torch.equal(ntm.circular_shift(w, plus)[n - 1], torch.eye(n)[0])  # the last slot wraps to 0
    assert torch.equal(ntm.circular_shift(w, minus)[0], torch.eye(n)[n - 1])  # slot 0 wraps to the last
    assert torch.equal(ntm.circular_shift(w, still), w)


def test_write_one_hot_with_full_erase_writes_the_add_vector_into_that_slot():
    b, n, m = 2, 4, 3
    memory = torch.randn(b, n, m)
    w = torch.zeros(b, n)
    w[0, 2] = 1.0
    w[1, 0] = 1.0
    v = torch.randn(b, m)
    out = ntm.erase_add(memory, w, torch.ones(b, m), v)
    for s, slot in ((0, 2), (1, 0)):
        assert torch.equal(out[s, slot], v[s])
        others = [i for i in range(n) if i != slot]
        assert torch.equal(out[s, others], memory[s, others])


def test_initial_state_shapes_and_constant_memory():
    mem = NTMMemory(MANNConfig(memory_size=4, word_size=64))
    memory, w_r, w_w = mem.initial_state(3, "cpu")
    assert memory.shape == (3, 4, 64) and torch.all(memory == ntm.MEMORY_INIT)
    for w in (w_r, w_w):
        assert w.shape == (3, 4)
        torch.testing.assert_close(w.sum(-1), torch.ones(3))
    assert not torch.allclose(w_w[0], torch.full((4,), 0.25))  # random start: slots are not symmetric
    assert mem.initial_read(3, "cpu").shape == (3, 64)
    assert mem.write_gate(mem.parse(torch.zeros(3, 268))) is None
    assert set(mem.trace_step((memory, w_r, w_w), None)) == {"write_weights", "read_weights"}


def test_memory_parameters_are_72():
    mem = NTMMemory(MANNConfig(memory_size=4, word_size=64))
    assert sum(p.numel() for p in mem.parameters()) == 64 + 2 * 4


# ---- the full model in the frame (uwbench.models.mann) ----


def _copy_task(seq_len=3):
    from uwbench.config import build
    from uwbench.registry import TASKS

    entry = TASKS.entry("copy")
    return entry.factory(build(entry.config, {"seq_len": seq_len}, "task (copy)"))


def _model(task=None, **values):
    from uwbench.models.base import build_model

    return build_model("ntm", 10, 10, values, task=task)


def test_registered():
    from uwbench.registry import MODELS

    assert "ntm" in MODELS and MODELS.entry("ntm").config is MANNConfig


def test_parameter_count_matches_paper():
    model = _model(hidden_size=100, memory_size=4, word_size=64, controller="ln_lstm")
    # docs/reference.md §9.4, second exact fit: LN-LSTM 70,600 + interface 26,800 + W_y 1,000 + W_r 640 + 64 + 8
    assert model.num_parameters() == 99_112


def test_params_reconciliation_matches_paper(capsys):
    from uwbench.cli import main
    from uwbench.config import as_dict
    from uwbench.models.params import param_report

    cfg = MANNConfig()
    r = param_report("ntm", _model(**as_dict(cfg)), cfg, 10, 10)
    assert dict(r.parts) == {"controller": 70_600, "memory": 72, "w_xi": 26_800, "w_y": 1_000, "w_r": 640}
    assert r.unused == [] and r.tf_total == r.ours == 99_112 and r.paper[1] == 99_112
    assert param_report("ntm", _model(memory_size=5), MANNConfig(memory_size=5), 10, 10).paper is None
    assert main(["params", "--model", "ntm", "--hidden-size", "100", "--memory-size", "4"]) == 0
    assert "99,112  matches" in capsys.readouterr().out


@pytest.mark.parametrize("writer", WRITERS)
def test_every_parameter_gets_a_gradient(writer):
    torch.manual_seed(0)
    task = _copy_task(seq_len=10)  # D=2: UW writes every 3rd step, CUW attends over caches of 3 states
    model = _model(task, hidden_size=16, memory_size=2, word_size=8, writer=writer)
    batch = task.sample(4, torch.Generator().manual_seed(0))
    task.loss(model(batch.inputs, batch.decoder_inputs), batch).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("writer", WRITERS)
def test_trains_on_tiny_copy_above_chance(writer):
    torch.manual_seed(0)
    task = _copy_task(seq_len=3)
    model = _model(task, hidden_size=32, memory_size=4, word_size=16, writer=writer)
    acc = fit_and_score(model, task, updates=150)
    assert acc > 0.5, acc  # chance over 10 tokens is 0.1


def test_uniform_held_steps_leave_memory_unchanged():
    torch.manual_seed(0)
    task = _copy_task(seq_len=10)
    model = _model(task, hidden_size=16, memory_size=3, word_size=8, writer="uniform")
    mem = model.memory
    assert isinstance(mem, NTMMemory)
    calls = []  # (memory before, memory after) of every write the frame makes
    original = mem.write

    def recording_write(state, iface):
        new = original(state, iface)
        calls.append((state[0].clone(), new[0].clone()))
        return new

    mem.write = recording_write
    model.tracing = True
    batch = task.sample(4, torch.Generator().manual_seed(0))
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
    te, td = batch.inputs.shape[1], batch.decoder_inputs.shape[1]
    schedule = model.writer.schedule(te)
    assert 0 < sum(schedule) < te  # some held steps
    assert len(calls) == sum(schedule) + td  # held encoder steps never call write; the decoder writes each step
    # each write starts from exactly the memory the previous write left: held steps changed nothing
    for (_, after), (before, _) in zip(calls, calls[1:]):
        assert torch.equal(before, after)
    trace = model.trace
    assert trace["write_mask"][:te].tolist() == schedule
    held = [t for t in range(te) if not schedule[t]]
    assert trace["write_weights"][:, held].abs().sum() == 0
    _, w_r0, _ = mem.initial_state(4, "cpu")
    with torch.no_grad():
        previous = (w_r0, mem.initial_read(4, "cpu"))
    for t in range(te):  # read weights and read vector carried forward on held steps
        current = (trace["read_weights"][:, t], trace["read_vectors"][:, t])
        if not schedule[t]:
            assert torch.equal(current[0], previous[0]) and torch.equal(current[1], previous[1]), t
        previous = current
