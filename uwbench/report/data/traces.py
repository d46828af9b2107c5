"""Record memory traces for the heatmaps from finished runs (the one report step that runs a model).

For each traced cell: the first run that counts (lowest seed; ``uwbench.selection.counted_runs``) is rebuilt from its recorded
``config.json``, its best checkpoint (``checkpoint/best.pt``) is loaded, and one sequence of the task's
fixed test set goes through it with ``model.tracing = True`` (uwbench.models.mann). On a regression
task (the sinusoid tasks) the sequence's input, true and generated continuation are kept as well. A
model without a trace (the LSTM baseline), a run without artifacts, or any failure skips the cell with a
reason; it never fails the report. Inference only, on the CPU: the trace is deterministic.
"""
from __future__ import annotations

import json
import tempfile
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np
import pandas as pd

from uwbench.snapshot.columns import RESTORED_RUN_ID, RESTORED_TRACE  # the tag and artifact of a restored run
from uwbench.errors import UserError
from uwbench.values import is_number

SERIES = ("series_input", "series_target", "series_output")  # trace arrays of a regression test sequence
MAX_GROUPS = 4  # heatmap figures per study (groups of cells with the same task, T, D, model, controller)
APPENDIX_TASKS = ("copy", "max")  # the tasks of the paper's memory-operation figures
TRACE_SAMPLES = 1  # sequences traced per cell


def trace_targets(runs: pd.DataFrame, cell_order: List[str], memory_models=("dnc", "ntm")) -> Dict[str, str]:
    """{cell: run_id} of the runs to trace: in each memory-model cell the first seed of the runs that count.
    Cells sharing task, T, D, model and controller form one heatmap figure; at most ``MAX_GROUPS``
    figures, those comparing the most writers first (regular / UW / CUW side by side), the appendix's
    tasks (copy, max) before others, then the spec's order."""
    from uwbench.selection import counted_runs

    finals = counted_runs(runs)
    finals = finals[finals["model"].isin(memory_models)]
    groups: Dict[Tuple, Dict[str, str]] = {}
    for cell in cell_order:
        g = finals[finals["cell"] == cell]
        if len(g) == 0:
            continue
        r = g.sort_values(["seed", "run_id"], kind="stable", na_position="last").iloc[0]
        key = (r["task"], _k(r["seq_len"]), _k(r["memory_size"]), r["model"], r["controller"])
        groups.setdefault(key, {})[cell] = r["run_id"]
    order = list(groups)
    ranked = sorted(order, key=lambda k: (-len(groups[k]), k[0] not in APPENDIX_TASKS, order.index(k)))
    chosen = set(ranked[:MAX_GROUPS])
    return {cell: run_id for key in order if key in chosen for cell, run_id in groups[key].items()}


def _k(v) -> str:
    return str(int(v)) if is_number(v) else ""


def trace_run(run_id: str, uri: Optional[str] = None) -> Tuple[Optional[Dict], str]:
    """(arrays, "") for a traced run, or (None, reason)."""
    from uwbench.tracking import mlflow as tracking

    try:
        with tempfile.TemporaryDirectory() as d:
            restored = _restored_trace(run_id, uri, d)
            if restored is not None:  # a run restored from a report's snapshot: its trace, not its weights
                return restored, ""
            cfg_path = tracking.download_artifact(run_id, "config.json", uri, d)
            ckpt_path = tracking.download_artifact(run_id, "checkpoint/best.pt", uri, d)
            with open(cfg_path, encoding="utf-8") as f:
                config = json.load(f)
            return trace_checkpoint(config, ckpt_path)
    except Exception as exc:  # noqa: BLE001 - a trace is optional: say why and go on
        return None, f"{type(exc).__name__}: {exc}"


def _restored_trace(run_id: str, uri: Optional[str], folder: str) -> Optional[Dict]:
    """The arrays of a run restored from a snapshot (``uwbench restore``), which kept its trace's rows as an
    artifact; None for a run with weights (every trained run)."""
    from uwbench import snapshot as snap_mod
    from uwbench.tracking import mlflow as tracking

    run = tracking.get_run(run_id, uri)
    if run is None or not run["tags"].get(RESTORED_RUN_ID):
        return None
    path = tracking.download_artifact(run_id, RESTORED_TRACE, uri, folder)
    with open(path, encoding="utf-8") as f:
        snap = snap_mod.Snapshot(snap_mod.runs_text([]), traces=f.read())
    entries = list(snap.traces().values())
    if not entries:
        raise UserError(f"restored run {run_id} holds an empty {RESTORED_TRACE}")
    return entries[0]["arrays"]


def trace_checkpoint(config: Mapping, checkpoint_path: str) -> Tuple[Optional[Dict], str]:
    import torch

    from uwbench.training.config import resolve_run
    from uwbench.training.loop import build_components, load_checkpoint

    resolved = resolve_run(config)
    task, model = build_components(resolved, torch.device("cpu"))
    if not hasattr(model, "tracing"):
        return None, f"model {resolved.model_name!r} records no trace"
    model.load_state_dict(load_checkpoint(checkpoint_path))
    model.eval()
    batch = task.test_batches()[0]
    model.tracing = True
    try:
        with torch.no_grad():
            out = model(batch.inputs[:TRACE_SAMPLES], batch.decoder_inputs[:TRACE_SAMPLES],
                        None if batch.lengths is None else batch.lengths[:TRACE_SAMPLES])
    finally:
        model.tracing = False
    trace = getattr(model, "trace", None) or {}
    if "write_weights" not in trace and "read_weights" not in trace:
        return None, f"model {resolved.model_name!r} records no memory weights"
    arrays = trace_arrays(trace)
    if task.metric == "mse":  # a regression task: keep the sequence too (the appendix's sinusoid figures)
        arrays.update(series_arrays(batch.inputs, batch.targets, out))
    return arrays, ""


def collect(runs: pd.DataFrame, cell_order: List[str], uri: Optional[str] = None, log=print) -> Dict[str, Dict]:
    """{cell: {"run_id", "arrays"}} for the cells ``trace_targets`` picks (skipped cells are logged)."""
    out: Dict[str, Dict] = {}
    for cell, run_id in trace_targets(runs, cell_order).items():
        arrays, why = trace_run(run_id, uri)
        if arrays is None:
            log(f"  trace of {cell} skipped: {why}")
            continue
        out[cell] = {"run_id": run_id, "arrays": arrays}
    return out


def _numpy(x) -> np.ndarray:
    """A tensor (any device, with or without grad) or array-like as a numpy array."""
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def trace_arrays(trace: Mapping, sample: int = 0) -> Dict[str, np.ndarray]:
    """A model's ``trace`` dict (uwbench.models.mann: tensors with a batch axis) -> 2-D numpy arrays of
    one sample: write_weights (S, N), read_weights (S, N; summed over read heads), write_gate (S, 1),
    write_mask (S, 1), encoder_steps (1, 1), cache_attention (write step, cached state) when present."""

    out: Dict[str, np.ndarray] = {}
    if "write_weights" in trace:
        w = _numpy(trace["write_weights"])[sample]  # (S, N) or (S, heads, N)
        out["write_weights"] = w.reshape(w.shape[0], -1, w.shape[-1]).sum(axis=1)
    if "read_weights" in trace:
        r = _numpy(trace["read_weights"])[sample]  # (S, N) or (S, R, N)
        out["read_weights"] = r.reshape(r.shape[0], -1, r.shape[-1]).sum(axis=1)
    if "write_gate" in trace:
        g = _numpy(trace["write_gate"])[sample]
        out["write_gate"] = g.reshape(g.shape[0], -1)[:, :1]
    if "write_mask" in trace:
        out["write_mask"] = _numpy(trace["write_mask"]).astype(float).reshape(-1, 1)
    if "encoder_steps" in trace:
        out["encoder_steps"] = np.array([[float(trace["encoder_steps"])]])
    att = trace.get("cache_attention") or {}
    if att:
        steps = sorted(att)
        width = max(_numpy(att[s]).shape[-1] for s in steps)
        a = np.full((len(steps), width), np.nan)
        for i, s in enumerate(steps):
            v = _numpy(att[s])[sample]
            a[i, : v.shape[-1]] = v
        out["cache_attention"] = a
    return out


def series_arrays(inputs, targets, outputs, sample: int = 0) -> Dict[str, np.ndarray]:
    """One test sequence of a regression task as trace arrays (n, 1): the encoder's inputs, the true
    continuation and the model's; {} unless the task has one real value per step (the sinusoid tasks)."""

    x, y, o = _numpy(inputs)[sample], _numpy(targets)[sample], _numpy(outputs)[sample]  # (T, 1), (T_out, 1), (T_out, 1)
    if x.reshape(len(x), -1).shape[1] != 1 or y.reshape(len(y), -1).shape[1] != 1 or o.size != y.size:
        return {}
    return {"series_input": x.reshape(-1, 1), "series_target": y.reshape(-1, 1), "series_output": o.reshape(-1, 1)}
