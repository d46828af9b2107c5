"""Speed and memory benchmarks: our models side by side with ``torch.nn.LSTM`` and PyPI ``dnc`` (issue 7,
DESIGN.md §5). ``uwbench bench`` runs them and ``benchmarks/README.md`` explains the method; this module
is the library (importing it is cheap: torch is imported inside the functions).

Every timing is one training iteration of a seq2seq batch: gradients set to None, the forward pass over
the encoder and decoder steps, the task's loss and the backward pass. The default configuration is the
paper's Table 1 (``PAPER``): copy with T = 50 (51 encoder + 51 decoder steps = 102), batch 64,
controller H = 100, memory D = N = 4 slots of W = 64, one read head, at one intra-op thread.

Method (what makes the numbers comparable on a shared 2-core machine):

- Candidates of one table are timed *interleaved*: round after round, each candidate runs once, the
  order rotating every round, so a burst of load from other processes hits all of them alike. Each
  candidate first runs ``warmup`` untimed iterations (lazy initialisation; compilation for compiled
  candidates, whose first call is reported separately).
- Each iteration is timed with ``time.perf_counter`` (wall) and ``time.process_time`` (this process's
  CPU time). With one thread the CPU time excludes the time the process waited for a core, so it is the
  robust figure when other work shares the cores; ratios are taken from CPU-time medians.
- Peak memory (scaling tables) is measured in a fresh subprocess per point: the growth of
  ``ru_maxrss`` (the process's resident-set high-water mark) over one training iteration, after the
  model, the batch and a small warm-up iteration exist. It counts everything the iteration keeps
  alive at its peak: the activations saved for the backward pass, gradients, temporaries.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

# The paper's Table 1 setting (reference §4.5: batch 64, T = 50, H = 100, D = 4, W = 64, R = 1).
PAPER = {"batch": 64, "seq_len": 50, "hidden": 100, "memory_size": 4, "word_size": 64, "read_heads": 1}
LSTM_HIDDEN = 125  # the paper's LSTM baseline size (103,840 parameters in Table 1)
PYPI_DNC_VERSION = "1.1.0"

# Scaling grids: memory slots D and input lengths T (DESIGN.md §5, issue 7).
SCALING = {
    "default": {"memory_sizes": (4, 16, 64), "seq_lens": (50, 100, 200)},
    "full": {"memory_sizes": (4, 16, 64, 128, 256), "seq_lens": (50, 100, 200, 500, 1000)},
    "quick": {"memory_sizes": (4, 8), "seq_lens": (10, 20)},
}
# The writer comparison: which (model, task) pairs and which writers.
WRITER_TASKS = ("copy", "double", "add")
WRITERS = ("regular", "uniform", "cached_uniform")
NO_ENCODER_MEMORY = "no_encoder_memory"  # the bound: the encoder never touches the memory


# ---- timing ----


@dataclass
class Timing:
    """The timed iterations of one candidate, in seconds."""

    wall: List[float] = field(default_factory=list)
    cpu: List[float] = field(default_factory=list)
    first_call: Optional[float] = None  # wall seconds of the first (warm-up) call: includes compilation

    @property
    def wall_ms(self) -> float:
        return statistics.median(self.wall) * 1e3

    @property
    def cpu_ms(self) -> float:
        return statistics.median(self.cpu) * 1e3

    def as_dict(self) -> Dict[str, Any]:
        return {"median_wall_ms": round(self.wall_ms, 2), "median_cpu_ms": round(self.cpu_ms, 2),
                "min_cpu_ms": round(min(self.cpu) * 1e3, 2), "max_cpu_ms": round(max(self.cpu) * 1e3, 2),
                "repeats": len(self.cpu),
                "first_call_s": None if self.first_call is None else round(self.first_call, 2)}


def interleave(candidates: Dict[str, Callable[[], Any]], repeats: int = 7, warmup: int = 2) -> Dict[str, Timing]:
    """Time each zero-argument callable ``repeats`` times after ``warmup`` untimed calls, round by round
    (one call of every candidate per round; the starting candidate rotates each round)."""
    if repeats < 1 or warmup < 1:
        raise ValueError(f"`repeats >= 1 and warmup >= 1` must hold, got repeats={repeats}, warmup={warmup}")
    names = list(candidates)
    timings = {name: Timing() for name in names}
    for w in range(warmup):
        for name in names:
            t0 = time.perf_counter()
            candidates[name]()
            if w == 0:
                timings[name].first_call = time.perf_counter() - t0
    for r in range(repeats):
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            c0, t0 = time.process_time(), time.perf_counter()
            candidates[name]()
            timings[name].wall.append(time.perf_counter() - t0)
            timings[name].cpu.append(time.process_time() - c0)
    return timings


# ---- workloads: one training iteration as a closure ----


@dataclass
class Workload:
    name: str
    run: Callable[[], None]  # one forward + loss + backward
    parameters: int
    note: str = ""
    model: Any = None


def make_task(task_name: str, seq_len: int):
    import uwbench.tasks  # noqa: F401  (registers the tasks)
    from uwbench.config import build
    from uwbench.registry import TASKS

    entry = TASKS.entry(task_name)
    return entry.factory(build(entry.config, {"seq_len": seq_len}, f"task ({task_name})"))


def make_batch(task, batch_size: int, seed: int = 0):
    import torch

    return task.sample(batch_size, torch.Generator().manual_seed(seed))


def _iteration(model, loss_fn):
    params = [p for p in model.parameters() if p.requires_grad]

    def run() -> None:
        for p in params:
            p.grad = None
        loss_fn().backward()

    return run


def uwbench_workload(model_name: str, task, batch, values: Optional[Dict[str, Any]] = None,
                     compile: bool = False, name: Optional[str] = None) -> Workload:
    """One of our registered models (``values``: its config) on ``batch``; ``compile`` puts its step
    function under torch.compile (``compile_steps``). ``writer="no_encoder_memory"`` builds the regular
    model and then replaces its writer by one that never writes in the encoder (the bound)."""
    import torch

    from uwbench.models.base import build_model

    values = dict(values or {})
    label = name or f"{model_name} {values.get('writer', '')}".strip() + (" (compiled)" if compile else "")
    no_memory = values.get("writer") == NO_ENCODER_MEMORY
    if no_memory:
        values["writer"] = "regular"
    torch.manual_seed(0)
    model = build_model(model_name, task.input_size, task.output_size, values, task=task)
    if no_memory:
        model.writer = _NoEncoderMemoryWriter(model.cfg, None)
    if compile:
        model.compile_steps()
    run = _iteration(model, lambda: task.loss(model(batch.inputs, batch.decoder_inputs), batch))
    return Workload(label, run, model.num_parameters(), model=model)


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
    return Workload(f"torch.nn.LSTM({hidden})", _iteration(model, loss), params, "oneDNN fused over time")


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
    return Workload(f"PyPI dnc {pypi_dnc_available()}", _iteration(model, loss), params,
                    "LSTM controller, num_hidden_layers=1")


class _NoEncoderMemoryWriter:
    """A writer that never writes in the encoder: the encoder runs the controller only. Not registered
    (it is no model anyone should train); it bounds what any sparse writer can save."""

    cached = False

    def __init__(self, cfg, max_steps):
        self.cfg = cfg

    def schedule(self, n_steps: int) -> List[bool]:
        return [False] * n_steps


# ---- the sections ----


def _row(workload: Workload, timing: Timing, **extra) -> Dict[str, Any]:
    return {"name": workload.name, "parameters": workload.parameters, "note": workload.note,
            **timing.as_dict(), **extra}


def headline(cfg: Dict[str, Any], repeats: int, warmup: int, compile: bool, log=print) -> Dict[str, Any]:
    """The paper's Table-1 setting: every model, side by side (interleaved)."""
    task = make_task("copy", cfg["seq_len"])
    batch = make_batch(task, cfg["batch"])
    mem = {"hidden_size": cfg["hidden"], "memory_size": cfg["memory_size"], "word_size": cfg["word_size"],
           "read_heads": cfg["read_heads"]}
    workloads = [nn_lstm_workload(task, batch),
                 uwbench_workload("lstm", task, batch, {"hidden_size": LSTM_HIDDEN}, name=f"lstm ({LSTM_HIDDEN}, ours)")]
    for writer in WRITERS:
        workloads.append(uwbench_workload("dnc", task, batch, {**mem, "writer": writer}))
    for writer in ("regular", "uniform"):
        workloads.append(uwbench_workload("ntm", task, batch, {**mem, "writer": writer}))
    if compile:
        workloads.append(uwbench_workload("lstm", task, batch, {"hidden_size": LSTM_HIDDEN}, compile=True,
                                          name=f"lstm ({LSTM_HIDDEN}, ours) (compiled)"))
        for writer in WRITERS:
            workloads.append(uwbench_workload("dnc", task, batch, {**mem, "writer": writer}, compile=True))
        workloads.append(uwbench_workload("ntm", task, batch, {**mem, "writer": "regular"}, compile=True))
    notes = []
    pypi = pypi_dnc_available()
    if pypi is None:
        notes.append(f"PyPI dnc skipped: `import dnc` failed (install it: pip install 'uwbench[bench]', "
                     f"i.e. dnc=={PYPI_DNC_VERSION})")
    else:
        workloads.append(pypi_dnc_workload(task, batch, cfg["hidden"], cfg["memory_size"], cfg["word_size"],
                                           cfg["read_heads"]))
    log(f"headline: {len(workloads)} candidates x {repeats} rounds (+{warmup} warm-up)"
        + (" incl. compilation" if compile else ""))
    timings = interleave({w.name: w.run for w in workloads}, repeats, warmup)
    ref_lstm = timings[workloads[0].name].cpu_ms
    ref_dnc = timings["dnc regular"].cpu_ms
    ref_dnc_fast = min(t.cpu_ms for n, t in timings.items() if n.startswith("dnc regular"))
    rows = []
    for w in workloads:
        t = timings[w.name]
        rows.append(_row(w, t, x_nn_lstm=round(t.cpu_ms / ref_lstm, 2), x_dnc_regular=round(t.cpu_ms / ref_dnc, 2)))
    targets = _headline_targets(timings, ref_lstm, ref_dnc_fast, pypi)
    return {"config": {**cfg, "task": "copy", "steps": batch.inputs.shape[1] + batch.decoder_inputs.shape[1]},
            "rows": rows, "targets": targets, "notes": notes}


def _headline_targets(timings: Dict[str, Timing], ref_lstm: float, ref_dnc_fast: float, pypi) -> List[Dict[str, Any]]:
    """Issue 7's speed targets, from CPU-time medians of the headline run."""
    best = {}
    for name, t in timings.items():
        base = name.replace(" (compiled)", "")
        if base not in best or t.cpu_ms < best[base][1]:
            best[base] = (name, t.cpu_ms)
    out = []
    dnc_name, dnc_ms = best["dnc regular"]
    out.append({"target": "regular DNC <= 2x torch.nn.LSTM(125)", "measured": round(dnc_ms / ref_lstm, 2),
                "met": dnc_ms <= 2 * ref_lstm, "using": dnc_name})
    if pypi is not None:
        pypi_ms = next(t.cpu_ms for n, t in timings.items() if n.startswith("PyPI dnc"))
        out.append({"target": "regular DNC >= 3x faster than PyPI dnc", "measured": round(pypi_ms / dnc_ms, 2),
                    "met": pypi_ms >= 3 * dnc_ms, "using": dnc_name})
    ntm_name, ntm_ms = best["ntm regular"]
    out.append({"target": "NTM within 2x of our regular DNC", "measured": round(ntm_ms / ref_dnc_fast, 2),
                "met": ntm_ms <= 2 * ref_dnc_fast, "using": f"{ntm_name} vs {dnc_name}"})
    return out


def writers(cfg: Dict[str, Any], repeats: int, warmup: int, tasks: Sequence[str] = WRITER_TASKS,
            compile: bool = False, log=print) -> Dict[str, Any]:
    """UW and CUW against regular writing per task, and the bound: the share of the time that is the
    encoder's memory work (regular vs a model whose encoder never writes)."""
    mem = {"hidden_size": cfg["hidden"], "memory_size": cfg["memory_size"], "word_size": cfg["word_size"],
           "read_heads": cfg["read_heads"]}
    out = []
    for model_name, task_name in [("dnc", t) for t in tasks] + [("ntm", tasks[0])]:
        task = make_task(task_name, cfg["seq_len"])
        batch = make_batch(task, cfg["batch"])
        kinds = WRITERS + (NO_ENCODER_MEMORY,) if model_name == "dnc" else ("regular", "uniform", NO_ENCODER_MEMORY)
        workloads = {k: uwbench_workload(model_name, task, batch, {**mem, "writer": k}, compile=compile) for k in kinds}
        log(f"writers: {model_name} on {task_name} ({len(kinds)} candidates x {repeats} rounds)")
        timings = interleave({k: w.run for k, w in workloads.items()}, repeats, warmup)
        regular = timings["regular"].cpu_ms
        te = batch.inputs.shape[1]
        share = 1 - timings[NO_ENCODER_MEMORY].cpu_ms / regular
        sparse = [k for k in kinds if k not in ("regular", NO_ENCODER_MEMORY)]
        held = {k: 1 - sum(workloads[k].model.writer.schedule(te)) / te for k in sparse}
        row = {"model": model_name + (" (compiled)" if compile else ""), "task": task_name,
               "encoder_steps": te, "decoder_steps": batch.decoder_inputs.shape[1],
               "ms": {k: round(t.cpu_ms, 2) for k, t in timings.items()},
               "wall_ms": {k: round(t.wall_ms, 2) for k, t in timings.items()},
               "reduction": {k: round(1 - timings[k].cpu_ms / regular, 3) for k in sparse},
               "encoder_memory_share": round(share, 3),
               # skipping the memory on a writer's held encoder steps can save about share x held fraction
               "held_fraction": {k: round(v, 3) for k, v in held.items()},
               "expected_reduction": {k: round(share * v, 3) for k, v in held.items()}}
        out.append(row)
    return {"config": cfg, "rows": out}


def summarize_targets(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Issue 7's targets from whichever sections ran: met or not, with the measured number."""
    sec = result["sections"]
    out: List[Dict[str, Any]] = []
    if "headline" in sec:
        out += sec["headline"]["targets"]
    if "writers" in sec:
        rows = sec["writers"]["rows"]
        cuts = ", ".join(f"{r['model']}/{r['task']} {r['reduction']['uniform']:.0%} of "
                         f"{r['expected_reduction']['uniform']:.0%}" for r in rows)
        out.append({"target": "UW/CUW time cut reported for copy, double, add, with the skippable share",
                    "measured": None, "text": f"UW cut of the skippable: {cuts}", "met": True,
                    "using": "writers table, CPU-time medians"})
    if "trainer" in sec:
        t = sec["trainer"]
        out.append({"target": "trainer adds < 10% to forward+backward", "measured": t["overhead"], "met": t["met"],
                    "using": "dnc regular, CPU time"})
    if "scaling" in sec:
        rows = [r for r in sec["scaling"]["rows"] if r.get("axis") == "D" and r.get("peak_rss_growth_mb")]
        ours = {r["memory_size"]: r for r in rows if r["impl"] == "ours"}
        pypi = {r["memory_size"]: r for r in rows if r["impl"] == "pypi_dnc"}
        both = sorted(set(ours) & set(pypi))
        if both:
            d = both[-1]
            ratio = ours[d]["peak_rss_growth_mb"] / pypi[d]["peak_rss_growth_mb"]
            out.append({"target": f"peak memory at N={d} <= half of PyPI dnc's"
                                  + ("" if d == 256 else " (the target is at N=256: --full)"),
                        "measured": round(ratio, 2), "met": ratio <= 0.5,
                        "using": f"{ours[d]['peak_rss_growth_mb']:.0f} MB vs {pypi[d]['peak_rss_growth_mb']:.0f} MB"})
    return out


def trainer_overhead(cfg: Dict[str, Any], repeats: int, updates: int = 10, log=print) -> Dict[str, Any]:
    """The trainer's time per update (``uwbench.training.loop.train``: sampling, forward, loss, backward,
    clipping, Adam, bookkeeping) against the model's own forward + loss + backward, both in process CPU
    time. Primary figure: the trainer's own split of each update (``model_cpu_seconds_per_100``), so both
    sides come from the same updates of the same, training model. Also given: the same model
    configuration at its initial weights on a fixed batch, in rounds alternating with the trainer's
    (a model in training runs a few percent slower than one at its initial weights, which is no cost of
    the trainer)."""
    import torch

    from uwbench.training.loop import train

    model = {"name": "dnc", "hidden_size": cfg["hidden"], "memory_size": cfg["memory_size"],
             "word_size": cfg["word_size"], "read_heads": cfg["read_heads"]}
    run_cfg = {"task": {"name": "copy", "seq_len": cfg["seq_len"], "test_size": cfg["batch"]},
               "model": model,
               "train": {"steps": updates + 1, "batch_size": cfg["batch"], "eval_every": 10 ** 6,
                         "eval_batches": 1, "threads": torch.get_num_threads()}}
    task = make_task("copy", cfg["seq_len"])
    batch = make_batch(task, cfg["batch"])
    iso = uwbench_workload("dnc", task, batch, {k: v for k, v in model.items() if k != "name"})
    for _ in range(2):
        iso.run()
    log(f"trainer overhead: {repeats} runs of {updates} timed updates, alternating with the model alone")
    own, fresh, trainer_ms, model_ms, iso_ms = [], [], [], [], []
    for r in range(repeats):
        for which in (("trainer", "model") if r % 2 == 0 else ("model", "trainer")):
            if which == "trainer":
                res = train(run_cfg, progress=False)  # the first update is timed apart by the trainer
                trainer_ms.append(res.cpu_seconds_per_100 * 10)
                model_ms.append(res.model_cpu_seconds_per_100 * 10)
                own.append(res.cpu_seconds_per_100 / res.model_cpu_seconds_per_100)
            else:
                c0 = time.process_time()
                for _ in range(updates):
                    iso.run()
                iso_ms.append((time.process_time() - c0) / updates * 1e3)
        fresh.append(trainer_ms[-1] / iso_ms[-1])
    overhead = statistics.median(own) - 1
    return {"config": {**cfg, "model": "dnc regular", "updates_per_run": updates, "runs": repeats},
            "trainer_ms_per_update": round(statistics.median(trainer_ms), 2),
            "model_ms_in_trainer": round(statistics.median(model_ms), 2),
            "model_ms_initial_weights": round(statistics.median(iso_ms), 2),
            "overhead": round(overhead, 4), "overhead_vs_initial_weights": round(statistics.median(fresh) - 1, 3),
            "target": "< 10%", "met": overhead < 0.10}


# ---- scaling: one subprocess per point ----


def measure_point(point: Dict[str, Any]) -> Dict[str, Any]:
    """Run in a fresh process (``python -m uwbench.benchmarking point JSON``): build the workload, run a
    small warm-up iteration (batch 2, length 5), then one measured iteration for the peak-RSS growth,
    then ``repeats`` timed iterations. ``point``: impl (ours | ours_compiled | pypi_dnc | nn_lstm), model,
    writer, batch, seq_len, hidden, memory_size, word_size, repeats."""
    import torch

    torch.set_num_threads(1)
    impl = point["impl"]

    def build(batch_size: int, seq_len: int) -> Workload:
        task = make_task("copy", seq_len)
        batch = make_batch(task, batch_size)
        if impl == "pypi_dnc":
            return pypi_dnc_workload(task, batch, point["hidden"], point["memory_size"], point["word_size"])
        if impl == "nn_lstm":
            return nn_lstm_workload(task, batch)
        values = {"hidden_size": point["hidden"], "memory_size": point["memory_size"],
                  "word_size": point["word_size"], "writer": point.get("writer", "regular")}
        return uwbench_workload(point.get("model", "dnc"), task, batch, values, compile=impl == "ours_compiled")

    compiled = impl == "ours_compiled"
    if not compiled:
        build(2, 5).run()  # kernels, thread pools, allocator arenas
    work = build(point["batch"], point["seq_len"])
    base_kb = _reset_peak_rss()
    t0 = time.perf_counter()
    work.run()  # compiled: the compilation, whose own memory hides the iteration's (no peak reported)
    first = time.perf_counter() - t0
    peak_kb = _peak_rss()
    timing = interleave({"x": work.run}, repeats=point.get("repeats", 3), warmup=1)["x"]
    timing.first_call = first
    growth = None if compiled else round((peak_kb - base_kb) / 1024, 1)
    return {**point, "name": work.name, "parameters": work.parameters, **timing.as_dict(),
            "peak_rss_growth_mb": growth, "rss_before_mb": round(base_kb / 1024, 1)}


def _status_kb(field_name: str) -> Optional[int]:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> int:
    """Reset the process's resident-set high-water mark to the current RSS (Linux: ``5`` into
    /proc/self/clear_refs) and return the current RSS in KiB, so the next ``_peak_rss`` measures from
    here. Without that interface the import-time peak stays, and the growth shown is a lower bound."""
    import resource

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        current = _status_kb("VmRSS")
        if current is not None:
            return current
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _peak_rss() -> int:
    """The resident-set high-water mark in KiB (VmHWM; ru_maxrss where /proc is missing)."""
    import resource

    hwm = _status_kb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def run_point(point: Dict[str, Any], timeout: float = 1800.0) -> Dict[str, Any]:
    """``measure_point`` in a subprocess (so each point's peak memory is its own)."""
    cmd = [sys.executable, "-m", "uwbench.benchmarking", "point", json.dumps(point)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**point, "error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {**point, "error": " | ".join(tail) or f"exit code {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def scaling(cfg: Dict[str, Any], grid: Dict[str, Sequence[int]], repeats: int, compile: bool = False,
            log=print) -> Dict[str, Any]:
    """Time and peak memory against D (at the config's T) and against T (at the config's D)."""
    impls = ["ours"] + (["ours_compiled"] if compile else [])
    if pypi_dnc_available() is not None:
        impls.append("pypi_dnc")
    base = {"batch": cfg["batch"], "seq_len": cfg["seq_len"], "hidden": cfg["hidden"],
            "memory_size": cfg["memory_size"], "word_size": cfg["word_size"], "repeats": repeats}
    points = []
    for d in grid["memory_sizes"]:
        for impl in impls:
            points.append({**base, "impl": impl, "memory_size": d, "axis": "D"})
    for t in grid["seq_lens"]:
        for impl in impls + ["ours_uniform", "nn_lstm"]:
            p = {**base, "impl": impl, "seq_len": t, "axis": "T"}
            if impl == "ours_uniform":
                p.update(impl="ours", writer="uniform")
            points.append(p)
    rows = []
    for i, p in enumerate(points, 1):
        label = f"{p['impl']}{' ' + p['writer'] if 'writer' in p else ''} D={p['memory_size']} T={p['seq_len']}"
        log(f"scaling {i}/{len(points)}: {label}")
        rows.append(run_point(p))
    return {"config": cfg, "grid": {k: list(v) for k, v in grid.items()}, "rows": rows,
            "method": "one subprocess per point; peak = growth of ru_maxrss over one training iteration"}


# ---- the whole run ----


def machine_info() -> Dict[str, Any]:
    import torch

    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {"cpu": cpu, "logical_cores": os.cpu_count(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "python": platform.python_version(),
            "platform": platform.platform(), "pypi_dnc": pypi_dnc_available()}
    try:
        with open("/proc/meminfo") as f:
            info["memory_gb"] = round(int(f.readline().split()[1]) / 2 ** 20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return info


def load_average() -> Optional[List[float]]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


QUICK = {"batch": 8, "seq_len": 10, "hidden": 16, "memory_size": 4, "word_size": 8, "read_heads": 1}


def run_benchmarks(mode: str = "default", sections: Sequence[str] = ("headline", "writers", "trainer", "scaling"),
                   compile: bool = True, repeats: Optional[int] = None, log=print) -> Dict[str, Any]:
    """Run the chosen sections at one thread and return the result dict (what ``uwbench bench`` writes).
    ``mode``: quick (a CI-sized configuration, checks the machinery; the numbers mean little),
    default (the paper's configuration; scaling on a small grid), full (scaling up to D = 256, T = 1000)."""
    import torch

    if mode not in SCALING:
        raise ValueError(f"`mode` must be one of {sorted(SCALING)}, got {mode!r}")
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # the configuration of every number here (DESIGN.md §5)
    cfg = dict(QUICK if mode == "quick" else PAPER)
    repeats = repeats or (5 if mode == "quick" else 7)
    started = time.time()
    result: Dict[str, Any] = {"mode": mode, "compile": compile, "machine": machine_info(),
                              "load_average_start": load_average(),
                              "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                              "timing": "medians of per-iteration process CPU time (wall also given), "
                                        "candidates interleaved round by round", "sections": {}}
    try:
        if "headline" in sections:
            result["sections"]["headline"] = headline(cfg, repeats, 2, compile, log)
        if "writers" in sections:
            result["sections"]["writers"] = writers(cfg, repeats, 2, log=log)
        if "trainer" in sections:
            result["sections"]["trainer"] = trainer_overhead(cfg, 6 if mode != "quick" else 2, 10, log)
        if "scaling" in sections:
            grid = SCALING[mode]
            result["sections"]["scaling"] = scaling(cfg, grid, 5 if mode == "full" else 3,
                                                    compile and mode == "full", log)
    finally:
        torch.set_num_threads(previous)
    result["load_average_end"] = load_average()
    result["seconds"] = round(time.time() - started, 1)
    result["targets"] = summarize_targets(result)
    return result


# ---- tables ----


def _fmt(x: Optional[float], digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _fmt_measure(target: Dict[str, Any]) -> str:
    if "text" in target:
        return target["text"]
    if "trainer" in target["target"]:
        return f"{target['measured']:+.1%}"
    return f"{target['measured']:.2f}x"


def format_tables(result: Dict[str, Any]) -> str:
    """Markdown tables of a result dict (printed by ``uwbench bench``; the headline goes in the README)."""
    lines: List[str] = []
    m = result.get("machine", {})
    lines.append(f"Machine: {m.get('cpu')}, {m.get('logical_cores')} logical cores, torch {m.get('torch')}, "
                 f"1 thread; load average {result.get('load_average_start')} -> {result.get('load_average_end')}; "
                 f"mode {result.get('mode')}.")
    sec = result["sections"]
    if "headline" in sec:
        h = sec["headline"]
        c = h["config"]
        lines += ["", f"Headline: copy T={c['seq_len']} ({c['steps']} steps), batch {c['batch']}, H={c['hidden']}, "
                      f"D={c['memory_size']}, W={c['word_size']}, R={c['read_heads']}, forward+backward, 1 thread. "
                      "ms per iteration (median).", "",
                  "| model | params | CPU ms | wall ms | x nn.LSTM | x our DNC (eager) | first call s |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for r in h["rows"]:
            lines.append(f"| {r['name']} | {r['parameters']:,} | {_fmt(r['median_cpu_ms'])} | {_fmt(r['median_wall_ms'])} "
                         f"| {r['x_nn_lstm']:.2f} | {r['x_dnc_regular']:.2f} | {_fmt(r['first_call_s'], 2)} |")
        for n in h["notes"]:
            lines.append(f"\nNote: {n}")
    if "writers" in sec:
        lines += ["", "Writers: time cut against regular writing (CPU-time medians). The encoder's memory share "
                      "(regular vs an encoder that never touches the memory) bounds what skipping memory work can "
                      "save; a writer holding a fraction h of the encoder steps can save about share x h "
                      "(expected).", "",
                  "| model | task | steps enc+dec | regular ms | uniform ms: cut (expected) "
                  "| cached_uniform ms: cut (expected) | no encoder memory ms: share |",
                  "|---|---|---:|---:|---:|---:|---:|"]

        def cell(r, k):
            if k not in r["reduction"]:
                return "-"
            return f"{_fmt(r['ms'][k])}: {r['reduction'][k]:.0%} ({r['expected_reduction'][k]:.0%})"

        for r in sec["writers"]["rows"]:
            lines.append(f"| {r['model']} | {r['task']} | {r['encoder_steps']}+{r['decoder_steps']} "
                         f"| {_fmt(r['ms']['regular'])} | {cell(r, 'uniform')} | {cell(r, 'cached_uniform')} "
                         f"| {_fmt(r['ms'][NO_ENCODER_MEMORY])}: {r['encoder_memory_share']:.0%} |")
    if "trainer" in sec:
        t = sec["trainer"]
        lines += ["", f"Trainer overhead (dnc regular, {t['config']['runs']} runs of {t['config']['updates_per_run']} "
                      f"timed updates, CPU medians): {t['trainer_ms_per_update']} ms per update, of which "
                      f"{t['model_ms_in_trainer']} ms are the model's forward+loss+backward: the trainer adds "
                      f"{t['overhead']:+.1%} (target < 10%: {'met' if t['met'] else 'not met'}). The same model at "
                      f"its initial weights on a fixed batch: {t['model_ms_initial_weights']} ms "
                      f"({t['overhead_vs_initial_weights']:+.1%} against it)."]
    if "scaling" in sec:
        s = sec["scaling"]
        for axis, key, label in (("D", "memory_size", "D (slots)"), ("T", "seq_len", "T (tokens)")):
            rows = [r for r in s["rows"] if r.get("axis") == axis]
            if not rows:
                continue
            lines += ["", f"Scaling against {label}: CPU ms per iteration / peak memory growth MB "
                          f"(batch {s['config']['batch']}, {s['method']}).", ""]
            impls = []
            for r in rows:
                name = r["impl"] + (f" {r['writer']}" if r.get("writer") else "")
                if name not in impls:
                    impls.append(name)
            lines += ["| " + label + " | " + " | ".join(impls) + " |", "|---:|" + "---:|" * len(impls)]
            for v in sorted({r[key] for r in rows}):
                cells = []
                for name in impls:
                    r = next((r for r in rows if r[key] == v and
                              r["impl"] + (f" {r['writer']}" if r.get("writer") else "") == name), None)
                    if r is None:
                        cells.append("-")
                    elif "error" in r:
                        cells.append("error")
                    else:
                        cells.append(f"{_fmt(r['median_cpu_ms'], 0)} / {_fmt(r['peak_rss_growth_mb'], 0)}")
                lines.append(f"| {v} | " + " | ".join(cells) + " |")
    if result.get("targets"):
        lines += ["", "Targets (issue 7):", "", "| target | measured | met | how |", "|---|---:|:-:|---|"]
        for t in result["targets"]:
            lines.append(f"| {t['target']} | {_fmt_measure(t)} | {'yes' if t['met'] else 'no'} | {t['using']} |")
    lines.append(f"\nTotal benchmark time: {result.get('seconds')} s.")
    return "\n".join(lines)


def write_result(result: Dict[str, Any], out_dir: str, name: Optional[str] = None) -> str:
    os.makedirs(out_dir, exist_ok=True)
    name = name or f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{result['mode']}.json"
    path = os.path.join(out_dir, name)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    return path


def _main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and argv[0] == "point":
        print(json.dumps(measure_point(json.loads(argv[1]))))
        return 0
    print("usage: python -m uwbench.benchmarking point JSON   (use `uwbench bench` for the benchmarks)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1:]))
