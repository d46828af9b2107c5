import math

import pytest
import torch

from uwbench.models.controllers import LN_EPS, build_controller
from uwbench.registry import CONTROLLERS


def slow_layer_norm(v, gain, shift, eps=LN_EPS):
    n = len(v)
    mean = sum(v) / n
    var = sum((x - mean) ** 2 for x in v) / n
    return [(x - mean) / math.sqrt(var + eps) * g + s for x, g, s in zip(v, gain, shift)]


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def slow_ln_lstm_step(cell, x, h, c):
    """TF LayerNormBasicLSTMCell written out per unit for one sample (docs/reference.md §3.2)."""
    H = cell.hidden_size
    K = torch.cat([cell.weight_ih, cell.weight_hh]).tolist()  # (I+H, 4H)
    inp = x + h
    z = [sum(inp[k] * K[k][j] for k in range(len(inp))) for j in range(4 * H)]
    gates = []
    for g in range(4):  # i, j, f, o, each normalised on its own
        ln = cell.ln_gates[g]
        gates.append(slow_layer_norm(z[g * H:(g + 1) * H], ln.gain.tolist(), ln.shift.tolist()))
    i, j, f, o = gates
    c_new = [c[u] * sigmoid(f[u] + 1.0) + sigmoid(i[u]) * math.tanh(j[u]) for u in range(H)]
    c_new = slow_layer_norm(c_new, cell.ln_cell.gain.tolist(), cell.ln_cell.shift.tolist())
    h_new = [math.tanh(c_new[u]) * sigmoid(o[u]) for u in range(H)]
    return h_new, c_new


def test_ln_lstm_matches_a_slow_written_out_reference():
    torch.manual_seed(0)
    cell = build_controller("ln_lstm", 3, 4).double()
    with torch.no_grad():  # non-trivial gains and shifts so they are exercised
        for ln in list(cell.ln_gates) + [cell.ln_cell]:
            ln.gain.uniform_(0.5, 1.5)
            ln.shift.uniform_(-0.5, 0.5)
    x = torch.randn(2, 5, 3, dtype=torch.double)
    state = cell.initial_state(2, "cpu", torch.double)
    for t in range(5):
        ref = []
        for b in range(2):
            ref.append(slow_ln_lstm_step(cell, x[b, t].tolist(), state[0][b].tolist(), state[1][b].tolist()))
        h, state = cell(x[:, t], state)
        for b in range(2):
            assert torch.allclose(h[b], torch.tensor(ref[b][0], dtype=torch.double), atol=1e-10)
            assert torch.allclose(state[1][b], torch.tensor(ref[b][1], dtype=torch.double), atol=1e-10)


@pytest.mark.parametrize(
    "name, count",
    [
        ("ln_lstm", lambda n_in, H: 4 * H * (n_in + H) + 10 * H),  # docs/reference.md §3.2
        ("lstm", lambda n_in, H: 4 * H * (n_in + H + 1)),
        ("gru", lambda n_in, H: 3 * H * (n_in + H + 1)),
        ("rnn", lambda n_in, H: H * (n_in + H + 1)),
    ],
)
def test_parameter_counts_match_tensorflow_cells(name, count):
    cell = build_controller(name, 74, 100)
    assert sum(p.numel() for p in cell.parameters()) == count(74, 100)


@pytest.mark.parametrize("name", ["ln_lstm", "lstm", "gru", "rnn"])
def test_precomputed_projection_equals_the_plain_step(name):
    torch.manual_seed(1)
    cell = build_controller(name, 6, 5)
    x = torch.randn(3, 6)
    state = cell.initial_state(3, "cpu")
    h1, _ = cell(x, state)
    gx = cell.project(x[:, :4], 0, 4) + cell.project(x[:, 4:], 4, 6)  # split input, as the memory models do
    h2, _ = cell.step(gx, state)
    assert torch.allclose(h1, h2, atol=1e-6)
    assert h1.shape == (3, 5)


def test_all_controllers_registered():
    assert set(CONTROLLERS.names()) >= {"ln_lstm", "lstm", "gru", "rnn"}

