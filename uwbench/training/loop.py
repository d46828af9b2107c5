"""The training loop: train, evaluate, keep the best checkpoint, test, time, record.

Follows the authors' protocol (docs/reference.md §8): Adam (or RMSprop) on fresh random batches, per-tensor
L2 gradient clipping, evaluation every ``eval_every`` updates on ``eval_batches`` fresh batches, the
best-evaluated weights kept, and a final test of those weights on the task's fixed seeded test set.
Timing (``timing.py``): training seconds per 100 updates *without* evaluation, evaluation separately. The
first update is timed on its own (``first_update_seconds``: lazy initialisation and, with a compiled step,
the compilation; with CUDA graphs, the capture) and left out of the per-100 figures, which measure the
steady state. What is recorded in MLflow: ``record.py``.

Checkpoints and resume (``checkpoint.py``): with an MLflow run, the loop state is saved at every
``checkpoint_every``-th evaluation, and a run whose checkpoint exists continues from it under the same
MLflow run, logging no (metric, step) point twice. On CPU a resumed run ends exactly as an uninterrupted
one (same learning curve, same test metric). What a resume does to the timings: the updates redone after
a kill (at most one checkpoint interval) and the time spent before the kill on them are not counted;
``first_update_seconds`` stays the first process's; the first update after each resume pays the warm-up
again, so it is timed apart (``resume_warmup_seconds``, logged only for resumed runs) and left out of the
per-100 figures like the first one, and ``train_seconds`` counts it. ``checkpoint_seconds`` (writing the
checkpoints) is outside every other timing.

Threads: ``threads=None`` means one intra-op thread on CPU. A MANN step is hundreds of tiny kernels, so
more threads do not speed it up (benchmarks/README.md), and on a machine whose cores are busy with
other work, torch's default of one thread per core makes every parallel region wait for a descheduled
thread, many times slower (measured in benchmarks/README.md, "Trainer overhead", item 1). The thread
count is restored after the run.

A non-finite loss stops the run, marks it failed with the step it happened at, and keeps what was
recorded; so does a window whose mean training loss is above ``DIVERGED_FACTOR`` times the loss of the
run's first update (the untrained model's): a step size that throws the weights far off (``lr 1e10``)
gives finite losses many times the guessing level and zero gradients, which would otherwise end as a
finished run. (In the committed reports' 590 runs no window's mean loss exceeds 1.31x its run's first
window's.) A fault of the machine around the run (a full disk, a tracking store that stopped answering,
``errors.fault``) ends it KILLED with status ``interrupted``, never as its result. ``report(step, value)`` lets a sweep prune a run; it raises ``Pruned`` to stop it. A pruned or
diverged run's checkpoint is deleted; an interrupted or crashed one's is kept, to resume from.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import torch

from uwbench import env, metrics
from uwbench.models.cuda_graph import GraphedTraining
from uwbench.training import record, sizes, timing
from uwbench.training.checkpoint import Checkpoint, capture_rng, restore_rng
from uwbench.training.config import ResolvedRun, resolve_run
from uwbench.errors import UserError

OPTIMIZERS = {"adam": torch.optim.Adam, "rmsprop": torch.optim.RMSprop}
EVAL_SEED_OFFSET = 1_000_003  # evaluation batches come from their own stream, never the training one
DIVERGED_FACTOR = 4.0  # a window's mean training loss above this times the first update's: diverged


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
    cpu_seconds_per_100: Optional[float] = None  # the same in process CPU time (no waiting for a core; docs/speed.md)
    model_cpu_seconds_per_100: Optional[float] = None  # of that, the model's forward, loss and backward
    first_update_seconds: Optional[float] = None
    threads: Optional[int] = None  # torch intra-op threads used
    path: Optional[str] = None  # the execution path: native | cuda_graph | compiled | eager (compile_policy.py)
    path_reason: Optional[str] = None  # why the run did not take the native path (None: it did)
    eval_seconds: float = 0.0
    test_seconds: float = 0.0
    checkpoint_seconds: float = 0.0  # writing mid-run checkpoints (outside every other timing)
    resumes: int = 0  # times this run was resumed from a checkpoint
    num_parameters: int = 0
    run_id: Optional[str] = None
    error: Optional[str] = None
    history: Dict[str, list] = field(default_factory=dict)


def resolve_device(name: str) -> torch.device:
    """The torch device of ``train.device`` (its forms are checked by ``TrainConfig``): ``auto`` is a GPU when
    there is one; a GPU asked for must exist."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {name!r} asked for, but this machine has no CUDA GPU; use --device cpu")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise UserError(f"device {name!r} asked for, but this machine has {torch.cuda.device_count()} CUDA GPU(s) "
                         f"(cuda:0 to cuda:{torch.cuda.device_count() - 1}); use one of those or --device cuda")
    return device


def check_run(resolved: ResolvedRun) -> torch.device:
    """What can be known to fail before a run is recorded or a tensor allocated: the device exists and the
    run's tensors fit in its memory (``sizes.check_fits``). Returns the device. ``uwbench train`` calls it
    before it creates the MLflow run; ``train`` calls it again for every caller."""
    device = resolve_device(resolved.train.device)
    sizes.check_fits(resolved, device)
    return device


def tf_variables(model: torch.nn.Module) -> List[List[Tuple[torch.nn.Parameter, slice]]]:
    """The model's parameters grouped as the authors' TensorFlow variables, for ``clip_mode: per_variable``:
    each module's ``tf_variables()`` (a controller's [x; r; h] kernel is one variable over ``weight_ih`` and
    ``weight_hh``), every other parameter a variable of its own. A part is (parameter, slice of its last
    axis)."""
    groups, covered = [], set()
    for module in model.modules():
        declared = getattr(module, "tf_variables", None)
        if callable(declared):
            for var in declared():
                groups.append(list(var))
                covered.update(id(p) for p, _ in var)
    groups += [[(p, slice(None))] for p in model.parameters() if id(p) not in covered]
    return groups


def clip_gradients(params, clip: float, mode: str,
                   variables: Optional[List[List[Tuple[torch.nn.Parameter, slice]]]] = None) -> Optional[torch.Tensor]:
    """L2 gradient clipping (docs/reference.md §8.2): per tensor (each gradient tensor scaled to norm <= clip),
    per variable (each group of ``variables``, the authors' TF variables from ``tf_variables``, scaled to a
    joint norm <= clip: their code's hard-coded rule), global (one norm over all), or none.

    Returns the gradient's size before clipping, as a 0-d tensor (no host sync): the largest tensor's
    (per_tensor, none) or variable's (per_variable) L2 norm, or the global norm.
    """
    params = [p for p in params if p.grad is not None]
    if not params:
        return None
    if mode == "global":
        return torch.nn.utils.clip_grad_norm_(params, clip)
    if mode == "per_variable":
        if variables is None:
            raise ValueError("clip_mode per_variable needs the model's variables (training.loop.tf_variables)")
        parts = [[p.grad[..., s] for p, s in var if p.grad is not None] for var in variables]
        parts = [views for views in parts if views]
        flat = [v for views in parts for v in views]
        norms = iter(torch._foreach_norm(flat))
        joint = [torch.stack([next(norms) for _ in views]).norm() for views in parts]  # one L2 norm per variable
        torch._foreach_mul_(flat, [torch.clamp(clip / (n + 1e-6), max=1.0) for n, views in zip(joint, parts)
                                   for _ in views])
        return torch.stack(joint).max()
    grads = [p.grad for p in params]
    norms = torch._foreach_norm(grads)  # one fused call for all tensors, no host sync
    if mode == "per_tensor":
        torch._foreach_mul_(grads, [torch.clamp(clip / (n + 1e-6), max=1.0) for n in norms])
    return torch.stack(norms).max()


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
        raise UserError(f"`compile` needs a model with a step function to compile (the memory models and lstm), "
                         f"got model {model_name!r}; set train.compile=auto or false")
    saving = getattr(model, "compiled_step_saving", None) if compile_steps is not None else None
    if not should_compile(setting, saving, updates, steps_per_sequence):
        return False
    compile_steps()
    return True


def choose_path(model, model_name: str, tc, task) -> Tuple[str, Optional[str]]:
    """Set the model up for the execution path the ``native``, ``cuda_graph`` and ``compile`` settings ask
    for and return its name: ``native`` (the C++ whole-sequence path), ``cuda_graph`` (the whole training
    forward and backward replayed as CUDA graphs: the loop calls ``GraphedTraining``), ``compiled`` or
    ``eager`` (``training/compile_policy.py`` has the rules), with why it is not the native path (None
    when it is)."""
    from uwbench.training.compile_policy import cuda_graph_decision, native_choice

    native, why = native_choice(model, model_name, tc.native, tc.compile)
    if native and probe(task).lengths is not None:
        why = "the task's batches carry per-sequence lengths, which the native path does not take"
        if tc.native is True:
            raise UserError(f"train.native=true cannot run this task: {why}; set train.native=auto or false")
        native = False
    if native:
        model.use_native(True)
        return "native", None
    param = next(model.parameters())
    lengths = tc.cuda_graph is not False and param.device.type == "cuda" and probe(task).lengths is not None
    if cuda_graph_decision(model, tc.cuda_graph, tc.compile, param.device, lengths):
        return "cuda_graph", why
    auto = tc.compile == "auto" and getattr(model, "compiled_step_saving", 0)
    compiled = tc.compile is not False and enable_compile(
        model, model_name, tc.compile, tc.steps, steps_per_sequence(task) if auto else None)
    return ("compiled" if compiled else "eager"), why


def probe(task):
    """One sequence of ``task``, drawn with its own generator (the run's training stream is not touched):
    what the path rules read of the task's batches."""
    return task.sample(1, torch.Generator().manual_seed(0))


def steps_per_sequence(task) -> int:
    """Encoder + decoder steps of one training sequence."""
    sample = probe(task)
    return int(sample.inputs.shape[1] + sample.decoder_inputs.shape[1])


def build_components(run: ResolvedRun, device: torch.device):
    from uwbench.models.base import build_model
    from uwbench.tasks import build_task

    task = build_task(run.task_name, run.task_cfg)
    model = build_model(run.model_name, task.input_size, task.output_size, run.model_cfg, task=task)
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


def train(
    config: Mapping,
    run=None,
    report: Optional[Callable[[int, float], None]] = None,
    progress: bool = True,
    progress_desc: Optional[str] = None,
    checkpoint_dir: Optional[str] = None,
    system_metrics: Optional[bool] = None,
) -> RunResult:
    """Train one configuration. ``config`` is a nested run config (see ``resolve_run``); ``run`` is an
    open ``uwbench.tracking.mlflow.Run`` (or None: nothing recorded, no checkpoints). The run is ended here.

    With a ``run``, a checkpoint is written to ``<checkpoint_dir>/<run id>/`` (default
    ``uwbench.env.checkpoint_dir()``) every ``train.checkpoint_every`` evaluations, and a run whose
    checkpoint exists is resumed from it (``uwbench.training.checkpoint``). ``system_metrics``: log CPU,
    memory and GPU use to the run (None: ``uwbench.env.system_metrics()``, on unless switched off)."""
    try:
        resolved = resolve_run(config)
        tc = resolved.train
        device = check_run(resolved)
        ckpt = None
        if run is not None:
            ckpt = Checkpoint(run.run_id, resolved.as_dict(), tc.checkpoint_every, checkpoint_dir)
        saved = ckpt.load() if ckpt is not None else None  # refuses another config before anything is recorded
        if run is not None and (env.system_metrics() if system_metrics is None else system_metrics):
            run.start_system_metrics()
        threads = resolve_threads(tc.threads, device)
        previous_threads = torch.get_num_threads()
        if threads is not None:
            torch.set_num_threads(threads)
        try:
            return _Trainer(resolved, device, run, report, ckpt, saved).train(progress, progress_desc)
        finally:
            torch.set_num_threads(previous_threads)
    except BaseException as exc:  # never leave the run RUNNING: whatever failed is recorded on it
        if run is not None:
            record.fail(run, exc)
        raise


@dataclass
class _Counters:
    """What the loop carries from one evaluation to the next besides the ``RunResult`` fields (saved in
    checkpoints)."""

    timed_steps: int = 0  # updates in the per-100 figures
    timed_cpu: float = 0.0  # process CPU seconds of the timed updates
    timed_model_cpu: float = 0.0  # of those, forward + loss + backward (the rest is the trainer's own work)
    evals_since_best: int = 0
    resumes: int = 0
    resume_warmup_seconds: float = 0.0  # the first update after each resume (timed apart, like the first)
    checkpoint_seconds: float = 0.0
    first_loss: Optional[float] = None  # the loss of the run's first update (the untrained model's)


def check_loss(mean_loss: float, step: int, counters: "_Counters") -> None:
    """Raise ``Diverged`` when a window's mean training loss is not finite, or above ``DIVERGED_FACTOR``
    times the run's first update's loss."""
    if not math.isfinite(mean_loss):
        raise Diverged(f"loss became {mean_loss} by update {step}")
    first = counters.first_loss
    if first is not None and first > 0 and mean_loss > DIVERGED_FACTOR * first:
        raise Diverged(f"the training loss rose to {mean_loss:.4g} by update {step}, more than {DIVERGED_FACTOR:g}x "
                       f"its first update's {first:.4g}")


# RunResult fields a checkpoint carries (the rest is recomputed at the end)
_RESULT_FIELDS = ("best_eval", "best_step", "steps_done", "train_seconds", "eval_seconds", "first_update_seconds",
                  "history")


def _snapshot(step: int, done: bool, model, optimizer, generators, result: RunResult, counters: _Counters,
              best_state) -> Dict:
    return {"step": step, "done": done, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "rng": capture_rng(generators), "best_state": best_state,
            "result": {k: getattr(result, k) for k in _RESULT_FIELDS}, "counters": dataclasses.asdict(counters)}


def _restore(saved: Dict, model, optimizer, generators, result: RunResult) -> _Counters:
    model.load_state_dict(saved["model"])  # the random writer's mask too (a buffer of the model)
    optimizer.load_state_dict(saved["optimizer"])
    restore_rng(saved["rng"], generators)
    for k in _RESULT_FIELDS:
        setattr(result, k, saved["result"][k])
    counters = _Counters(**saved["counters"])
    counters.resumes += 1
    return counters


class _Trainer:
    """One run of the loop: built from the resolved config (or restored from a checkpoint), then
    ``run()``: the updates, an evaluation every ``eval_every`` (``_evaluation``), the test at the end
    (``_conclude``). Timing is ``timing.UpdateTimer``'s, recording ``record``'s."""

    def __init__(self, resolved: ResolvedRun, device: torch.device, run, report, ckpt: Optional[Checkpoint],
                 saved: Optional[Dict]):
        self.resolved, self.tc, self.device = resolved, resolved.train, device
        self.run, self.report, self.ckpt, self.saved = run, report, ckpt, saved
        tc = self.tc
        torch.manual_seed(tc.seed)
        self.task, self.model = build_components(resolved, device)
        path, path_reason = choose_path(self.model, resolved.model_name, tc, self.task)
        self.forward = GraphedTraining(self.model) if path == "cuda_graph" else self.model  # the training forward
        # multi-tensor steps on every device (torch takes them on CUDA only by default): the same numbers as
        # the per-tensor loop, with far fewer calls per update (tests/training/test_optimizer_step.py)
        self.optimizer = OPTIMIZERS[tc.optimizer](self.model.parameters(), lr=tc.lr, foreach=True)
        self.generators = {"train": torch.Generator().manual_seed(tc.seed),
                           "eval": torch.Generator().manual_seed(tc.seed + EVAL_SEED_OFFSET)}
        self.measure = metrics.measure(self.task.metric)  # which evaluation is better
        self.keys = record.MetricKeys(self.task.metric)
        self.result = RunResult(status="failed", metric=self.task.metric, num_parameters=self.model.num_parameters(),
                                threads=torch.get_num_threads(), path=path,
                                path_reason=path_reason)
        self.result.history = {"step": [], "train_loss": [], self.keys.eval: [], "seconds_per_100": [],
                               metrics.GRAD_NORM: []}
        self.counters = _Counters()
        self.best_state = None
        self.start, self.done = 0, False
        if saved is not None:
            self.counters = _restore(saved, self.model, self.optimizer, self.generators, self.result)
            self.best_state, self.start, self.done = saved["best_state"], saved["step"], saved["done"]
            # a checkpoint written before the gradient size was recorded: its evaluations have none
            self.result.history.setdefault(metrics.GRAD_NORM, [None] * len(self.result.history["step"]))
        self.bar = None
        # called as observer(step, batch, loss) after each backward, before the clip (``training/trace.py``)
        self.observer: Optional[Callable] = None

    def train(self, progress: bool, progress_desc: Optional[str]) -> RunResult:
        run, result, ckpt = self.run, self.result, self.ckpt
        if run is not None:
            record.open_run(run, self.resolved, result, self.saved, self.counters.resumes, self.device)
        if progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.tc.steps, initial=self.start,
                            desc=progress_desc or f"{self.resolved.model_name}/{self.resolved.task_name}",
                            unit="upd", dynamic_ncols=True, leave=True, mininterval=env.progress_interval())
        try:
            self._updates()
        except Pruned:
            result.status = "pruned"
            record.finish(run, result, "KILLED")
            if ckpt is not None:
                ckpt.discard()
            raise
        except Diverged as exc:
            result.error = f"diverged: {exc}. Try a lower lr (now {self.tc.lr}) or a tighter clip (now {self.tc.clip})."
            record.finish(run, result, "FAILED")
            if ckpt is not None:
                ckpt.discard()
            return result
        except BaseException as exc:  # interrupted or crashed: the checkpoint stays, to resume from
            end_interrupted(run, result, exc)
            raise
        finally:
            if self.bar is not None:
                self.bar.close()
        return self._conclude()

    def _updates(self) -> None:
        tc, task, model, device = self.tc, self.task, self.model, self.device
        train_gen = self.generators["train"]
        loss_sum = torch.zeros((), device=device)
        grad_max = torch.zeros((), device=device)  # the largest gradient before clipping in the window
        window_steps = 0  # updates in the current evaluation window (for the mean loss)
        variables = tf_variables(model) if tc.clip_mode == "per_variable" else None
        timer = timing.UpdateTimer(self.start + 1, torch.cuda.synchronize if device.type == "cuda" else (lambda: None))
        model.train()
        for step in range(self.start + 1, (self.start if self.done else tc.steps) + 1):
            timer.start()
            batch = task.sample(tc.batch_size, train_gen).to(device)
            timer.model_start()
            out = self.forward(batch.inputs, batch.decoder_inputs, batch.lengths)
            loss = task.loss(out, batch)
            if device.type == "cpu" and not torch.isfinite(loss):
                raise Diverged(f"loss became {float(loss.detach())} at update {step}")
            if step == 1:
                self.counters.first_loss = float(loss.detach())
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            timer.model_end()
            if self.observer is not None:
                self.observer(step, batch, loss)
            size = clip_gradients(model.parameters(), tc.clip, tc.clip_mode, variables)
            if size is not None:
                torch.maximum(grad_max, size.detach().to(grad_max.dtype), out=grad_max)
            self.optimizer.step()
            loss_sum += loss.detach()
            # Drop this update's graph now: held until the next forward, it costs a share of every update
            # (benchmarks/README.md, "Trainer overhead", item 3).
            del out, loss
            window_steps += 1
            evaluating = step % tc.eval_every == 0 or step == tc.steps
            timer.stop(step, evaluating, self.result, self.counters)
            if evaluating:
                mean_loss = float(loss_sum) / window_steps
                check_loss(mean_loss, step, self.counters)
                grad_size = float(grad_max)
                loss_sum.zero_()
                grad_max.zero_()
                window_steps = 0
                if self._evaluation(step, mean_loss, timer, grad_size):
                    break
            if self.bar is not None:
                self.bar.update(1)

    def _evaluation(self, step: int, mean_loss: float, timer: timing.UpdateTimer, grad_size: float) -> bool:
        """Evaluate, record the curve point, keep the best weights, checkpoint when due, report for
        pruning; returns whether the run is done (its last update, or early stopping)."""
        tc, result, counters = self.tc, self.result, self.counters
        e0 = time.perf_counter()
        batches = self.task.eval_batches(tc.eval_batches, tc.batch_size, self.generators["eval"])
        value = evaluate(self.model, self.task, batches, self.device)
        result.eval_seconds += time.perf_counter() - e0
        sec100 = timer.close_window(result, counters)
        result.steps_done = step
        h = result.history
        h["step"].append(step)
        h["train_loss"].append(mean_loss)
        h[self.keys.eval].append(value)
        h["seconds_per_100"].append(sec100)
        h[metrics.GRAD_NORM].append(grad_size)
        if self.run is not None:
            record.log_evaluation(self.run, self.keys, step, mean_loss, value, sec100, grad_size)
        if result.best_eval is None or self.measure.better(value, result.best_eval):
            result.best_eval, result.best_step = value, step
            self.best_state = copy.deepcopy(self.model.state_dict())
            counters.evals_since_best = 0
        else:
            counters.evals_since_best += 1
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{mean_loss:.3f}", **{self.task.metric[:3]: f"{value:.3f}"})
        done = step == tc.steps or bool(tc.early_stop_evals and counters.evals_since_best >= tc.early_stop_evals)
        if self.ckpt is not None and self.ckpt.due(len(h["step"]), done):
            k0 = time.perf_counter()
            self.ckpt.save(_snapshot(step, done, self.model, self.optimizer, self.generators, result, counters,
                                     self.best_state))
            counters.checkpoint_seconds += time.perf_counter() - k0
        if self.report is not None:
            self.report(step, value)
        return done

    def _conclude(self) -> RunResult:
        """The run's timings, the test of the best weights, the final record; the checkpoint folder keeps
        only the best weights."""
        result, counters = self.result, self.counters
        timing.finish(result, counters)
        result.resumes = counters.resumes
        result.checkpoint_seconds = counters.checkpoint_seconds
        self.model.load_state_dict(self.best_state)
        t0 = time.perf_counter()
        result.test = evaluate(self.model, self.task, self.task.test_batches(), self.device)
        result.test_seconds = time.perf_counter() - t0
        result.status = "finished"
        if self.run is not None:
            record.log_final(self.run, self.keys, result, counters, self.best_state)
        record.finish(self.run, result, "FINISHED")
        if self.ckpt is not None:
            self.ckpt.finish(self.best_state)
        return result


def end_interrupted(run, result: RunResult, exc: BaseException) -> None:
    """End a run that an exception stopped mid-training (its checkpoint stays): a fault of the machine
    (``errors.fault``) or an interruption as KILLED, with status ``interrupted`` for a fault; anything
    else as FAILED."""
    from uwbench import errors

    fault = errors.fault(exc) if isinstance(exc, Exception) else None
    result.error = fault or f"{type(exc).__name__}: {exc}"
    if fault:
        result.status = "interrupted"
    record.finish(run, result, "KILLED" if fault or isinstance(exc, KeyboardInterrupt) else "FAILED")


def load_checkpoint(path: str) -> Dict[str, torch.Tensor]:
    """Load a saved state dict safely (tensors only)."""
    return torch.load(path, map_location="cpu", weights_only=True)
