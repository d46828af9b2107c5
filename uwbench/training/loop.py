"""The training loop: train, evaluate, keep the best checkpoint, test, time, record.

Follows the authors' protocol (reference §4, decisions D12-D15): Adam (or RMSprop) on fresh random
batches, per-tensor L2 gradient clipping, evaluation every ``eval_every`` updates on ``eval_batches``
fresh batches, the best-evaluated weights kept, and a final test of those weights on the task's fixed
seeded test set. Timing: training seconds per 100 updates *without* evaluation, evaluation separately.
The first update is timed on its own (``first_update_seconds``: lazy initialisation and, with
a compiled step, the compilation) and left out of the per-100 figures, which measure the steady state.

Threads: ``threads=None`` means one intra-op thread on CPU. A MANN step is hundreds of tiny kernels, so
more threads do not speed it up (benchmarks/README.md), and on a machine whose cores are busy with
other work, torch's default of one thread per core makes every parallel region wait for a descheduled
thread: single DNC updates measured 1.1-5.9 s instead of 70-85 ms that way. The thread count is
restored after the run.

A non-finite loss stops the run, marks it failed with the step it happened at, and keeps what was
recorded. ``report(step, value)`` lets a sweep prune a run; it raises ``Pruned`` to stop it.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Mapping, Optional

import torch

from uwbench import env
from uwbench.config import flatten
from uwbench.registry import MODELS, TASKS
from uwbench.training.config import ResolvedRun, resolve_run

OPTIMIZERS = {"adam": torch.optim.Adam, "rmsprop": torch.optim.RMSprop}
EVAL_SEED_OFFSET = 1_000_003  # evaluation batches come from their own stream, never the training one


class Pruned(Exception):
    """Raised by a sweep's ``report`` callback to stop an unpromising run."""


class Diverged(RuntimeError):
    """The loss became NaN or infinite."""


@dataclass
class RunResult:
    status: str  # finished | failed | pruned
    metric: str  # accuracy | mse
    test: Optional[float] = None  # test metric of the best checkpoint
    best_eval: Optional[float] = None
    best_step: Optional[int] = None
    steps_done: int = 0
    train_seconds: float = 0.0
    seconds_per_100: Optional[float] = None  # steady state: the first update is not counted
    cpu_seconds_per_100: Optional[float] = None  # the same in process CPU time (robust on a busy machine)
    model_cpu_seconds_per_100: Optional[float] = None  # of that, the model's forward, loss and backward
    first_update_seconds: Optional[float] = None
    threads: Optional[int] = None  # torch intra-op threads used
    eval_seconds: float = 0.0
    test_seconds: float = 0.0
    num_parameters: int = 0
    run_id: Optional[str] = None
    error: Optional[str] = None
    history: Dict[str, list] = field(default_factory=dict)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asked for, but this machine has no CUDA GPU; use --device cpu")
    return device


def clip_gradients(params, clip: float, mode: str) -> None:
    """Per-tensor L2 clipping (each gradient tensor scaled to norm <= clip; the authors' code and D13) or
    global-norm clipping."""
    grads = [p for p in params if p.grad is not None]
    if mode == "per_tensor":
        # torch's foreach norm: one fused call for all tensors, no host sync
        norms = torch._foreach_norm([p.grad for p in grads])
        scales = [torch.clamp(clip / (n + 1e-6), max=1.0) for n in norms]
        torch._foreach_mul_([p.grad for p in grads], scales)
    elif mode == "global":
        torch.nn.utils.clip_grad_norm_(grads, clip)


def resolve_threads(threads: Optional[int], device: torch.device) -> Optional[int]:
    """The intra-op thread count to use: ``threads`` if given, else 1 on CPU (see the module docstring),
    else None (torch's default, for CUDA runs)."""
    if threads is not None:
        return threads
    return 1 if device.type == "cpu" else None


def enable_compile(model, model_name: str, setting=True, updates: int = 0, steps_per_sequence=None) -> bool:
    """Put the model's step function under torch.compile as ``TrainConfig.compile`` says (``setting``:
    True, False or "auto", decided by ``compile_policy.should_compile`` from the run's length). Returns
    whether it did. An explicit True on a model without a step function is an error."""
    from uwbench.training.compile_policy import should_compile

    compile_steps = getattr(model, "compile_steps", None)
    if setting is True and compile_steps is None:
        raise ValueError(f"`compile` needs a model with a step function to compile (the memory models and lstm), "
                         f"got model {model_name!r}; set train.compile=auto or false")
    saving = getattr(model, "compiled_step_saving", None) if compile_steps is not None else None
    if not should_compile(setting, saving, updates, steps_per_sequence):
        return False
    compile_steps()
    return True


def steps_per_sequence(task) -> int:
    """Encoder + decoder steps of one training sequence, from one sample drawn with its own generator
    (the run's training stream is not touched)."""
    probe = task.sample(1, torch.Generator().manual_seed(0))
    return int(probe.inputs.shape[1] + probe.decoder_inputs.shape[1])


def build_components(run: ResolvedRun, device: torch.device):
    task = TASKS.get(run.task_name)(run.task_cfg)
    model = MODELS.get(run.model_name)(run.model_cfg, input_size=task.input_size,
                                       output_size=task.output_size, task=task)
    task.attach_to(model)  # task-owned trainable parameters (e.g. a trainable embedding) join the model
    return task, model.to(device)


@torch.no_grad()
def evaluate(model, task, batches, device) -> float:
    """The task's headline metric over ``batches`` (summed, then divided: a mean per token)."""
    was_training = model.training
    model.eval()
    total = count = None
    for batch in batches:
        batch = batch.to(device)
        out = model(batch.inputs, batch.decoder_inputs, batch.lengths)
        s, n = task.score(out, batch)[task.metric]
        total = s if total is None else total + s
        count = n if count is None else count + n
    model.train(was_training)
    return float(total) / float(count)


def _better(a: float, b: Optional[float], mode: str) -> bool:
    return b is None or (a > b if mode == "max" else a < b)


def train(
    config: Mapping,
    run=None,
    report: Optional[Callable[[int, float], None]] = None,
    progress: bool = True,
    progress_desc: Optional[str] = None,
) -> RunResult:
    """Train one configuration. ``config`` is a nested run config (see ``resolve_run``); ``run`` is an
    open ``uwbench.tracking.mlflow.Run`` (or None: nothing recorded). The run is ended here."""
    resolved = resolve_run(config)
    tc = resolved.train
    device = resolve_device(tc.device)
    threads = resolve_threads(tc.threads, device)
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _train(resolved, device, run, report, progress, progress_desc)
    finally:
        torch.set_num_threads(previous_threads)


def _train(resolved: ResolvedRun, device: torch.device, run, report, progress, progress_desc) -> RunResult:
    tc = resolved.train
    torch.manual_seed(tc.seed)
    task, model = build_components(resolved, device)
    auto = tc.compile == "auto" and getattr(model, "compiled_step_saving", 0)
    compiled = tc.compile is not False and enable_compile(
        model, resolved.model_name, tc.compile, tc.steps, steps_per_sequence(task) if auto else None)
    optimizer = OPTIMIZERS[tc.optimizer](model.parameters(), lr=tc.lr)
    train_gen = torch.Generator().manual_seed(tc.seed)
    eval_gen = torch.Generator().manual_seed(tc.seed + EVAL_SEED_OFFSET)
    result = RunResult(status="failed", metric=task.metric, num_parameters=model.num_parameters(),
                       threads=torch.get_num_threads())
    result.history = {"step": [], "train_loss": [], f"eval_{task.metric}": [], "seconds_per_100": []}

    if run is not None:
        result.run_id = run.run_id
        cfg_dict = resolved.as_dict()
        run.log_params(flatten(cfg_dict))
        run.log_dict(cfg_dict, "config.json")
        run.set_tags({"num_parameters": result.num_parameters, "device": str(device),
                      "torch_version": torch.__version__, "torch_threads": result.threads,
                      "compiled": bool(compiled)})

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=tc.steps, desc=progress_desc or f"{resolved.model_name}/{resolved.task_name}",
                   unit="upd", dynamic_ncols=True, leave=True,
                   mininterval=env.progress_interval())
    best_state = None
    loss_sum = torch.zeros((), device=device)
    window_steps = 0  # updates in the current evaluation window (for the mean loss)
    window_timed = 0  # of those, the ones in window_time (all but the first update of the run)
    window_time = 0.0
    timed_steps = 0
    timed_cpu = 0.0  # process CPU seconds of the timed updates
    timed_model_cpu = 0.0  # of those, forward + loss + backward (the rest is the trainer's own work)
    evals_since_best = 0
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    step = 0
    try:
        model.train()
        for step in range(1, tc.steps + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            batch = task.sample(tc.batch_size, train_gen).to(device)
            m0 = time.process_time()
            out = model(batch.inputs, batch.decoder_inputs, batch.lengths)
            loss = task.loss(out, batch)
            if device.type == "cpu" and not torch.isfinite(loss):
                raise Diverged(f"loss became {float(loss.detach())} at update {step}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            m1 = time.process_time()
            clip_gradients(model.parameters(), tc.clip, tc.clip_mode)
            optimizer.step()
            loss_sum += loss.detach()
            # Drop this update's graph now: held until the next forward, its ~1,000 nodes per step cost about
            # 5% of a DNC update (measured by `uwbench bench`, benchmarks/README.md).
            del out, loss
            window_steps += 1
            evaluating = step % tc.eval_every == 0 or step == tc.steps
            if step == 1:  # warm-up (lazy init, compilation): timed on its own, not in the per-100 figures
                sync()
                result.first_update_seconds = time.perf_counter() - t0
            else:
                if evaluating:
                    sync()  # the only host sync: once per evaluation window
                window_time += time.perf_counter() - t0
                timed_cpu += time.process_time() - c0
                timed_model_cpu += m1 - m0
                window_timed += 1
            if evaluating:
                mean_loss = float(loss_sum) / window_steps
                if not math.isfinite(mean_loss):
                    raise Diverged(f"loss became {mean_loss} by update {step}")
                e0 = time.perf_counter()
                batches = task.eval_batches(tc.eval_batches, tc.batch_size, eval_gen)
                value = evaluate(model, task, batches, device)
                result.eval_seconds += time.perf_counter() - e0
                if window_timed:
                    sec100 = window_time / window_timed * 100.0
                else:  # a window holding only the first update
                    sec100 = result.first_update_seconds * 100.0
                result.train_seconds += window_time
                timed_steps += window_timed
                result.steps_done = step
                h = result.history
                h["step"].append(step)
                h["train_loss"].append(mean_loss)
                h[f"eval_{task.metric}"].append(value)
                h["seconds_per_100"].append(sec100)
                if run is not None:
                    run.log_metrics({"train_loss": mean_loss, f"eval_{task.metric}": value,
                                     "seconds_per_100": sec100}, step)
                if _better(value, result.best_eval, task.metric_mode):
                    result.best_eval, result.best_step = value, step
                    best_state = copy.deepcopy(model.state_dict())
                    evals_since_best = 0
                else:
                    evals_since_best += 1
                if bar is not None:
                    bar.set_postfix(loss=f"{mean_loss:.3f}", **{task.metric[:3]: f"{value:.3f}"})
                loss_sum.zero_()
                window_steps, window_timed, window_time = 0, 0, 0.0
                if report is not None:
                    report(step, value)
                if tc.early_stop_evals and evals_since_best >= tc.early_stop_evals:
                    break
            if bar is not None:
                bar.update(1)
    except Pruned:
        result.status = "pruned"
        _finish(run, result, "KILLED")
        raise
    except Diverged as exc:
        result.error = f"diverged: {exc}. Try a lower lr (now {tc.lr}) or a tighter clip (now {tc.clip})."
        _finish(run, result, "FAILED")
        return result
    except BaseException as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        _finish(run, result, "FAILED" if not isinstance(exc, KeyboardInterrupt) else "KILLED")
        raise
    finally:
        if bar is not None:
            bar.close()

    if timed_steps:
        result.seconds_per_100 = result.train_seconds / timed_steps * 100.0
        result.cpu_seconds_per_100 = timed_cpu / timed_steps * 100.0
        result.model_cpu_seconds_per_100 = timed_model_cpu / timed_steps * 100.0
    else:  # a one-update run: only the warm-up update exists
        result.seconds_per_100 = (result.first_update_seconds or 0.0) * 100.0
    result.train_seconds += result.first_update_seconds or 0.0
    model.load_state_dict(best_state)
    t0 = time.perf_counter()
    result.test = evaluate(model, task, task.test_batches(), device)
    result.test_seconds = time.perf_counter() - t0
    result.status = "finished"
    if run is not None:
        run.log_metrics({f"test_{task.metric}": result.test, "train_seconds": result.train_seconds,
                         "mean_seconds_per_100": result.seconds_per_100,
                         "mean_cpu_seconds_per_100": result.cpu_seconds_per_100,
                         "first_update_seconds": result.first_update_seconds, "eval_seconds": result.eval_seconds,
                         "test_seconds": result.test_seconds, f"best_eval_{task.metric}": result.best_eval},
                        result.steps_done)
        run.log_bytes(lambda p: torch.save(best_state, p), "best.pt", "checkpoint")
    _finish(run, result, "FINISHED")
    return result


def _finish(run, result: RunResult, status: str) -> None:
    if run is None:
        return
    tags = {"status": result.status}
    if result.error:
        tags["error"] = result.error[:5000]
    run.set_tags(tags)
    run.end(status)


def load_checkpoint(path: str) -> Dict[str, torch.Tensor]:
    """Load a saved state dict safely (tensors only)."""
    return torch.load(path, map_location="cpu", weights_only=True)
