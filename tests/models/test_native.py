"""The native whole-sequence path (uwbench/models/native.py, uwbench/native/*.cpp) against the torch path.

Every check is float64 against the model's own torch forward (itself checked against a plain per-step
loop in test_perf_paths.py), values and the gradient of every parameter, for each memory, writer and
controller the kernels implement. The kernels are compiled once per machine into a cache folder; the
tests skip (with the reason) where no C++ compiler is available.
"""
from __future__ import annotations

import platform
import warnings

import pytest
import torch

from uwbench import native
from uwbench.config import build
from uwbench.models.base import build_model
from uwbench.models.native import unsupported_reason
from uwbench.registry import TASKS
from uwbench.training import compile_policy

F64 = torch.float64
WRITER_OWN = {"regular": {}, "uniform": {}, "cached_uniform": {"cache_size": 2}, "random": {"writer_seed": 0}}

needs_kernels = pytest.mark.skipif(not native.available(), reason=f"native kernels: {native.unavailable_reason()}")


def copy_task(seq_len):
    entry = TASKS.entry("copy")
    return entry.factory(build(entry.config, {"seq_len": seq_len}, "task (copy)"))


def _model(name, seq_len=7, dtype=F64, **values):
    torch.manual_seed(3)
    task = copy_task(seq_len)
    cfg = {"memory_size": 3, "hidden_size": 6, "word_size": 4, "interface_clip": 3.0, **values}
    model = build_model(name, 10, 10, cfg, task=task).to(dtype)
    with torch.no_grad():
        model.w_xi.mul_(10.0)  # sharp gates and weightings, and many interface entries beyond the clip
    batch = task.sample(3, torch.Generator().manual_seed(0))
    return model, batch.inputs.to(dtype), batch.decoder_inputs.to(dtype)


def _outputs_and_grads(model, inputs, dec, weights):
    params = [p for p in model.parameters() if p.requires_grad]
    out = model(inputs, dec)
    return out, torch.autograd.grad(out, params, weights)


def _assert_native_matches(model, inputs, dec, rtol=1e-8, atol=1e-10):
    weights = torch.randn(3, dec.shape[1], 10, generator=torch.Generator().manual_seed(1), dtype=inputs.dtype)
    ref, ref_grads = _outputs_and_grads(model.use_native(False), inputs, dec, weights)
    out, grads = _outputs_and_grads(model.use_native(True), inputs, dec, weights)
    model.use_native(False)
    torch.testing.assert_close(out, ref, rtol=rtol, atol=atol)
    for (name, _), a, b in zip(model.named_parameters(), grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}")


@needs_kernels
@pytest.mark.parametrize("controller", ["ln_lstm", "lstm", "rnn"])
@pytest.mark.parametrize("writer", list(WRITER_OWN))
@pytest.mark.parametrize("name", ["dnc", "ntm"])
def test_native_equals_torch_path(name, writer, controller):
    """Values and every parameter's gradient (W_xi, W_y, W_r, the controller's weights and layer norms,
    CUW's attention, the NTM's learned initial state) agree to float64 round-off."""
    model, inputs, dec = _model(name, writer=writer, controller=controller, **WRITER_OWN[writer])
    _assert_native_matches(model, inputs, dec)


@needs_kernels
@pytest.mark.parametrize("controller", ["ln_lstm", "rnn"])
@pytest.mark.parametrize("writer", ["regular", "uniform", "cached_uniform"])
@pytest.mark.parametrize("name", ["dnc", "ntm"])
def test_read_only_decoder_native_equals_torch_path(name, writer, controller):
    """The read-only decoder of the synthetic tasks' protocol: outputs and every gradient of the native
    path against the torch path in float64, for regular, uniform and cached uniform writing."""
    model, inputs, dec = _model(name, writer=writer, controller=controller, decoder_write=False,
                                **WRITER_OWN[writer])
    _assert_native_matches(model, inputs, dec)


@needs_kernels
@pytest.mark.parametrize("name,values", [
    ("dnc", {"read_heads": 2}),  # several heads: the [W, R] key and read layouts
    ("dnc", {"read_heads": 3, "writer": "uniform", "decoder_write": False}),  # read-only decoder steps
    ("dnc", {"memory_size": 40}),  # the allocation's stable sort beyond the insertion-sort size
    ("dnc", {"memory_size": 1}),
    ("ntm", {"memory_size": 9, "decoder_write": False}),
    ("dnc", {"writer": "cached_uniform", "cache_size": 1}),  # a CUW write on every step
])
def test_native_equals_torch_path_other_shapes(name, values):
    model, inputs, dec = _model(name, **values)
    _assert_native_matches(model, inputs, dec)


@needs_kernels
@pytest.mark.parametrize("name", ["dnc", "ntm"])
def test_native_float32_is_close_to_float64(name):
    """float32 uses the kernels' own exp/tanh (a few ulps): close to the float64 result."""
    model, inputs, dec = _model(name, writer="cached_uniform", cache_size=2)
    ref = model(inputs, dec)
    model32 = model.to(torch.float32).use_native(True)
    out = model32(inputs.float(), dec.float())
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)


@needs_kernels
def test_two_graphs_alive_at_once_and_evaluation_forward():
    """A forward whose graph is alive holds the model's workspace: a second forward gets buffers of its own,
    so both backwards are right; a forward without autograd gives the same values."""
    model, inputs, dec = _model("dnc", writer="uniform")
    weights = torch.randn(3, dec.shape[1], 10, dtype=F64)
    _, ref_grads = _outputs_and_grads(model, inputs, dec, weights)
    model.use_native(True)
    params = [p for p in model.parameters() if p.requires_grad]
    out1 = model(inputs, dec)
    out2 = model(inputs * 0.5, dec)
    with torch.no_grad():
        torch.testing.assert_close(model(inputs, dec), out1)
    grads1 = torch.autograd.grad(out1, params, weights)
    torch.autograd.grad(out2, params, weights)
    for a, b in zip(grads1, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)
    # once both graphs are freed the model's workspace is free again, and the next forward reuses it
    workspace = model._native_workspace[1]
    assert workspace.reserved
    del out1, out2
    assert not workspace.reserved
    again = torch.autograd.grad(model(inputs, dec), params, weights)
    assert model._native_workspace[1] is workspace and not workspace.reserved
    for a, b in zip(again, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)


@needs_kernels
def test_a_diverging_model_gives_nan_not_a_number_that_hides_it():
    model, inputs, dec = _model("dnc")
    with torch.no_grad():
        model.w_xi[0, 0] = float("nan")
    out = model.use_native(True)(inputs, dec)
    assert torch.isnan(out).any()


def test_unsupported_models_are_named():
    gru, _, _ = _model("dnc", controller="gru")
    assert "GRU" in unsupported_reason(gru, torch.device("cpu"), F64)
    dnc, _, _ = _model("dnc")
    assert "CPU" in unsupported_reason(dnc, torch.device("cuda"), F64)
    assert "float32 or float64" in unsupported_reason(dnc, torch.device("cpu"), torch.bfloat16)
    with pytest.raises(ValueError, match="GRU.*train.native=auto"):
        gru.use_native(True)


@needs_kernels
def test_path_choice():
    """native=auto takes the native path where it applies and the torch path elsewhere, saying why; true is
    obeyed or fails naming why; compile=true under native=auto is the compiled path; both true is an error."""
    dnc, _, _ = _model("dnc")
    gru, _, _ = _model("dnc", controller="gru")
    lstm = build_model("lstm", 10, 10, {"hidden_size": 5})
    lstm_gru = build_model("lstm", 10, 10, {"hidden_size": 5, "controller": "gru"})
    decide = compile_policy.native_decision
    assert decide(dnc, "dnc", "auto", "auto") is True
    assert decide(dnc, "dnc", "auto", False) is True
    assert decide(dnc, "dnc", "auto", True) is False
    assert decide(dnc, "dnc", False, "auto") is False
    assert decide(gru, "dnc", "auto", "auto") is False
    assert decide(lstm, "lstm", "auto", "auto") is True
    assert compile_policy.native_choice(lstm_gru, "lstm", "auto", "auto") == (
        False, "the controller GRU declares no native kernel (a `native_kernel` method of its own class, "
               "uwbench/native/parts.py)")
    assert compile_policy.native_choice(dnc, "dnc", False, "auto") == (False, "train.native=false")
    opaque = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="needs a model with native parts"):
        decide(opaque, "opaque", True, "auto")
    with pytest.raises(ValueError, match="two different paths"):
        decide(dnc, "dnc", True, True)
    with pytest.raises(ValueError, match="auto, true or false"):
        decide(dnc, "dnc", "yes", "auto")


def test_missing_compiler_is_a_clear_error_and_auto_warns(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_library", None)
    monkeypatch.setattr(native, "_failure", None)
    monkeypatch.setenv(native.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(native.COMPILER_ENV, str(tmp_path / "no-such-compiler"))
    with pytest.raises(native.NativeUnavailable, match="does not run.*train.native=false"):
        native.library()
    dnc, _, _ = _model("dnc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert compile_policy.native_decision(dnc, "dnc", "auto", "auto") is False
    assert any("native path is unavailable" in str(w.message) for w in caught)
    with pytest.raises(native.NativeUnavailable):
        dnc.use_native(True)


@needs_kernels
def test_build_is_cached_per_source(monkeypatch, tmp_path):
    """The library is built once into the cache folder, under a name keyed by the sources, the flags, the
    compiler and the CPU."""
    monkeypatch.setenv(native.CACHE_ENV, str(tmp_path))
    first = native.build()
    assert native.build() == first and first.startswith(str(tmp_path))
    # the library, its checksum record and the build lock, no temporary left behind
    library = tmp_path / first.rsplit("/", 1)[1]
    assert sorted(tmp_path.iterdir()) == sorted([library, library.with_name(library.name + native.RECORD_SUFFIX),
                                                 tmp_path / native.LOCK_NAME])
    cxx = native.compiler()
    key = native._build_key(cxx)
    monkeypatch.setattr(native, "FLAGS", native.FLAGS + ("-DUWBENCH_TEST",))
    assert native._build_key(cxx) != key


@needs_kernels
# a_size 16: the fixed-width path, its states in blocks of 4 (n = 8) and one by one (n = 1, 7)
@pytest.mark.parametrize("n,a_size", [(1, 6), (4, 6), (7, 16), (8, 16)])
def test_cache_attention_kernel_equals_autograd(n, a_size):
    """CUW's attention kernel (forward, and backward into the driver's per-step slabs) against the torch
    module under autograd, float64, with the cached states spread over slabs of a larger buffer."""
    from uwbench.writing.cached_uniform import CacheAttention

    torch.manual_seed(n)
    b, h_size, r_size = 3, 5, 4
    att = CacheAttention(h_size, r_size, a_size).double()
    slabs = torch.randn(n + 2, b, h_size, dtype=F64)  # the cache is slabs 1..n (h_{t-1} the last of them)
    r = torch.randn(b, r_size, dtype=F64)
    d_a = torch.randn(b, h_size, dtype=F64)
    inputs = [slabs[n].clone().requires_grad_(), slabs[1:n + 1].clone().requires_grad_(), r.clone().requires_grad_()]
    a_ref, alpha_ref = att(inputs[0], inputs[1].transpose(0, 1), inputs[2])
    expected = torch.autograd.grad(a_ref, inputs + list(att.parameters()), d_a)

    lib = native.library()
    w_c, u_c, v_c, v = [p.detach().contiguous() for p in att.parameters()]
    a, alpha, act = torch.empty(b, h_size, dtype=F64), torch.empty(b, n, dtype=F64), torch.empty(b, n, a_size, dtype=F64)
    lib.cuw_fwd_f64(b, n, h_size, r_size, a_size, slabs[n].data_ptr(), slabs[1].data_ptr(), b * h_size,
                    r.data_ptr(), w_c.data_ptr(), u_c.data_ptr(), v_c.data_ptr(), v.data_ptr(),
                    a.data_ptr(), alpha.data_ptr(), act.data_ptr())
    torch.testing.assert_close(a, a_ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(alpha, alpha_ref.detach(), rtol=1e-12, atol=1e-12)
    d_slabs, d_r = torch.zeros_like(slabs), torch.zeros_like(r)
    d_w_c, d_u_c, d_v_c, d_v = (torch.zeros_like(p) for p in (w_c, u_c, v_c, v))
    w_c_t, u_c_t, v_c_t = (p.t().contiguous() for p in (w_c, u_c, v_c))
    lib.cuw_bwd_f64(b, n, h_size, r_size, a_size, slabs[n].data_ptr(), slabs[1].data_ptr(), b * h_size, r.data_ptr(),
                    w_c_t.data_ptr(), u_c_t.data_ptr(), v_c_t.data_ptr(), v.data_ptr(), alpha.data_ptr(),
                    act.data_ptr(), d_a.data_ptr(), d_slabs[n].data_ptr(), d_slabs[1].data_ptr(), d_r.data_ptr(),
                    d_w_c.data_ptr(), d_u_c.data_ptr(), d_v_c.data_ptr(), d_v.data_ptr())
    d_cache = expected[1].clone()
    d_cache[-1] += expected[0]  # h_{t-1} is both the query and the last cached state
    torch.testing.assert_close(d_slabs[1:n + 1], d_cache, rtol=1e-10, atol=1e-12)
    assert not d_slabs[0].any() and not d_slabs[n + 1].any()  # nothing outside the cache
    torch.testing.assert_close(d_r, expected[2], rtol=1e-10, atol=1e-12)
    for got, want in zip([d_w_c, d_u_c, d_v_c, d_v], expected[3:]):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


@needs_kernels
def test_unwritable_cache_folder_is_a_clear_error(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(native.CACHE_ENV, str(blocker / "cache"))
    with pytest.raises(native.NativeUnavailable, match="cache folder.*UWBENCH_NATIVE_CACHE"):
        native.build()


@needs_kernels
def test_a_weight_changed_before_the_backward_is_an_error():
    model, inputs, dec = _model("dnc")
    out = model.use_native(True)(inputs, dec)
    with torch.no_grad():
        model.controller.weight_hh.add_(1.0)
    with pytest.raises(RuntimeError, match="changed in place"):
        out.sum().backward()


@needs_kernels
def test_a_model_changed_after_use_native_to_an_unsupported_dtype_is_an_error_not_a_crash():
    model, inputs, dec = _model("dnc")
    model.use_native(True).to(torch.bfloat16)
    with pytest.raises(ValueError, match="float32 or float64.*use_native"):
        model(inputs.to(torch.bfloat16), dec.to(torch.bfloat16))


# ---- the matrix products (native/gemm.cpp) ----

GEMM_SHAPES = [(64, 100, 400), (64, 400, 100), (64, 264, 100), (64, 400, 64), (1, 1, 1), (3, 5, 7), (13, 300, 49),
               (9, 257, 95), (100, 600, 40), (5, 0, 3)]  # (M, K, N): whole tiles, partial ones, K blocks, K = 0


def check_gemm(lib):
    """C = C0 + op(A) B against torch for every kind of edge: rows and columns short of a tile, K over a block,
    strided rows, A transposed, no C0, and C0 the output itself."""
    g = torch.Generator().manual_seed(0)
    for dtype, tol in ((F64, 1e-12), (torch.float32, 1e-4)):
        fn = getattr(lib, f"gemm_{'f64' if dtype == F64 else 'f32'}")
        for m, k, n in GEMM_SHAPES:
            for trans in (0, 1):
                a = torch.randn(k + 2, m, dtype=dtype, generator=g)[:k] if trans else \
                    torch.randn(m, k + 3, dtype=dtype, generator=g)[:, :k]  # strided rows
                b = torch.randn(k, n + 3, dtype=dtype, generator=g)[:, :n]
                c0 = torch.randn(m, n, dtype=dtype, generator=g)
                ref = (a.t() if trans else a) @ b  # (M, N)
                out = torch.full((m, n + 2), float("nan"), dtype=dtype)[:, :n]
                for base in (None, c0, "self"):
                    c = c0.clone() if base == "self" else out
                    c0_ = c if base == "self" else base
                    fn(m, n, k, a.data_ptr(), a.stride(0), trans, b.data_ptr(), b.stride(0),
                       None if c0_ is None else c0_.data_ptr(), 0 if c0_ is None else c0_.stride(0), c.data_ptr(),
                       c.stride(0))
                    want = ref if base is None else ref + c0
                    torch.testing.assert_close(c, want, rtol=tol, atol=tol * max(1.0, k ** 0.5))


@needs_kernels
def test_gemm_equals_torch():
    check_gemm(native.library())


# ---- the kernels at the other vector width ($UWBENCH_NATIVE_VECTOR) ----


def _avx2_unavailable():
    """Why this machine cannot build and run the AVX2-only kernels (None: it can)."""
    if platform.machine() not in ("x86_64", "AMD64", "i686"):
        return f"AVX2 is an x86 instruction set; this machine is {platform.machine()}"
    if "avx2" not in native.cpu_flags():
        return "this CPU has no AVX2"
    return native.unavailable_reason()


def test_vector_width_is_checked_and_part_of_the_cache_key(monkeypatch):
    monkeypatch.setenv(native.VECTOR_ENV, "avx9")
    with pytest.raises(native.NativeUnavailable, match="not a vector width.*native, avx2"):
        native.library()
    assert "-mno-avx512f" in native.flags("avx2") and "-mno-avx512f" not in native.flags("native")
    cxx = native.compiler()
    if cxx is not None:
        assert native._build_key(cxx, "avx2") != native._build_key(cxx, "native")


@pytest.mark.skipif(_avx2_unavailable() is not None, reason=f"AVX2 build: {_avx2_unavailable()}")
def test_avx2_build_equals_torch_path(monkeypatch):
    """With $UWBENCH_NATIVE_VECTOR=avx2 the kernels are built without AVX-512 (32-byte vectors) and loaded
    beside the machine's own build; its matrix products match torch's, a DNC (LN-LSTM controller, CUW's
    attention) and the LSTM baseline on them match the torch path in float64, and in float32 (where sigmoid
    and tanh run on vector types) stay close to float64."""
    default = native.library()
    monkeypatch.setenv(native.VECTOR_ENV, "avx2")
    lib = native.library()
    if "avx512f" in native.cpu_flags():
        assert lib._name != default._name
    check_gemm(lib)
    dnc, inputs, dec = _model("dnc", writer="cached_uniform", cache_size=2)
    _assert_native_matches(dnc, inputs, dec)
    torch.manual_seed(5)
    lstm = build_model("lstm", 10, 10, {"hidden_size": 21}).to(F64)  # padded rows with a partial vector
    _assert_native_matches(lstm, inputs, dec)
    for model in (dnc, lstm):
        ref = model.use_native(False)(inputs, dec)
        out = model.to(torch.float32).use_native(True)(inputs.float(), dec.float())
        model.use_native(False).to(F64)
        torch.testing.assert_close(out.double(), ref, rtol=1e-3, atol=1e-4)
