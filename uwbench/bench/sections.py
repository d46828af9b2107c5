"""The benchmark's sections and the whole run (``uwbench bench``; method in benchmarks/README.md).

    headline   every model side by side at the paper's Table-1 setting (interleaved)
    writers    UW and CUW against regular writing, with the encoder's memory share as the bound
    trainer    the trainer's overhead over the model's own forward + backward
    endtoend   the default `uwbench train` against the eager path, both as subprocesses started together
    scaling    time and peak memory against D and T (one subprocess per point)
    population member-updates per second against the population size K, the solo run beside (population.py)
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

from uwbench import atomic
from uwbench.bench import targets
from uwbench.env import NATIVE_CACHE_ENV
from uwbench.bench.memory import run_point
from uwbench.bench.timing import Timing, interleave
from uwbench.bench.workloads import (CUW_SCHEDULE, LSTM_HIDDEN, NN_LSTM, NO_ENCODER_MEMORY, PAPER, PYPI_DNC,
                                     PYPI_DNC_VERSION, QUICK, Workload, make_batch, make_task, memory_values,
                                     nn_lstm_workload, pypi_dnc_available, pypi_dnc_workload, uwbench_workload)
from uwbench.errors import UserError

SECTIONS = ("headline", "writers", "trainer", "endtoend", "scaling", "population", "gpu")  # gpu: skipped without CUDA
# Scaling grids: memory slots D and input lengths T.
SCALING = {
    "default": {"memory_sizes": (4, 16, 64), "seq_lens": (50, 100, 200)},
    "full": {"memory_sizes": (4, 16, 64, 128, 256), "seq_lens": (50, 100, 200, 500, 1000)},
    "quick": {"memory_sizes": (4, 8), "seq_lens": (10, 20)},
}
WRITER_TASKS = ("copy", "double", "add")
WRITERS = ("regular", "uniform", "cached_uniform")
END_TO_END_UPDATES = {"default": 2000, "full": 2000, "quick": 20}


def _row(workload: Workload, timing: Timing, **extra) -> Dict[str, Any]:
    return {"id": workload.id, "label": workload.label, "parameters": workload.parameters, "note": workload.note,
            **timing.as_dict(), **extra}


def native_path() -> bool:
    """Whether the native kernels build here (the tables then show the native path, the default one)."""
    from uwbench import native

    return native.available()


def headline(cfg: Dict[str, Any], repeats: int, warmup: int, compile: bool, log=print) -> Dict[str, Any]:
    """The paper's Table-1 setting: every model, side by side (interleaved)."""
    task = make_task("copy", cfg["seq_len"])
    batch = make_batch(task, cfg["batch"])
    mem = memory_values(cfg)
    lstm = {"hidden_size": LSTM_HIDDEN}
    workloads = [nn_lstm_workload(task, batch), uwbench_workload("lstm", task, batch, lstm, label=f"lstm ({LSTM_HIDDEN}, ours)")]
    for writer in WRITERS:
        workloads.append(uwbench_workload("dnc", task, batch, {**mem, "writer": writer}))
    for writer in ("regular", "uniform"):
        workloads.append(uwbench_workload("ntm", task, batch, {**mem, "writer": writer}))
    notes = []
    if native_path():
        workloads.append(uwbench_workload("lstm", task, batch, lstm, native=True,
                                          label=f"lstm ({LSTM_HIDDEN}, ours) (native)"))
        for writer in WRITERS:
            workloads.append(uwbench_workload("dnc", task, batch, {**mem, "writer": writer}, native=True))
        for writer in ("regular", "uniform"):
            workloads.append(uwbench_workload("ntm", task, batch, {**mem, "writer": writer}, native=True))
    else:
        from uwbench import native

        notes.append(f"native path skipped: {native.unavailable_reason()}")
    if compile:
        workloads.append(uwbench_workload("lstm", task, batch, lstm, compile=True,
                                          label=f"lstm ({LSTM_HIDDEN}, ours) (compiled)"))
        for writer in WRITERS:
            workloads.append(uwbench_workload("dnc", task, batch, {**mem, "writer": writer}, compile=True))
        workloads.append(uwbench_workload("ntm", task, batch, {**mem, "writer": "regular"}, compile=True))
    if pypi_dnc_available() is None:
        notes.append(f"PyPI dnc skipped: `import dnc` failed (install it: pip install 'uwbench[bench]', "
                     f"i.e. dnc=={PYPI_DNC_VERSION})")
    else:
        workloads.append(pypi_dnc_workload(task, batch, cfg["hidden"], cfg["memory_size"], cfg["word_size"],
                                           cfg["read_heads"]))
    log(f"headline: {len(workloads)} candidates x {repeats} rounds (+{warmup} warm-up)"
        + (" incl. compilation" if compile else ""))
    timings = interleave({w.id: w.run for w in workloads}, repeats, warmup)
    ref_lstm = timings[NN_LSTM].cpu_ms
    ref_dnc = timings["dnc:regular"].cpu_ms
    rows = [_row(w, timings[w.id], x_nn_lstm=round(timings[w.id].cpu_ms / ref_lstm, 2),
                 x_dnc_regular=round(timings[w.id].cpu_ms / ref_dnc, 2)) for w in workloads]
    out = {"config": {**cfg, "task": "copy", "steps": batch.inputs.shape[1] + batch.decoder_inputs.shape[1]},
           "rows": rows, "notes": notes}
    out["targets"] = targets.headline_targets(out)
    return out


def writers(cfg: Dict[str, Any], repeats: int, warmup: int, tasks: Sequence[str] = WRITER_TASKS,
            compile: bool = False, log=print) -> Dict[str, Any]:
    """UW and CUW against regular writing per task, and the bound: the share of the time that is the
    encoder's memory work (regular vs a model whose encoder never writes). For the DNC also CUW's
    schedule without its attention (``cuw_schedule``), which splits CUW's cut into the memory work its
    schedule skips and the attention it adds (``attention_ms``: CUW less its schedule alone). Keys are
    writer names. The models run on the default path: native where the kernels build (else eager, or
    compiled with ``compile``)."""
    mem = memory_values(cfg)
    native = not compile and native_path()
    out = []
    for model_name, task_name in [("dnc", t) for t in tasks] + [("ntm", tasks[0])]:
        task = make_task(task_name, cfg["seq_len"])
        batch = make_batch(task, cfg["batch"])
        kinds = (WRITERS + (CUW_SCHEDULE, NO_ENCODER_MEMORY) if model_name == "dnc"
                 else ("regular", "uniform", NO_ENCODER_MEMORY))
        workloads = {k: uwbench_workload(model_name, task, batch, {**mem, "writer": k}, compile=compile, native=native)
                     for k in kinds}
        log(f"writers: {model_name} on {task_name} ({len(kinds)} candidates x {repeats} rounds)")
        timings = interleave({k: w.run for k, w in workloads.items()}, repeats, warmup)
        regular = timings["regular"].cpu_ms
        te = batch.inputs.shape[1]
        share = 1 - timings[NO_ENCODER_MEMORY].cpu_ms / regular
        sparse = [k for k in kinds if k not in ("regular", NO_ENCODER_MEMORY)]
        held = {k: 1 - sum(workloads[k].model.writer.schedule(te)) / te for k in sparse}
        row = {"model": model_name, "compiled": compile, "native": native, "task": task_name,
                "encoder_steps": te, "decoder_steps": batch.decoder_inputs.shape[1],
                "ms": {k: round(t.cpu_ms, 2) for k, t in timings.items()},
                "wall_ms": {k: round(t.wall_ms, 2) for k, t in timings.items()},
                "reduction": {k: round(1 - timings[k].cpu_ms / regular, 3) for k in sparse},
                "encoder_memory_share": round(share, 3),
                # skipping the memory on a writer's held encoder steps saves about share x held fraction
                "held_fraction": {k: round(v, 3) for k, v in held.items()},
                "expected_reduction": {k: round(share * v, 3) for k, v in held.items()}}
        if CUW_SCHEDULE in timings:
            extra = timings["cached_uniform"].cpu_ms - timings[CUW_SCHEDULE].cpu_ms
            row["attention_ms"] = round(extra, 2)
            row["attention_share"] = round(extra / regular, 3)
        out.append(row)
    return {"config": cfg, "rows": out}


def trainer_overhead(cfg: Dict[str, Any], repeats: int, updates: int = 10, log=print) -> Dict[str, Any]:
    """The trainer's time per update (``uwbench.training.loop.train``: sampling, forward, loss, backward,
    clipping, Adam, bookkeeping) against the model's own forward + loss + backward, both in process CPU
    time. Primary figure: the trainer's own split of each update (``model_cpu_seconds_per_100``), so both
    sides come from the same updates of the same, training model. Also given: the same model at its
    initial weights on a fixed batch, in rounds alternating with the trainer's (a model in training runs
    a few percent slower than one at its initial weights, which is no cost of the trainer). Both on the
    default path (native where the kernels build, else eager)."""
    import torch

    from uwbench.training.loop import train

    native = native_path()
    model = {"name": "dnc", **memory_values(cfg)}
    run_cfg = {"task": {"name": "copy", "seq_len": cfg["seq_len"], "test_size": cfg["batch"]},
               "model": model,
               "train": {"steps": updates + 1, "batch_size": cfg["batch"], "eval_every": 10 ** 6,
                         "eval_batches": 1, "threads": torch.get_num_threads(), "compile": False,
                         "native": native}}
    task = make_task("copy", cfg["seq_len"])
    batch = make_batch(task, cfg["batch"])
    iso = uwbench_workload("dnc", task, batch, {k: v for k, v in model.items() if k != "name"}, native=native)
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
    return {"config": {**cfg, "model": "dnc regular" + (" (native)" if native else ""), "updates_per_run": updates,
                       "runs": repeats},
            "trainer_ms_per_update": round(statistics.median(trainer_ms), 2),
            "model_ms_in_trainer": round(statistics.median(model_ms), 2),
            "model_ms_initial_weights": round(statistics.median(iso_ms), 2),
            "overhead": round(statistics.median(own) - 1, 4),
            "overhead_vs_initial_weights": round(statistics.median(fresh) - 1, 3)}


def end_to_end(cfg: Dict[str, Any], updates: int, log=print) -> Dict[str, Any]:
    """Wall time of ``uwbench train --task copy --model dnc`` with the default settings (the native path
    where the kernels build, else train.compile=auto) and with ``--set train.native=false
    train.compile=false`` (the eager path, the default before either existed), as two subprocesses
    started together so that load hits both alike. Each gets a fresh runs folder, so its Inductor cache is
    cold: a compilation is in the figure; so is the native kernels' build, whose cache is made cold too."""
    argv = [sys.executable, "-m", "uwbench", "train", "--task", "copy", "--model", "dnc", "--no-progress",
            "--seq-len", str(cfg["seq_len"]), "--steps", str(updates), "--batch-size", str(cfg["batch"]),
            "--hidden-size", str(cfg["hidden"]), "--memory-size", str(cfg["memory_size"]),
            "--set", f"model.word_size={cfg['word_size']}"]
    variants = {"default": [], "eager": ["--set", "train.compile=false", "--set", "train.native=false"]}
    log(f"end to end: {updates} DNC updates, default and eager side by side")
    procs, started, walls, errors = {}, {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="uwbench-bench-") as tmp:
        for name, extra in variants.items():
            env = {**os.environ, "UWBENCH_RUNS_DIR": os.path.join(tmp, name)}
            env.pop("TORCHINDUCTOR_CACHE_DIR", None)  # a cold cache under the fresh runs folder
            env[NATIVE_CACHE_ENV] = os.path.join(tmp, name, "native")  # and a fresh kernel build
            started[name] = time.perf_counter()
            procs[name] = subprocess.Popen(argv + extra, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True)
        for name, proc in procs.items():
            output, _ = proc.communicate()
            walls[name] = round(time.perf_counter() - started[name], 1)
            if proc.returncode != 0:
                errors[name] = " | ".join(output.strip().splitlines()[-3:])
    out = {"config": {**cfg, "task": "copy", "model": "dnc", "steps": updates}, "wall_s": walls,
           "speedup": round(walls["eager"] / walls["default"], 2)}
    if errors:
        out["errors"] = errors
    return out


def scaling(cfg: Dict[str, Any], grid: Dict[str, Sequence[int]], repeats: int, compile: bool = False,
            log=print) -> Dict[str, Any]:
    """Time and peak memory against D (at the config's T) and against T (at the config's D)."""
    impls = ["ours"] + (["ours_compiled"] if compile else [])
    if pypi_dnc_available() is not None:
        impls.append(PYPI_DNC)
    base = {"batch": cfg["batch"], "seq_len": cfg["seq_len"], "hidden": cfg["hidden"],
            "memory_size": cfg["memory_size"], "word_size": cfg["word_size"], "repeats": repeats}
    points = []
    for d in grid["memory_sizes"]:
        for impl in impls:
            points.append({**base, "impl": impl, "memory_size": d, "axis": "D"})
    for t in grid["seq_lens"]:
        for impl in impls + ["ours_uniform", NN_LSTM]:
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
            "method": "one subprocess per point; peak = growth of the resident set over one training iteration"}


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
    info = {"cpu": cpu, "cpu_flags": cpu_flags(), "isa_settings": isa_settings(), "logical_cores": os.cpu_count(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(), "python": platform.python_version(),
            "platform": platform.platform(), "pypi_dnc": pypi_dnc_available()}
    try:
        with open("/proc/meminfo") as f:
            info["memory_gb"] = round(int(f.readline().split()[1]) / 2 ** 20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return info


CPU_FLAGS = ("avx2", "avx512f", "fma", "neon")  # the instruction sets the kernels' vector width depends on


def cpu_flags() -> Dict[str, bool]:
    """Which of ``CPU_FLAGS`` this CPU has (``/proc/cpuinfo``; on 64-bit ARM NEON is listed as asimd), so a
    result says which kind of machine gave it (the native kernels are built with -march=native)."""
    have: set = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    have = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    if "asimd" in have:
        have.add("neon")
    return {flag: flag in have for flag in CPU_FLAGS}


# the settings that cap a library's instruction set below the CPU's (ours: uwbench/native/__init__.py)
ISA_SETTINGS = ("UWBENCH_NATIVE_VECTOR", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")


def isa_settings() -> Dict[str, str]:
    """Those of ``ISA_SETTINGS`` set for this run (e.g. AVX2 on an AVX-512 machine), so a result says so."""
    return {k: os.environ[k] for k in ISA_SETTINGS if os.environ.get(k)}


def load_average() -> Optional[List[float]]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_benchmarks(mode: str = "default", sections: Sequence[str] = ("headline", "writers", "trainer", "scaling"),
                   compile: bool = True, repeats: Optional[int] = None, log=print,
                   population_sizes: Optional[Sequence[int]] = None) -> Dict[str, Any]:
    """Run the chosen sections at one thread and return the result dict (what ``uwbench bench`` writes).
    ``mode``: quick (a CI-sized configuration, checks the machinery; the numbers mean little),
    default (the paper's configuration; scaling on a small grid), full (scaling up to D = 256, T = 1000)."""
    import torch

    if mode not in SCALING:
        raise UserError(f"`mode` must be one of {sorted(SCALING)}, got {mode!r}")
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise UserError(f"unknown section(s) {unknown}; choose from {', '.join(SECTIONS)}")
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # the configuration of every number here (benchmarks/README.md)
    cfg = dict(QUICK if mode == "quick" else PAPER)
    asked = repeats  # the population section's rounds, where given
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
        if "endtoend" in sections:
            result["sections"]["endtoend"] = end_to_end(cfg, END_TO_END_UPDATES[mode], log)
        if "scaling" in sections:
            result["sections"]["scaling"] = scaling(cfg, SCALING[mode], 5 if mode == "full" else 3,
                                                    compile and mode == "full", log)
        if "population" in sections:
            from uwbench.bench.population import population

            rounds = asked if asked is not None else (2 if mode == "quick" else 3)
            result["sections"]["population"] = population(cfg, mode, rounds, log, population_sizes)
        if "gpu" in sections:
            from uwbench.bench.gpu import gpu

            result["sections"]["gpu"] = gpu(cfg, mode, log)
    finally:
        torch.set_num_threads(previous)
    result["load_average_end"] = load_average()
    result["seconds"] = round(time.time() - started, 1)
    result["targets"] = targets.summarize(result)
    return result


def write_result(result: Dict[str, Any], out_dir: str, name: Optional[str] = None) -> str:
    os.makedirs(out_dir, exist_ok=True)
    name = name or f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{result['mode']}.json"
    return write_json(result, os.path.join(out_dir, name))


def write_json(obj: Any, path: str) -> str:
    """A benchmark result as indented JSON (the committed files' format); returns the path."""
    return atomic.write_text(path, json.dumps(obj, indent=1) + "\n")
