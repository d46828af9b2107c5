"""Workloads: one training iteration of a model as a zero-argument closure.

An iteration is: gradients set to None, the forward pass over the encoder and decoder steps, the
task's loss (mean token cross-entropy over the decoder steps) and the backward pass. Every workload has
an ``id`` that results are keyed by (``dnc:regular``, ``dnc:regular:compiled``, ``dnc:regular:native``,
``lstm``, ``nn_lstm``, ``pypi_dnc``) and a display ``label`` for the tables. A model's three paths
(training/compile_policy.py): plain id the eager path, ``:compiled`` torch.compile'd steps,
``:native`` the C++ whole-sequence path (what ``uwbench train`` runs by default).

The default configuration is the paper's Table 1 (``PAPER``, §4 of the paper): copy with T = 50
(51 encoder + 51 decoder steps), batch 64, controller H = 100, memory D = N = 4 slots of W = 64, one
read head.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

PAPER = {"batch": 64, "seq_len": 50, "hidden": 100, "memory_size": 4, "word_size": 64, "read_heads": 1}
QUICK = {"batch": 8, "seq_len": 10, "hidden": 16, "memory_size": 4, "word_size": 8, "read_heads": 1}
LSTM_HIDDEN = 125  # the paper's LSTM baseline size
PYPI_DNC_VERSION = "1.1.0"
NO_ENCODER_MEMORY = "no_encoder_memory"  # the bound: the encoder never touches the memory
CUW_SCHEDULE = "cuw_schedule"  # CUW's write schedule without its attention: what its skipped memory work saves

NN_LSTM = "nn_lstm"
PYPI_DNC = "pypi_dnc"


def workload_id(model_name: str, writer: Optional[str] = None, compiled: bool = False, native: bool = False) -> str:
    """The id of one of our models: ``model[:writer][:compiled|:native]``."""
    path = ["compiled"] if compiled else ["native"] if native else []
    return ":".join([model_name] + ([writer] if writer else []) + path)


@dataclass
class Workload:
    id: str
    label: str
    run: Callable[[], None]  # one forward + loss + backward
    parameters: int
    note: str = ""
    model: Any = None


def memory_values(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """A benchmark configuration's memory-model settings (``PAPER`` keys to MANNConfig fields)."""
    return {"hidden_size": cfg["hidden"], "memory_size": cfg["memory_size"], "word_size": cfg["word_size"],
            "read_heads": cfg["read_heads"]}


def make_task(task_name: str, seq_len: int):
    from uwbench.tasks import build_task

    return build_task(task_name, {"seq_len": seq_len})


def make_batch(task, batch_size: int, seed: int = 0):
    import torch

    return task.sample(batch_size, torch.Generator().manual_seed(seed))


def iteration(model, loss_fn) -> Callable[[], None]:
    params = [p for p in model.parameters() if p.requires_grad]

    def run() -> None:
        for p in params:
            p.grad = None
        loss_fn().backward()

    return run


def uwbench_workload(model_name: str, task, batch, values: Optional[Dict[str, Any]] = None,
                     compile: bool = False, label: Optional[str] = None, native: bool = False) -> Workload:
    """One of our registered models (``values``: its config) on ``batch``; ``compile`` puts its step
    function under torch.compile (``compile_steps``), ``native`` runs it on the native whole-sequence path
    (``use_native``). ``writer="no_encoder_memory"`` builds the regular
    model and then replaces its writer by one that never writes in the encoder (the bound);
    ``writer="cuw_schedule"`` builds the CUW model and drops its attention, so it writes on CUW's
    schedule from the plain h_{t-1} (no model to train: it separates the attention's cost from the
    memory work CUW skips)."""
    import torch

    from uwbench.models.base import build_model

    values = dict(values or {})
    writer = values.get("writer") if model_name != "lstm" else None
    wid = workload_id(model_name, writer, compile, native)
    label = label or f"{model_name} {writer or ''}".strip() + (" (compiled)" if compile else " (native)" if native
                                                               else "")
    no_memory, schedule_only = writer == NO_ENCODER_MEMORY, writer == CUW_SCHEDULE
    if no_memory:
        values["writer"] = "regular"
    if schedule_only:
        values["writer"] = "cached_uniform"
    torch.manual_seed(0)
    model = build_model(model_name, task.input_size, task.output_size, values, task=task)
    if no_memory:
        model.writer = NoEncoderMemoryWriter(model.cfg, None)
    if schedule_only:
        model.cache_attention = None  # every path reads the attention from here; None: h_{t-1} as is
    if compile:
        model.compile_steps()
    if native:
        model.use_native(True)
    run = iteration(model, lambda: task.loss(model(batch.inputs, batch.decoder_inputs), batch))
    return Workload(wid, label, run, model.num_parameters(), model=model)


def nn_lstm_workload(task, batch, hidden: int = LSTM_HIDDEN) -> Workload:
    """``torch.nn.LSTM`` over the same encoder + decoder inputs (one fused call over all steps), a linear
    read-out on the decoder steps and the same loss."""
    import torch

    torch.manual_seed(0)
    lstm = torch.nn.LSTM(task.input_size, hidden, batch_first=True)
    head = torch.nn.Linear(hidden, task.output_size)
    model = torch.nn.ModuleList([lstm, head])
    x = torch.cat([batch.inputs, batch.decoder_inputs], dim=1)  # (B, Te + Td, V)
    te = batch.inputs.shape[1]

    def loss():
        out, _ = lstm(x)  # (B, Te + Td, H)
        return task.loss(head(out[:, te:]), batch)

    params = sum(p.numel() for p in model.parameters())
    return Workload(NN_LSTM, f"torch.nn.LSTM({hidden})", iteration(model, loss), params, "oneDNN fused over time")


def pypi_dnc_available() -> Optional[str]:
    """The installed PyPI ``dnc`` version, or None when it cannot be imported."""
    try:
        import dnc  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "skip it"
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dnc")
    except PackageNotFoundError:
        return "unknown"


def pypi_dnc_workload(task, batch, hidden: int, memory_size: int, word_size: int, read_heads: int = 1) -> Workload:
    """PyPI ``dnc`` (ixaxaar/pytorch-dnc) at its closest configuration to ours: an LSTM controller with one
    layer and ``num_hidden_layers=1`` (its default is 2), N slots of W, R read heads. Its output maps back
    to the input width, which for our tasks is the vocabulary, so the same loss applies."""
    import torch
    from dnc import DNC

    torch.manual_seed(0)
    model = DNC(input_size=task.input_size, hidden_size=hidden, rnn_type="lstm", num_layers=1, num_hidden_layers=1,
                nr_cells=memory_size, cell_size=word_size, read_heads=read_heads, batch_first=True, gpu_id=-1)
    x = torch.cat([batch.inputs, batch.decoder_inputs], dim=1)  # (B, Te + Td, V)
    te = batch.inputs.shape[1]

    def loss():
        out, _ = model(x, (None, None, None), reset_experience=True)  # (B, Te + Td, V)
        return task.loss(out[:, te:], batch)

    params = sum(p.numel() for p in model.parameters())
    return Workload(PYPI_DNC, f"PyPI dnc {pypi_dnc_available()}", iteration(model, loss), params,
                    "LSTM controller, num_hidden_layers=1")


class NoEncoderMemoryWriter:
    """A writer that never writes in the encoder: the encoder runs the controller only. Not registered
    (it is no model anyone should train); it bounds what any sparse writer can save."""

    cached = False

    def __init__(self, cfg, max_steps):
        self.cfg = cfg

    def schedule(self, n_steps: int) -> List[bool]:
        return [False] * n_steps
