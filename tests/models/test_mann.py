"""The memory-model frame with the DNC: held steps do no memory work (memory bit-for-bit unchanged,
read vector carried), write counts, the read-only decoder, traces, per-sample independence, gradients
and the variable-length error."""
from __future__ import annotations

import pytest
import torch

from uwbench.config import build, section_keys
from uwbench.models.base import build_model
from uwbench.models.dnc_memory import DNCMemory
from uwbench.models.mann import MANN, UnsupportedLengthsError
from uwbench.models.memory_base import MANNConfig
from uwbench.registry import MODELS, TASKS
from uwbench.theory import uniform_positions

torch.set_num_threads(1)  # CI runners and the dev machine have 2 shared cores

WRITERS = ["regular", "uniform", "cached_uniform", "random"]
SMALL = dict(hidden_size=12, memory_size=3, word_size=6)


def copy_task(seq_len=10):
    entry = TASKS.entry("copy")
    return entry.factory(build(entry.config, {"seq_len": seq_len}, "task (copy)"))


def dnc(task, **values) -> MANN:
    return build_model("dnc", task.input_size, task.output_size, {**SMALL, **values}, task=task)


def own(writer, **values):
    """The writer and those of ``values`` that are its own settings (a writer rejects another's)."""
    return {"writer": writer, **{k: v for k, v in values.items() if k in section_keys(MANNConfig, {"writer": writer})}}


def sample(task, b=4, seed=0):
    return task.sample(b, torch.Generator().manual_seed(seed))


class Spy:
    """Wraps a model's memory.parse / write / read and records every call with its arguments."""

    def __init__(self, memory):
        self.calls = []
        for name in ("parse", "write", "read"):
            original = getattr(memory, name)

            def wrapped(*args, _name=name, _original=original):
                out = _original(*args)
                self.calls.append((_name, args, out))
                return out

            setattr(memory, name, wrapped)

    def count(self, name):
        return sum(1 for c in self.calls if c[0] == name)


def test_registered_with_mann_config():
    from uwbench.models.memory_base import MANNConfig

    assert "dnc" in MODELS and MODELS.entry("dnc").config is MANNConfig
    model = dnc(copy_task())
    assert isinstance(model, MANN) and isinstance(model.memory, DNCMemory)


def test_output_shape_and_clip():
    task = copy_task(5)
    model = dnc(task)
    with torch.no_grad():
        model.w_y.mul_(1e4)
        batch = sample(task)
        out = model(batch.inputs, batch.decoder_inputs)
    assert out.shape == (4, batch.decoder_inputs.shape[1], task.output_size)
    assert out.abs().max() <= 20 and (out.abs() == 20).any()


def test_interface_is_clipped_before_parse():
    task = copy_task(5)
    model = dnc(task, interface_clip=3.0)
    seen = []
    original = model.memory.parse
    model.memory.parse = lambda xi: seen.append(xi) or original(xi)
    with torch.no_grad():
        model.w_xi.mul_(100)
        batch = sample(task)
        model(batch.inputs, batch.decoder_inputs)
    assert seen and max(x.abs().max() for x in seen) == 3.0


@pytest.mark.parametrize("seq_len,memory_size", [(10, 3), (50, 4), (7, 9)])
def test_uniform_writes_only_on_schedule_and_decoder_every_step(seq_len, memory_size):
    task = copy_task(seq_len)
    model = dnc(task, writer="uniform", memory_size=memory_size)
    spy = Spy(model.memory)
    batch = sample(task)
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
    te, td = batch.inputs.shape[1], batch.decoder_inputs.shape[1]
    writes = len(uniform_positions(te, memory_size))
    assert spy.count("write") == writes + td
    assert spy.count("read") == writes + td
    assert spy.count("parse") == writes + td  # a held step does not even activate the interface


def test_held_steps_leave_memory_bit_for_bit_unchanged():
    """Between consecutive memory operations the frame hands the memory exactly the state the last
    read returned: the held steps in between changed nothing."""
    task = copy_task(12)
    model = dnc(task, writer="uniform")
    spy = Spy(model.memory)
    batch = sample(task)
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
    ops = [c for c in spy.calls if c[0] in ("write", "read")]
    for (name, args, out), (next_name, next_args, _) in zip(ops, ops[1:]):
        if name == "read":
            assert next_name == "write"
            returned, handed = out[1], next_args[0]
            for a, b in zip(returned, handed):
                assert torch.equal(a, b)


def test_trace_shows_held_memory_and_carried_read_vector():
    task = copy_task(12)
    model = dnc(task, writer="uniform")
    model.tracing = True
    batch = sample(task)
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
    tr = model.trace
    te, td = batch.inputs.shape[1], batch.decoder_inputs.shape[1]
    mask = tr["write_mask"].tolist()
    expected = [t in uniform_positions(te, SMALL["memory_size"]) for t in range(te)] + [True] * td
    assert mask == expected and tr["encoder_steps"] == te
    rv, wr, ww = tr["read_vectors"], tr["read_weights"], tr["write_weights"]
    assert rv.shape == (4, te + td, 6) and wr.shape == (4, te + td, 1, 3) and ww.shape == (4, te + td, 3)
    assert tr["write_gate"].shape == (4, te + td)
    first = mask.index(True)
    assert torch.all(rv[:, :first] == 1e-6)  # the initial read vector is carried until the first write
    for t in range(1, te):
        if not mask[t]:
            assert torch.equal(rv[:, t], rv[:, t - 1]) and torch.equal(wr[:, t], wr[:, t - 1])
            assert torch.all(ww[:, t] == 0)
        else:
            assert not torch.equal(rv[:, t], rv[:, t - 1])
    assert ((tr["write_gate"] > 0) & (tr["write_gate"] < 1)).all()  # computed on held steps too
    assert tr["cache_attention"] == {}


def test_tracing_off_records_nothing():
    task = copy_task(5)
    model = dnc(task, writer="cached_uniform")
    batch = sample(task)
    model(batch.inputs, batch.decoder_inputs)
    assert model.trace == {}


def test_read_only_decoder():
    task = copy_task(10)
    model = dnc(task, writer="uniform", decoder_write=False)
    spy = Spy(model.memory)
    model.tracing = True
    batch = sample(task)
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
    te, td = batch.inputs.shape[1], batch.decoder_inputs.shape[1]
    writes = len(uniform_positions(te, SMALL["memory_size"]))
    assert spy.count("write") == writes
    assert spy.count("read") == writes + td
    assert not model.trace["write_mask"][te:].any()
    assert torch.all(model.trace["write_weights"][:, te:] == 0)


@pytest.mark.parametrize("writer", WRITERS)
def test_read_only_decoder_reads_the_encoder_memory_unchanged(writer):
    """With ``decoder_write=False`` every decoder read sees, bit for bit, the memory (and link) the
    encoder left: the decoder cannot overwrite what the writer stored (docs/reference.md §5.4)."""
    task = copy_task(10)
    model = dnc(task, decoder_write=False, **own(writer, cache_size=3))
    spy = Spy(model.memory)
    batch = sample(task)
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
    states = [args[0] for name, args, _ in spy.calls if name == "read"]  # the state each read starts from
    td = batch.decoder_inputs.shape[1]
    last_encoder, decoder = states[-td - 1], states[-td:]
    for state in decoder:
        assert torch.equal(state.memory, last_encoder.memory)
        assert torch.equal(state.link, last_encoder.link)
        assert torch.equal(state.usage, last_encoder.usage)


def test_decoder_that_writes_changes_the_memory():
    """The contrast: the released code's decoder (``decoder_write=True``) writes at every step."""
    task = copy_task(10)
    model = dnc(task, writer="uniform", decoder_write=True)
    spy = Spy(model.memory)
    batch = sample(task)
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
    td = batch.decoder_inputs.shape[1]
    reads = [args[0] for name, args, _ in spy.calls if name == "read"]
    assert not torch.equal(reads[-1].memory, reads[-td - 1].memory)


@pytest.mark.parametrize("writer", WRITERS)
def test_perturbing_one_sample_changes_no_other(writer):
    torch.manual_seed(0)
    task = copy_task(10)
    model = dnc(task, **own(writer, cache_size=3))
    batch = sample(task, b=6)
    other = batch.inputs.clone()
    other[2] = torch.roll(other[2], 1, dims=-1)  # a different token sequence for sample 2 only
    with torch.no_grad():
        a = model(batch.inputs, batch.decoder_inputs)
        b = model(other, batch.decoder_inputs)
    keep = [0, 1, 3, 4, 5]
    torch.testing.assert_close(a[keep], b[keep], rtol=0, atol=1e-6)
    assert (a[2] - b[2]).abs().max() > 1e-4


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("controller", ["ln_lstm", "lstm", "gru", "rnn"])
def test_every_parameter_gets_a_gradient(writer, controller):
    torch.manual_seed(1)
    task = copy_task(8)
    model = dnc(task, controller=controller, **own(writer, cache_size=2, writer_seed=0))
    batch = sample(task)
    task.loss(model(batch.inputs, batch.decoder_inputs), batch).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_more_read_heads():
    task = copy_task(6)
    model = dnc(task, read_heads=2)
    assert model.read_size == 12 and model.w_r.shape == (12, task.output_size)
    batch = sample(task)
    out = model(batch.inputs, batch.decoder_inputs)
    assert torch.isfinite(out).all()


def test_variable_lengths_are_a_clear_error():
    task = copy_task(5)
    model = dnc(task)
    batch = sample(task)
    with pytest.raises(UnsupportedLengthsError, match="lengths is None"):
        model(batch.inputs, batch.decoder_inputs, lengths=torch.tensor([6, 5, 4, 6]))
    assert issubclass(UnsupportedLengthsError, ValueError) and issubclass(UnsupportedLengthsError, NotImplementedError)


def test_schedule_follows_the_batch_length():
    """One model, batches of different T: the uniform schedule is computed per batch length."""
    task = copy_task(20)
    model = dnc(task, writer="uniform")
    spy = Spy(model.memory)
    with torch.no_grad():
        for t in (20, 9):
            tokens = torch.randint(1, 10, (2, t), generator=torch.Generator().manual_seed(t))
            b = task.make_batch(tokens)
            before = spy.count("write")
            model(b.inputs, b.decoder_inputs)
            assert spy.count("write") - before == len(uniform_positions(t + 1, 3)) + t + 1


@pytest.mark.parametrize("writer", ["regular", "uniform", "cached_uniform"])
def test_encode_is_the_state_the_decoder_starts_from(writer):
    """``encode`` (the contribution analyser's ``--target state``) returns h_Te of the same forward pass: the
    controller state after the last encoder step, with the writer's memory writes and CUW's attention."""
    torch.manual_seed(0)
    task = copy_task(9)
    model = dnc(task, **own(writer, cache_size=3))
    batch = sample(task, b=3)
    states = []
    original = model.controller.step

    def spy(g, state):
        h, new_state = original(g, state)
        states.append(h)
        return h, new_state

    model.controller.step = spy
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
        h_encoder = states[batch.inputs.shape[1] - 1]  # (B, H) after the last encoder step
        states.clear()
        h = model.encode(batch.inputs)
    assert h.shape == (3, SMALL["hidden_size"]) and len(states) == batch.inputs.shape[1]
    torch.testing.assert_close(h, h_encoder, rtol=0, atol=0)


def test_contributions_to_a_mann_state_reach_every_input():
    from uwbench import analysis as an

    torch.manual_seed(0)
    task = copy_task(6)
    model = dnc(task, writer="uniform")
    c = an.contributions(an.ModelProbe(model, "state"), sample(task, b=2).inputs)
    assert c.shape == (7,) and bool((c > 0).all())  # the controller reads every step, held or not


def test_lstm_baseline_encode_is_the_state_its_decoder_starts_from():
    torch.manual_seed(0)
    task = copy_task(5)
    model = build_model("lstm", task.input_size, task.output_size, {"hidden_size": 8}, task=task)
    batch = sample(task, b=3)
    states = []
    original = model.controller.step
    model.controller.step = lambda g, state: states.append(original(g, state)) or states[-1]
    with torch.no_grad():
        model(batch.inputs, batch.decoder_inputs)
        h_encoder = states[batch.inputs.shape[1] - 1][0]
        h = model.encode(batch.inputs)
    torch.testing.assert_close(h, h_encoder, rtol=0, atol=0)
