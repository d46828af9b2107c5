"""The LSTM baseline on the native path (uwbench/models/native_cell.py) against its torch path: float64,
outputs and the gradient of every parameter, for each controller the cell kernels implement."""
from __future__ import annotations

import pytest
import torch

from uwbench import native
from uwbench.models.base import build_model

F64 = torch.float64
needs_kernels = pytest.mark.skipif(not native.available(), reason=f"native kernels: {native.unavailable_reason()}")


def _lstm(controller="ln_lstm", hidden=7, dtype=F64):
    torch.manual_seed(5)
    model = build_model("lstm", 10, 10, {"hidden_size": hidden, "controller": controller}).to(dtype)
    gen = torch.Generator().manual_seed(0)
    inputs = torch.randn(3, 6, 10, generator=gen, dtype=dtype)
    dec = torch.randn(3, 4, 10, generator=gen, dtype=dtype)
    weights = torch.randn(3, 4, 10, generator=gen, dtype=dtype)
    return model, inputs, dec, weights


def _outputs_and_grads(model, inputs, dec, weights):
    params = list(model.parameters())
    out = model(inputs, dec)
    return out, torch.autograd.grad(out, params, weights)


@needs_kernels
@pytest.mark.parametrize("controller", ["ln_lstm", "lstm", "rnn"])
@pytest.mark.parametrize("hidden", [7, 125])
def test_native_lstm_equals_torch_path(controller, hidden):
    model, inputs, dec, weights = _lstm(controller, hidden)
    ref, ref_grads = _outputs_and_grads(model, inputs, dec, weights)
    out, grads = _outputs_and_grads(model.use_native(True), inputs, dec, weights)
    torch.testing.assert_close(out, ref, rtol=1e-8, atol=1e-10)
    for (name, _), a, b in zip(model.named_parameters(), grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10, msg=lambda m: f"{name}: {m}")


@needs_kernels
def test_native_lstm_float32_is_close_to_float64():
    model, inputs, dec, _ = _lstm()
    ref = model(inputs, dec)
    out = model.to(torch.float32).use_native(True)(inputs.float(), dec.float())
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)


@needs_kernels
def test_native_lstm_two_graphs_and_a_weight_changed_before_the_backward():
    """Two graphs alive at once each get the right gradients; a weight changed in place between a forward
    and its backward is an error, not a wrong gradient."""
    model, inputs, dec, weights = _lstm()
    _, ref_grads = _outputs_and_grads(model, inputs, dec, weights)
    model.use_native(True)
    params = list(model.parameters())
    out1, out2 = model(inputs, dec), model(inputs * 0.5, dec)
    grads1 = torch.autograd.grad(out1, params, weights)
    torch.autograd.grad(out2, params, weights)
    for a, b in zip(grads1, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)
    out = model(inputs, dec)
    with torch.no_grad():
        model.controller.weight_hh.add_(1.0)
    with pytest.raises(RuntimeError, match="changed in place"):
        out.sum().backward()


@needs_kernels
def test_native_lstm_batches_with_lengths_keep_the_torch_steps():
    """Per-sequence lengths freeze each sample's state after its last step: the torch steps do that, on
    either path, so the outputs are the same."""
    model, inputs, dec, _ = _lstm()
    lengths = torch.tensor([6, 3, 1])
    ref = model(inputs, dec, lengths)
    torch.testing.assert_close(model.use_native(True)(inputs, dec, lengths), ref, rtol=0, atol=0)
    assert not torch.allclose(model(inputs, dec), ref)  # without lengths: the native whole sequence


def test_native_lstm_with_a_gru_controller_names_it():
    model, _, _, _ = _lstm("gru")
    with pytest.raises(ValueError, match="the controller GRU declares no native kernel"):
        model.use_native(True)


def test_the_lstm_target_uses_the_baselines_fastest_path():
    from uwbench.bench import targets

    rows = [{"id": "nn_lstm", "label": "torch.nn.LSTM(125)", "median_cpu_ms": 100.0},
            {"id": "lstm", "label": "lstm (125, ours)", "median_cpu_ms": 150.0},
            {"id": "lstm:native", "label": "lstm (125, ours) (native)", "median_cpu_ms": 110.0}]
    found = {t["id"]: t for t in targets.headline_targets({"rows": rows})}["lstm_vs_nn_lstm"]
    assert found["measured"] == 1.1 and found["met"] and "(native)" in found["using"]
    rows[2]["median_cpu_ms"] = 120.0
    assert not {t["id"]: t for t in targets.headline_targets({"rows": rows})}["lstm_vs_nn_lstm"]["met"]


def test_the_bench_records_the_cpu_flags():
    from uwbench.bench.render import flags_text as _flags
    from uwbench.bench.sections import CPU_FLAGS, cpu_flags, machine_info

    flags = machine_info()["cpu_flags"]
    assert set(flags) == set(CPU_FLAGS) and flags == cpu_flags()
    assert _flags({"cpu_flags": {"avx2": True, "avx512f": False, "fma": True, "neon": False}}) == "avx2 fma; no avx512f, neon"
    assert _flags({}) == "CPU flags not recorded"


def test_the_bench_records_the_instruction_set_caps(monkeypatch):
    """A run with a library's instruction set capped (our kernels at AVX2, oneDNN's, ATen's) says so in its
    result and its machine line."""
    from uwbench.bench.render import isa_text as _isa
    from uwbench.bench.sections import ISA_SETTINGS, machine_info

    for key in ISA_SETTINGS:
        monkeypatch.delenv(key, raising=False)
    assert machine_info()["isa_settings"] == {} and _isa({"isa_settings": {}}) == "" and _isa({}) == ""
    monkeypatch.setenv("UWBENCH_NATIVE_VECTOR", "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    caps = machine_info()["isa_settings"]
    assert caps == {"UWBENCH_NATIVE_VECTOR": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert _isa({"isa_settings": caps}) == "; run with UWBENCH_NATIVE_VECTOR=avx2 ONEDNN_MAX_CPU_ISA=AVX2"
