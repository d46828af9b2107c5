"""The native path's boundary with the models (uwbench/native/parts.py, uwbench/models/native*.py):
declared parts, the check of the declarations against the kernels, the build lock, the LSTM baseline's
native path, and a plugin writer through `uwbench train`.

The plugin writer here is one file written to tmp_path and imported the way ``UWBENCH_PLUGINS`` imports
it: a cached writer whose ``build_attention`` returns a module of its own (no kernel), which must train
on the default path and give the torch path's result.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from uwbench import native
from uwbench.models.base import build_model
from uwbench.models.dnc_memory import DNCMemory, DNCState
from uwbench.native.parts import StateLayout, declaration
from uwbench.training import compile_policy
from uwbench.training.loop import train
from uwbench.writing.cached_uniform import CacheAttention

from tests.helpers import ROOT

F64 = torch.float64
needs_kernels = pytest.mark.skipif(not native.available(), reason=f"native kernels: {native.unavailable_reason()}")

PLUGIN = '''\
"""A writer plugin: write every k-th encoder step, from a projected mean of the states cached since the
last write (a cached writer with an attention module of its own)."""
from dataclasses import dataclass
from typing import List

import torch
import torch.nn as nn

from uwbench.registry import WRITERS
from uwbench.writing.base import Writer


class ProjectedMean(nn.Module):
    """a_t = mean_j(d_j) P over the n cached states d_j; alpha uniform."""

    def __init__(self, hidden_size: int, read_size: int):
        super().__init__()
        self.proj = nn.Parameter(torch.eye(hidden_size) + 0.1 * torch.randn(hidden_size, hidden_size))  # (H, H)

    def forward(self, h, cache, r):
        """h (B, H), cache (B, n, H), r (B, read_size) -> a (B, H), alpha (B, n)."""
        alpha = torch.full(cache.shape[:2], 1.0 / cache.shape[1], dtype=cache.dtype, device=cache.device)
        return cache.mean(1) @ self.proj, alpha


@dataclass
class MeanCacheConfig:
    every: int = 2  # write on every k-th encoder step


@WRITERS.register("mean_cache", config=MeanCacheConfig, help="write every k-th step from the projected mean of the cache")
class MeanCacheWriter(Writer):
    cached = True

    def schedule(self, n_steps: int) -> List[bool]:
        return [(t + 1) % self.options.every == 0 for t in range(n_steps)]

    def build_attention(self, hidden_size: int, read_size: int) -> ProjectedMean:
        return ProjectedMean(hidden_size, read_size)
'''
PLUGIN_MODULE = "uwbench_test_mean_cache"


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """The plugin file, imported once (as `UWBENCH_PLUGINS` would); returns its folder."""
    folder = tmp_path_factory.mktemp("plugins")
    (folder / f"{PLUGIN_MODULE}.py").write_text(PLUGIN)
    sys.path.insert(0, str(folder))
    try:
        if PLUGIN_MODULE not in sys.modules:
            importlib.import_module(PLUGIN_MODULE)
        yield folder
    finally:
        sys.path.remove(str(folder))
        from uwbench.registry import WRITERS

        WRITERS.unregister("mean_cache")  # leave the registry as the next test module expects it
        sys.modules.pop(PLUGIN_MODULE, None)


TINY = {"task": {"name": "copy", "seq_len": 5, "test_size": 4},
        "model": {"name": "dnc", "hidden_size": 6, "memory_size": 2, "word_size": 4},
        "train": {"steps": 3, "batch_size": 4, "eval_every": 3, "eval_batches": 1}}


def _config(model=None, train=None):
    return {"task": TINY["task"], "model": {**TINY["model"], **(model or {})}, "train": {**TINY["train"], **(train or {})}}


def test_a_plugin_cached_writer_with_its_own_attention_trains_on_the_default_path(plugin):
    """Default settings: the attention has no kernel, so the run takes the torch path, says why, and gives
    exactly the torch path's result (train.native=false)."""
    default = train(_config({"writer": "mean_cache"}), progress=False)
    assert default.status == "finished", default.error
    assert default.path == "eager"
    assert "the attention ProjectedMean declares no native kernel" in default.path_reason
    torch_path = train(_config({"writer": "mean_cache"}, {"native": False}), progress=False)
    assert torch_path.path_reason == "train.native=false"
    assert default.history["train_loss"] == pytest.approx(torch_path.history["train_loss"], rel=1e-6)
    assert default.test == pytest.approx(torch_path.test, rel=1e-6)


def test_native_true_names_the_part_without_a_kernel(plugin):
    with pytest.raises(ValueError, match="train.native=true cannot run this model: the attention ProjectedMean "
                                         "declares no native kernel"):
        train(_config({"writer": "mean_cache"}, {"native": True}), progress=False)
    gru = build_model("dnc", 10, 10, {"hidden_size": 6, "memory_size": 2, "word_size": 4, "controller": "gru"})
    with pytest.raises(ValueError, match="the controller GRU declares no native kernel.*train.native=auto"):
        gru.use_native(True)


@needs_kernels
def test_an_attention_with_cuws_parameters_but_its_own_function_keeps_its_function():
    """A declaration is not inherited: a subclass of CUW's attention (the same parameters, another function)
    runs the torch path under auto and computes its own function, never CUW's kernel."""

    class Sharper(CacheAttention):
        def forward(self, h, cache, r):
            query = h @ self.w_c + r @ self.v_c  # (B, A)
            scores = 4.0 * torch.tanh(query.unsqueeze(1) + cache @ self.u_c) @ self.v  # (B, n)
            alpha = torch.softmax(scores, dim=-1)  # (B, n)
            return torch.bmm(alpha.unsqueeze(1), cache).squeeze(1), alpha

    torch.manual_seed(0)
    model = build_model("dnc", 10, 10, {"hidden_size": 6, "memory_size": 2, "word_size": 4,
                                        "writer": "cached_uniform", "cache_size": 2}).double()
    assert declaration(model.cache_attention) is not None
    sharper = Sharper(6, 4, 16).double()
    sharper.load_state_dict(model.cache_attention.state_dict())
    model.cache_attention = sharper
    assert declaration(sharper) is None
    assert compile_policy.native_decision(model, "dnc", "auto", "auto") is False
    with pytest.raises(ValueError, match="the attention Sharper declares no native kernel"):
        model.use_native(True)


class _DroppedField(DNCMemory):
    """A DNC memory whose layout declaration leaves out the precedence (S too small by N)."""

    def native_kernel(self):
        kernel = DNCMemory.native_kernel(self)
        fields = tuple(f for f in kernel.layout.fields if f[0] != "precedence")
        return dataclasses.replace(kernel, layout=StateLayout(fields, kernel.layout.make))


class _WrongShape(DNCMemory):
    """The right total size, but the link declared as (N N,) per row while the state holds (N, N)."""

    def native_kernel(self):
        kernel = DNCMemory.native_kernel(self)
        n = self.memory_size
        fields = tuple(("link", (n * n,)) if name == "link" else (name, shape) for name, shape in kernel.layout.fields)
        return dataclasses.replace(kernel, layout=StateLayout(fields, DNCState))


class _WrongInterface(DNCMemory):
    """An interface size one more than the kernel's."""

    def native_kernel(self):
        return dataclasses.replace(DNCMemory.native_kernel(self), interface_size=self.interface_size + 1)


def _dnc_with(memory_class):
    model = build_model("dnc", 10, 10, {"hidden_size": 6, "memory_size": 3, "word_size": 4})
    model.memory = memory_class(3, 4, 1)
    return model


@needs_kernels
@pytest.mark.parametrize("memory_class,message", [
    (_DroppedField, r"the memory _DroppedField \(kernel 'dnc'\): the declaration gives state_size 30, the kernel "
                    r"dnc_state_size\(3, 4, 1\) gives 33"),
    (_WrongInterface, r"the declaration gives interface_size 25, the kernel dnc_interface_size\(3, 4, 1\) gives 24"),
    (_WrongShape, r"the state layout declares link of \(9,\) per row, the memory's state has \(3, 3\)"),
])
def test_a_wrong_layout_declaration_is_caught_at_load(memory_class, message):
    """Before any buffer reaches a kernel: NativeUnavailable naming both sizes under native=true, a warning
    and the torch path (with the reason) under auto."""
    model = _dnc_with(memory_class)
    with pytest.raises(native.NativeUnavailable, match=message):
        model.use_native(True)
    with pytest.warns(UserWarning, match="native path is unavailable"):
        taken, why = compile_policy.native_choice(_dnc_with(memory_class), "dnc", "auto", "auto")
    assert not taken and memory_class.__name__ in why


@needs_kernels
def test_every_built_in_part_passes_the_check():
    """The declarations of every controller, memory and attention with a kernel agree with the kernels
    (several sizes), and the layouts' unflatten inverts their flatten."""
    for name, values in [("dnc", {"read_heads": 3, "memory_size": 5, "writer": "cached_uniform", "attention_size": 7}),
                         ("ntm", {"memory_size": 6, "controller": "lstm"}), ("dnc", {"controller": "rnn"}),
                         ("lstm", {"hidden_size": 9})]:
        model = build_model(name, 10, 10, values)
        model.use_native(True)
        assert {role for role, *_ in model._native_checked} == set(model.native_parts())
        for part in model.native_parts().values():
            kernel = declaration(part)
            if hasattr(kernel, "layout"):
                state = part.initial_state(2, "cpu", F64)
                back = kernel.layout.unflatten(kernel.layout.flatten(state))
                assert type(back) is type(state) and all(torch.equal(a, b) for a, b in zip(back, state))


def test_the_checked_sizes_come_from_the_kernels_table():
    """Every kernel the declarations name is in the signature table with its family's entry points."""
    for kernel, (family, arity) in native.KERNELS.items():
        assert family in native.SIGNATURES and arity >= 1
    assert {"state_size", "interface_size", "read_size"} <= set(native.SIGNATURES["memory"])


def _models_imports(path: Path):
    """The uwbench.models modules ``path`` imports, at module or function level."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "uwbench.models":
                found |= {f"uwbench.models.{a.name}" for a in node.names}
            elif node.module.startswith("uwbench.models."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("uwbench.models.")}
    return found


def test_no_import_cycle_in_the_models_package():
    """No module in uwbench/models imports one that imports it back (directly or through others), at
    module or function level."""
    folder = Path(ROOT) / "uwbench" / "models"
    graph = {f"uwbench.models.{p.stem}": _models_imports(p) for p in folder.glob("*.py") if p.stem != "__init__"}

    def reaches(start, target, seen):
        for nxt in graph.get(start, ()):
            if nxt == target or (nxt not in seen and reaches(nxt, target, seen | {nxt})):
                return True
        return False

    assert [m for m in graph if reaches(m, m, {m})] == []
    assert graph["uwbench.models.native"] == set()  # generic: no model class


# ---- the build lock ----


@needs_kernels
def test_concurrent_processes_on_an_empty_cache_run_the_compiler_once(tmp_path):
    """Three processes build at once into an empty cache folder: one compiler run (counted by a wrapper
    around the real compiler), and all three load the same library."""
    log = tmp_path / "compiles.log"
    wrapper = tmp_path / "cxx"
    wrapper.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        [ "$1" = "--version" ] || echo run >> {log}
        exec {native.compiler()} "$@"
        """))
    wrapper.chmod(0o755)
    env = dict(os.environ, CXX=str(wrapper), UWBENCH_NATIVE_CACHE=str(tmp_path / "cache"))
    code = "from uwbench import native; print(native.library()._name)"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in outs]
    assert len({out.strip() for out, _ in outs}) == 1
    assert log.read_text().splitlines() == ["run"]


# ---- plugins in every command ----


def test_uwbench_train_and_ls_import_the_plugins(plugin, tracking_uri):
    """`uwbench train` with a plugin writer, as a new user runs it: a subprocess with $UWBENCH_PLUGINS; it
    trains on the torch path and says why. `uwbench ls writers` lists the plugin's writer."""
    env = dict(os.environ, UWBENCH_PLUGINS=PLUGIN_MODULE,
               PYTHONPATH=os.pathsep.join(filter(None, [str(plugin), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "uwbench", "train", "--task", "copy", "--model", "dnc", "--seq-len", "5",
           "--writer", "mean_cache", "--set", "model.every=2", "--set", "model.hidden_size=6",
           "--set", "model.word_size=4", "--memory-size", "2", "--steps", "2", "--batch-size", "4",
           "--eval-every", "2", "--set", "task.test_size=4", "--set", "train.eval_batches=1",
           "--tracking-uri", tracking_uri, "--experiment", "plugin", "--no-progress", "--no-system-metrics"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on the eager path" in done.stdout
    assert "not on the native path: the attention ProjectedMean declares no native kernel" in done.stdout
    listed = subprocess.run([sys.executable, "-m", "uwbench", "ls", "writers"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert "mean_cache" in listed.stdout and "projected mean of the cache" in listed.stdout


def test_a_plugin_that_cannot_be_imported_is_a_clear_error(monkeypatch, capsys):
    from uwbench.cli import main

    monkeypatch.setenv("UWBENCH_PLUGINS", "uwbench_no_such_plugin")
    assert main(["ls", "writers"]) == 2
    err = capsys.readouterr().err
    assert "$UWBENCH_PLUGINS names the module 'uwbench_no_such_plugin', which cannot be imported" in err
    assert "PYTHONPATH" in err
