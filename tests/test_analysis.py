"""Tests for uwbench.analysis (c_{i,T} = ||dh_T/dx_i|| by autograd, the fitted lambda) and the
`uwbench theory contributions` command. The reference is the linear RNN of the paper's appendix A,
h_t = W x_t + U h_{t-1}, where dh_T/dx_i = U^{T-i} W exactly."""
from __future__ import annotations

import argparse
import math
import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from uwbench import analysis as an
from uwbench.commands import theory as cmd
from uwbench.registry import UnknownNameError


def direct_contributions(W: torch.Tensor, U: torch.Tensor, T: int, ord="fro") -> np.ndarray:
    """||U^{T-i} W|| for i = 1..T, computed directly in float64 (no autograd)."""
    W, U = W.detach().double(), U.detach().double()
    out = [torch.linalg.matrix_norm(torch.linalg.matrix_power(U, T - i) @ W, ord=ord).item() for i in range(1, T + 1)]
    return np.array(out)


@pytest.mark.parametrize("norm, ord", [("fro", "fro"), ("spectral", 2)])
def test_linear_rnn_contributions_equal_the_matrix_powers(norm, ord):
    torch.manual_seed(0)
    W = torch.randn(5, 3)  # (H, I)
    U = torch.randn(5, 5) * 0.4  # (H, H) a general, non-normal U
    model = an.LinearRNN.from_matrices(W, U)
    x = torch.randn(4, 15, 3)  # (B, T, I)
    c = an.contributions(model, x, norm=norm)
    assert c.shape == (15,) and c.dtype == np.float64
    np.testing.assert_allclose(c, direct_contributions(W, U, 15, ord), rtol=2e-5, atol=1e-9)


def test_per_sample_contributions():
    model = an.LinearRNN(3, 4, radius=0.7, seed=2)
    x = torch.randn(3, 6, 3)
    per = an.contributions(model, x, reduce="none")
    assert per.shape == (3, 6)
    np.testing.assert_allclose(per, np.broadcast_to(per[0], per.shape), rtol=1e-6)  # linear: same Jacobian
    np.testing.assert_allclose(an.contributions(model, x), per.mean(axis=0))


@settings(max_examples=12, deadline=None)
@given(radius=st.floats(0.5, 1.15), seed=st.integers(0, 10_000))
def test_fit_recovers_the_spectral_radius_of_a_scaled_orthogonal_u(radius, seed):
    model = an.LinearRNN(3, 6, radius=radius, seed=seed)
    rho = torch.linalg.eigvals(model.U.detach().double()).abs().max().item()
    assert rho == pytest.approx(radius, rel=1e-5)
    c = an.contributions(model, torch.zeros(1, 25, 3))
    fit = an.fit_lambda(c)
    assert fit.lam == pytest.approx(rho, rel=1e-4)
    assert fit.r2 > 0.9999 and fit.points == 25
    assert fit.scale == pytest.approx(torch.linalg.matrix_norm(model.W.detach()).item(), rel=1e-4)  # c_TT = ||W||
    assert an.equivalent_lambda(c) == pytest.approx(rho, rel=1e-4)


def test_fit_recovers_the_spectral_radius_of_a_symmetric_u_from_the_tail():
    # U = Q diag(0.8, 0.5, ...) Q^T: ||U^k W|| ~ 0.8^k once the smaller eigenvalues have died out
    g = torch.Generator().manual_seed(3)
    q = an.random_orthogonal(6, g).double()
    U = q @ torch.diag(torch.tensor([0.8, 0.5, -0.45, 0.3, 0.2, 0.1], dtype=torch.float64)) @ q.T
    model = an.LinearRNN.from_matrices(torch.randn(6, 2, generator=g), U.float())
    c = an.contributions(model, torch.zeros(1, 60, 2))
    whole, tail = an.fit_lambda(c), an.fit_lambda(c, min_distance=15)
    assert tail.lam == pytest.approx(0.8, abs=0.01)
    assert tail.min_distance == 15 and tail.max_distance == 59 and tail.points == 45
    assert abs(tail.lam - 0.8) < abs(whole.lam - 0.8)  # the early steps mix in the faster modes


def test_generic_callable_probe():
    M = torch.randn(3, 4)
    fn = lambda x: x.sum(dim=1) @ M  # noqa: E731  every input counts the same: c = ||M^T||
    c = an.contributions(fn, torch.randn(2, 7, 3))
    np.testing.assert_allclose(c, torch.linalg.matrix_norm(M).item(), rtol=1e-6)
    assert an.fit_lambda(c).lam == pytest.approx(1.0)
    last_only = lambda x: x[:, -1] * 2.0  # noqa: E731  only x_T counts
    c = an.contributions(last_only, torch.randn(2, 5, 3))
    np.testing.assert_allclose(c, [0, 0, 0, 0, 2 * math.sqrt(3)], atol=1e-7)


def test_contributions_reject_bad_shapes_and_names():
    with pytest.raises(ValueError, match=r"must return \(B, H\)"):
        an.contributions(lambda x: x.sum(), torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match=r"inputs must be \(B, T, I\)"):
        an.contributions(lambda x: x, torch.randn(5, 3))
    with pytest.raises(ValueError, match=r"`norm in"):
        an.contributions(lambda x: x[:, -1], torch.randn(2, 5, 3), norm="nuclear")


def test_contributions_work_under_no_grad():
    model = an.LinearRNN(2, 3, radius=0.5)
    with torch.no_grad():
        c = an.contributions(model, torch.randn(1, 4, 2))
    assert np.all(c > 0)


def test_fit_lambda_exact_and_edge_cases():
    k = np.arange(10)[::-1]  # distance T - i for i = 1..10
    c = 3.0 * 0.7**k
    fit = an.fit_lambda(c)
    assert fit.lam == pytest.approx(0.7) and fit.scale == pytest.approx(3.0) and fit.r2 == pytest.approx(1.0)
    np.testing.assert_allclose(fit.predict(k), c)
    c_with_zero = c.copy()
    c_with_zero[0] = 0.0  # the oldest input: no contribution; left out of the log fit
    assert an.fit_lambda(c_with_zero).points == 9 and an.fit_lambda(c_with_zero).lam == pytest.approx(0.7)
    c_bent = c.copy()
    c_bent[:3] *= 100.0  # distances 7..9 off the line; max_distance leaves them out
    assert an.fit_lambda(c_bent, max_distance=6).lam == pytest.approx(0.7)
    assert an.fit_lambda(c_bent).lam != pytest.approx(0.7, rel=1e-3)
    flat = np.full(10, 2.0) * (1 + 1e-8 * np.cos(np.arange(10)))  # lambda = 1 up to rounding noise
    assert an.fit_lambda(flat).lam == pytest.approx(1.0) and an.fit_lambda(flat).r2 == 1.0
    noisy = 2.0 * 0.9 ** k * np.exp(0.3 * np.cos(3 * k))  # off the line: R^2 well below 1
    assert an.fit_lambda(noisy).r2 < 0.95
    with pytest.raises(ValueError, match="at least 2 positive contributions"):
        an.fit_lambda([0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="one-dimensional"):
        an.fit_lambda(np.ones((2, 3)))


def test_equivalent_lambda_is_theorem_one():
    c = 2.0 * 1.1 ** np.arange(8)[::-1]
    assert an.equivalent_lambda(c) == pytest.approx(1.1, rel=1e-9)
    c = np.array([0.1, 0.5, 0.2, 1.0])  # not geometric: sum c = c_TT f_lambda(4) still defines lambda
    lam = an.equivalent_lambda(c)
    from uwbench.theory import f_lambda

    assert c[-1] * f_lambda(4, lam) == pytest.approx(c.sum(), rel=1e-9)
    with pytest.raises(ValueError, match=r"`sum\(c\) > c_TT` must hold"):
        an.equivalent_lambda([0.0, 0.0, 1.0])


def test_controller_probe_from_the_registry():
    probe = an.build_probe("controller", 4, 4, an.ProbeOptions(controller="rnn", hidden_size=5, seed=1))
    again = an.build_probe("controller", 4, 4, an.ProbeOptions(controller="rnn", hidden_size=5, seed=1))
    x = torch.randn(2, 6, 4)
    assert probe(x).shape == (2, 5)
    torch.testing.assert_close(probe(x), again(x))  # seeded
    c = an.contributions(probe, x)
    assert c.shape == (6,) and np.all(c > 0)


def test_unknown_probe_names_raise_the_registry_error():
    with pytest.raises(UnknownNameError, match=r"unknown model 'linear_rnnx'.*Known models"):
        an.build_probe("linear_rnnx", 4, 4)
    with pytest.raises(UnknownNameError, match=r"unknown controller"):
        an.build_probe("controller", 4, 4, an.ProbeOptions(controller="nope"))


class TinySeq2Seq(torch.nn.Module):
    """A stand-in seq2seq model: the decoder output is a linear read of the encoder's sum."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 2, bias=False)

    def forward(self, inputs, decoder_inputs):
        assert decoder_inputs.shape == (inputs.shape[0], 1, inputs.shape[2])
        return self.proj(inputs.sum(1) + decoder_inputs[:, 0]).unsqueeze(1)  # (B, 1, O)


def test_model_probe_targets():
    model = TinySeq2Seq()
    probe = an.ModelProbe(model, "output")
    c = an.contributions(probe, torch.randn(2, 4, 3))
    np.testing.assert_allclose(c, torch.linalg.matrix_norm(model.proj.weight.detach()).item(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"needs the model to define `encode"):
        an.ModelProbe(model, "state")
    model.encode = lambda x: x[:, 0] * 1.0  # only x_1 counts
    c = an.contributions(an.ModelProbe(model, "state"), torch.randn(2, 4, 3))
    np.testing.assert_allclose(c, [math.sqrt(3), 0, 0, 0], atol=1e-7)


def test_load_checkpoint(tmp_path):
    trained = an.LinearRNN(3, 4, radius=0.6, seed=1)
    fresh = an.LinearRNN(3, 4, radius=0.9, seed=2)
    torch.save({"model": trained.state_dict(), "step": 100}, tmp_path / "ckpt.pt")
    an.load_checkpoint(fresh, str(tmp_path / "ckpt.pt"))
    torch.testing.assert_close(fresh.U, trained.U)
    torch.save(trained.state_dict(), tmp_path / "raw.pt")
    other = an.LinearRNN(3, 4, seed=5)
    an.load_checkpoint(other, str(tmp_path / "raw.pt"))
    assert an.fit_lambda(an.contributions(other, torch.zeros(1, 10, 3))).lam == pytest.approx(0.6, rel=1e-4)


# ---------------------------------------------------------------------------------------- the command


def parse(argv):
    parser = argparse.ArgumentParser(prog="uwbench theory")
    cmd.add_arguments(parser)
    return parser.parse_args(argv)


def test_contributions_figure():
    c = 2.0 * 0.8 ** np.arange(12)[::-1]
    c[0] = 0.0  # not drawable on a log axis
    fit = an.fit_lambda(c)
    fig = cmd.figure_contributions(c, fit, "Contributions to h_T: test")
    (ax,) = fig.axes
    assert ax.get_title() == "Contributions to h_T: test"
    assert ax.get_yscale() == "log" and "T - i" in ax.get_xlabel() and "c_{i,T}" in ax.get_ylabel()
    measured, fitted = ax.get_lines()
    np.testing.assert_allclose(measured.get_xdata(), np.arange(11))  # distances 0..10 (11 had c = 0)
    np.testing.assert_allclose(measured.get_ydata(), 2.0 * 0.8 ** np.arange(11))
    np.testing.assert_allclose(fitted.get_ydata(), fit.predict(fitted.get_xdata()))
    assert "0.8000" in fitted.get_label()


def test_contributions_command_on_a_linear_rnn(tmp_path, capsys):
    args = parse(["contributions", "--model", "linear-rnn", "--seq-len", "12", "--hidden-size", "6",
                  "--batch-size", "2", "--radius", "0.85", "--memory-size", "3", "--cache-size", "2",
                  "--out", str(tmp_path)])
    assert cmd.run(args) == 0
    out = capsys.readouterr().out
    assert "fitted lambda = 0.8500" in out and "Theorem 1 lambda" in out
    assert "g_lambda(13, 3)" in out and "cached_uniform" in out  # the bounds predicted at the fitted lambda
    path = out.strip().splitlines()[-1]
    assert path == os.path.join(str(tmp_path), "contributions_linear-rnn_copy_T12.png")
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_contributions_command_on_an_untrained_controller(tmp_path, capsys):
    args = parse(["contributions", "--model", "controller", "--controller", "gru", "--seq-len", "8",
                  "--hidden-size", "4", "--batch-size", "2", "--out", str(tmp_path)])
    assert cmd.run(args) == 0
    out = capsys.readouterr().out
    assert "model controller-gru (untrained)" in out and "fitted lambda = " in out
    assert os.path.exists(os.path.join(str(tmp_path), "contributions_controller-gru_copy_T8.png"))


def test_contributions_command_unknown_model(tmp_path):
    with pytest.raises(UnknownNameError, match="Known models"):
        cmd.run(parse(["contributions", "--model", "no-such-model", "--seq-len", "5", "--out", str(tmp_path)]))
