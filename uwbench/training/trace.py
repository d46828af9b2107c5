"""Replay a recorded run update for update and trace the updates around a fall in its learning curve.

A run that collapses late (its accuracy falls back towards guessing after it had learned) leaves only its
curve behind: the mean training loss and the largest gradient norm of each evaluation window. ``trace``
replays the run from its recorded config with the same seeds, execution path and thread count, so its
updates are the run's own (it checks its evaluations against the recorded curve and says where they part),
and inside a window of updates records, per parameter tensor and per interface field:

- the gradient norm before clipping, the norm of the update the optimiser applied and the parameter norm;
- at compared updates (every ``compare_every``-th and every spike), the same gradient recomputed on the
  same weights and batch by the reference paths: the torch path in float32, and the torch path and (for a
  native run) the native path in float64. The float64 torch gradient is the reference; a run path that
  disagrees with it at a spike and agrees elsewhere points at a kernel, one that agrees points at the
  training dynamics.

An interface field is a block of columns of the interface projection ``w_xi`` (the memory's
``interface_fields()``: the write gate, the allocation gate, the read modes, ...): its gradient norm names
the memory operation the update pushes on. The window's *onset* is its first update whose largest gradient
norm exceeds ``spike_factor`` times the median of the updates before it in the window.

``uwbench trace`` (``uwbench/commands/trace.py``) reads a run from MLflow; ``uwbench/report/falls.py``
writes a trace's files, reads them back and puts branches side by side; docs/findings.md holds what the
traces of the committed runs found.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from uwbench.errors import UserError

# the paths a compared gradient is recomputed on: name -> (native?, dtype)
REFERENCE_PATHS: Dict[str, Tuple[bool, torch.dtype]] = {
    "torch32": (False, torch.float32),
    "torch64": (False, torch.float64),
    "native64": (True, torch.float64),
}
REFERENCE = "torch64"  # the gradient the others are measured against
MIN_ONSET_HISTORY = 20  # updates of the window before an onset can be called (the median needs a history)
LOSS_RISE_FACTOR = 1.5  # the loss's rise: this many times the window's median loss so far


class _TraceDone(Exception):
    """Raised by the observer at the window's last update: the replay ends there."""


@dataclass
class View:
    """A named part of the parameters whose gradient is traced: a whole tensor, or a block of columns
    of the interface projection (an interface field)."""

    name: str
    param: torch.nn.Parameter
    param_name: str  # the parameter's name in the model (a reference model's is looked up by it)
    columns: Optional[slice] = None  # None: the whole tensor
    kind: str = "tensor"  # "tensor" | "field"

    def of(self, t: torch.Tensor) -> torch.Tensor:
        return t if self.columns is None else t[:, self.columns]


def views(model: torch.nn.Module) -> List[View]:
    """Every parameter tensor, plus one view per interface field of a memory model (the column blocks of
    ``w_xi``, from the memory's ``interface_fields()``)."""
    out = [View(name, p, name) for name, p in model.named_parameters()]
    memory = getattr(model, "memory", None)
    w_xi = getattr(model, "w_xi", None)
    fields = getattr(memory, "interface_fields", None)
    if w_xi is not None and fields is not None:
        start = 0
        for name, width in fields():
            out.append(View(f"w_xi[{name}]", w_xi, "w_xi", slice(start, start + width), "field"))
            start += width
        if start != w_xi.shape[1]:
            raise ValueError(f"the memory's interface fields cover {start} columns, w_xi has {w_xi.shape[1]}")
    return out


@dataclass
class TraceResult:
    """What a trace found. ``rows``: per (update, view) ``grad_norm``, ``update_norm`` (the optimiser's
    change of that view at that update), ``param_norm`` (before the update). ``steps``: per update the
    loss and the largest and the global gradient norm. ``compare``: per compared (update, view, path) the
    gradient norm and its relative distance to the reference. ``curve``: per evaluation of the replay its
    value and the recorded one."""

    path: str
    start: int
    stop: int
    rows: List[Dict] = field(default_factory=list)
    steps: List[Dict] = field(default_factory=list)
    compare: List[Dict] = field(default_factory=list)
    curve: List[Dict] = field(default_factory=list)
    onset: Optional[int] = None
    clip: float = 0.0
    clip_mode: str = "per_tensor"
    branch_from: Optional[int] = None  # the update of the state a branch started from (None: a replay from the start)
    changes: Dict = field(default_factory=dict)  # the settings a branch changed

    def checked(self) -> List[Dict]:
        """The evaluations the replay is checked on: those with a recorded value, and for a branch with
        changed settings only those up to its branch point (after it, it is meant to differ)."""
        branched = bool(self.changes) and self.branch_from is not None
        return [c for c in self.curve if c["recorded"] is not None and not (branched and c["step"] > self.branch_from)]

    def replay_departs(self, tol: float = 1e-6) -> Optional[int]:
        """The first checked evaluation where the replay's value differs from the recorded one by more than
        ``tol`` (None: the replay is the run, as far as the recorded curve tells)."""
        return next((c["step"] for c in self.checked() if abs(c["replay"] - c["recorded"]) > tol), None)



def _cast(batch, dtype):
    """The batch with its floating-point tensors in ``dtype`` (class ids stay integers)."""
    def f(t):
        return t.to(dtype) if t is not None and t.is_floating_point() else t
    return replace(batch, inputs=f(batch.inputs), decoder_inputs=f(batch.decoder_inputs), targets=f(batch.targets))


class _Observer:
    """Called by the trainer after each backward (before the clip): records the window's updates."""

    def __init__(self, trainer, result: TraceResult, compare_every: int, spike_factor: float,
                 paths: Sequence[str], bar=None):
        self.trainer, self.result = trainer, result
        self.model, self.task = trainer.model, trainer.task
        self.views = views(self.model)
        self.compare_every, self.spike_factor = compare_every, spike_factor
        self.paths = list(paths)
        self.references: Dict[str, torch.nn.Module] = {}
        self.previous: Optional[List[torch.Tensor]] = None  # the parameters before the last update
        self.maxima: List[float] = []  # the window's largest gradient norm per update, so far
        self.bar = bar

    def __call__(self, step: int, batch, loss: torch.Tensor) -> None:
        if self.bar is not None:
            self.bar.update(1)
        r = self.result
        if step < r.start - 1:
            return
        params = [p.detach().clone() for p in self.model.parameters()]
        if self.previous is not None:  # the update of step - 1 is now applied: record its size
            by_param = {id(p): (now - before) for p, now, before in zip(self.model.parameters(), params, self.previous)}
            for row, view in zip(r.rows[-len(self.views):], self.views):  # the last update's rows, in view order
                row["update_norm"] = float(view.of(by_param[id(view.param)]).norm())
        self.previous = params
        if step < r.start:
            return
        norms = {}
        for v in self.views:
            g = v.param.grad
            norms[v.name] = 0.0 if g is None else float(v.of(g).norm())
            r.rows.append({"step": step, "view": v.name, "kind": v.kind, "grad_norm": norms[v.name],
                           "update_norm": math.nan, "param_norm": float(v.of(v.param.detach()).norm())})
        tensors = [norms[v.name] for v in self.views if v.kind == "tensor"]
        largest = max(tensors)
        spike = (len(self.maxima) >= MIN_ONSET_HISTORY
                 and largest > self.spike_factor * statistics.median(self.maxima))
        if spike and r.onset is None:
            r.onset = step
        r.steps.append({"step": step, "loss": float(loss.detach()), "max_grad_norm": largest,
                        "global_grad_norm": math.sqrt(sum(n * n for n in tensors)), "spike": spike})
        self.maxima.append(largest)
        if self.paths and (spike or (step - r.start) % self.compare_every == 0):
            self._compare(step, batch)
        if step >= r.stop:
            raise _TraceDone()

    def _reference(self, path: str) -> torch.nn.Module:
        """A copy of the model on the reference ``path`` (built once, its weights set at each compare)."""
        if path not in self.references:
            from uwbench.training.loop import build_components

            native, dtype = REFERENCE_PATHS[path]
            with torch.random.fork_rng(devices=[]):
                _, ref = build_components(self.trainer.resolved, self.trainer.device)
            ref = ref.to(dtype)
            if native:
                ref.use_native(True)
            ref.train()
            self.references[path] = ref
        return self.references[path]

    def _compare(self, step: int, batch) -> None:
        """The gradient of this update's loss on the reference paths, at the weights and batch the run had."""
        state = self.model.state_dict()
        grads: Dict[str, Dict[str, torch.Tensor]] = {
            "run": {v.name: v.of(v.param.grad).detach().double() for v in self.views if v.param.grad is not None}}
        with torch.random.fork_rng(devices=[]):
            for path in self.paths:
                ref = self._reference(path)
                ref.load_state_dict(state)
                ref.zero_grad(set_to_none=True)
                b = _cast(batch, REFERENCE_PATHS[path][1])
                self.task.loss(ref(b.inputs, b.decoder_inputs, b.lengths), b).backward()
                params = dict(ref.named_parameters())
                grads[path] = {}
                for v in self.views:
                    g = params[v.param_name].grad
                    if g is not None:
                        grads[path][v.name] = v.of(g).detach().double()
        reference = grads.get(REFERENCE)
        for path, by_view in grads.items():
            for name, g in by_view.items():
                ref_g = None if reference is None else reference.get(name)
                dist = math.nan
                if ref_g is not None:
                    dist = float((g - ref_g).norm() / max(float(ref_g.norm()), 1e-30))
                self.result.compare.append({"step": step, "view": name, "path": path,
                                            "grad_norm": float(g.norm()), "rel_to_reference": dist})


def reference_paths(run_path: str, requested: Optional[Sequence[str]] = None) -> List[str]:
    """The paths a compared update is recomputed on: by default the float64 torch reference, the float32
    torch path, and for a native run the native path in float64."""
    if requested is not None:
        unknown = [p for p in requested if p not in REFERENCE_PATHS]
        if unknown:
            raise UserError(f"unknown reference path(s) {unknown}; choose from {sorted(REFERENCE_PATHS)}")
        return list(requested)
    return ["torch32", "torch64"] + (["native64"] if run_path == "native" else [])


BRANCH_SETTINGS = ("lr", "clip", "clip_mode")  # train.* settings a branch may change (the model stays the run's)


def trace(config: Mapping, start: int, stop: int, *, compare_every: int = 25, spike_factor: float = 10.0,
          paths: Optional[Sequence[str]] = None, recorded_curve: Optional[Mapping[int, float]] = None,
          threads: Optional[int] = None, progress: bool = True, save_state: Optional[str] = None,
          state: Optional[Dict] = None, changes: Optional[Mapping[str, object]] = None) -> TraceResult:
    """Replay the run ``config`` (a nested run config, as recorded in a run's ``config.json``) from its
    first update to ``stop`` and trace the updates ``start``..``stop`` (see the module docstring).
    ``recorded_curve``: the run's recorded evaluations (step -> value), to check the replay against.
    ``threads``: torch's intra-op threads (the run's own, for an exact replay).

    Branching: ``save_state`` writes the trainer's state (weights, optimiser, random generators, curve) at
    the last evaluation before ``start`` to that file; ``state`` (such a file, loaded) starts the replay
    there instead of at the first update, and ``changes`` (``BRANCH_SETTINGS``, e.g. ``{"lr": 3e-4}``)
    continue it with other training settings: the same weights and the same batches, one setting changed,
    so whether a fall still comes answers what the setting does to it."""
    import copy

    from uwbench.training.config import resolve_run
    from uwbench.training.loop import _snapshot, _Trainer, check_run

    changes = dict(changes or {})
    unknown = sorted(set(changes) - set(BRANCH_SETTINGS))
    if unknown:
        raise UserError(f"a branch can change only train.{', train.'.join(BRANCH_SETTINGS)}; got train."
                         + ", train.".join(unknown))
    if changes and state is None:
        raise UserError("changed settings need a state to branch from (save one with save_state first)")
    config = copy.deepcopy(dict(config))
    config["train"] = {**dict(config.get("train") or {}), **changes}
    resolved = resolve_run(config)
    steps = resolved.train.steps
    if not 1 <= start <= stop <= steps:
        raise UserError(f"the window must satisfy 1 <= from <= to <= {steps} (the run's updates); "
                         f"got from {start}, to {stop}")
    if compare_every < 1:
        raise UserError(f"compare_every must be >= 1, got {compare_every}")
    if not spike_factor > 1:
        raise UserError(f"spike_factor must be > 1, got {spike_factor}")
    every = resolved.train.eval_every
    saved_at = (start - 1) // every * every  # the last evaluation before the window
    if save_state is not None and saved_at < 1:
        raise UserError(f"no evaluation before update {start} (one every {every}) to save the state at")
    if state is not None and not state["step"] < start:
        raise UserError(f"the state is at update {state['step']}: the window must start after it, got {start}")
    device = check_run(resolved)
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    bar = None
    try:
        trainer = _Trainer(resolved, device, None, None, None, state)
        if state is not None:
            for group in trainer.optimizer.param_groups:  # the saved optimiser's lr is the run's
                group["lr"] = resolved.train.lr
        result = TraceResult(path=trainer.result.path, start=start, stop=stop, clip=resolved.train.clip,
                             clip_mode=resolved.train.clip_mode, branch_from=None if state is None else state["step"],
                             changes=changes)
        chosen = reference_paths(result.path, paths)
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=stop, initial=trainer.start, desc=f"trace {resolved.model_name}/{resolved.task_name}",
                       unit="upd", dynamic_ncols=True)
        trainer.observer = _Observer(trainer, result, compare_every, spike_factor, chosen, bar)
        if save_state is not None:
            evaluation = trainer._evaluation

            def evaluate_and_save(step, *args):
                done = evaluation(step, *args)
                if step == saved_at:
                    from uwbench.atomic import replacing

                    with replacing(save_state) as tmp:
                        torch.save(_snapshot(step, done, trainer.model, trainer.optimizer, trainer.generators,
                                             trainer.result, trainer.counters, trainer.best_state), tmp)
                return done

            trainer._evaluation = evaluate_and_save
        try:
            trainer.train(False, None)
        except _TraceDone:
            pass
        h = trainer.result.history
        key = trainer.keys.eval
        for s, value in zip(h["step"], h[key]):
            result.curve.append({"step": s, "replay": value,
                                 "recorded": None if recorded_curve is None else recorded_curve.get(s)})
        return result
    finally:
        if bar is not None:
            bar.close()
        torch.set_num_threads(previous_threads)


# ---- what a trace says ----


def leading_views(result: TraceResult, step: int, kind: str = "tensor", top: int = 5,
                  measure: str = "grad_norm") -> List[Tuple[str, float, float]]:
    """At ``step``: the views of ``kind`` whose ``measure`` (``grad_norm`` or ``update_norm``) grew most
    against their own median over the window's updates before it, as (view, value, times its median),
    largest growth first."""
    before: Dict[str, List[float]] = {}
    now: Dict[str, float] = {}
    for row in result.rows:
        if row["kind"] != kind or not math.isfinite(row[measure]):
            continue
        if row["step"] < step:
            before.setdefault(row["view"], []).append(row[measure])
        elif row["step"] == step:
            now[row["view"]] = row[measure]
    out = []
    for name, g in now.items():
        med = statistics.median(before.get(name) or [math.nan])
        out.append((name, g, g / med if med and med > 0 else math.inf))
    out.sort(key=lambda t: -t[2] if math.isfinite(t[2]) else -math.inf)
    return out[:top]


def loss_rise(result: TraceResult, factor: float = LOSS_RISE_FACTOR) -> Optional[int]:
    """The first update of the window whose training loss exceeds ``factor`` times the median loss of the
    window's updates before it (at least ``MIN_ONSET_HISTORY`` of them); None if none does. A fall can
    start here, before any gradient spike."""
    losses: List[float] = []
    for s in result.steps:
        if len(losses) >= MIN_ONSET_HISTORY and s["loss"] > factor * statistics.median(losses):
            return s["step"]
        losses.append(s["loss"])
    return None


def path_agreement(result: TraceResult, steps: Optional[Sequence[int]] = None) -> Dict[str, float]:
    """Per path the largest relative distance of a whole-tensor gradient to the reference, over the
    compared updates (or only ``steps``)."""
    tensors = {r["view"] for r in result.rows if r["kind"] == "tensor"}
    out: Dict[str, float] = {}
    for c in result.compare:
        if c["view"] not in tensors or c["path"] == REFERENCE or (steps is not None and c["step"] not in steps):
            continue
        if math.isfinite(c["rel_to_reference"]):
            out[c["path"]] = max(out.get(c["path"], 0.0), c["rel_to_reference"])
    return out


def summary(result: TraceResult, source: str = "") -> str:
    """The trace in a few lines of markdown: whether the replay is the run, the onset, what led it, and
    whether the paths agree there."""
    lines = [f"# Trace of {source or 'a run'}: updates {result.start}-{result.stop}", ""]
    departs = result.replay_departs()
    checked = result.checked()
    if not checked:
        lines.append("- replay: no recorded curve to check it against")
    elif departs is None:
        lines.append(f"- replay: the run's own updates (its {len(checked)} evaluations match the recorded curve)")
    else:
        lines.append(f"- replay: departs from the recorded curve at the evaluation of update {departs} "
                     "(another thread count, machine or library build); what follows is the replay's")
    if result.branch_from is not None:
        changed = ", ".join(f"train.{k}={v}" for k, v in sorted(result.changes.items()))
        lines.append(f"- branch: from the saved state at update {result.branch_from}, "
                     + (f"continued with {changed} on the same batches" if changed else "no setting changed"))
    lines.append(f"- path: {result.path}; clip {result.clip:g} {result.clip_mode.replace('_', ' ')}")
    after = [c for c in result.curve if c["step"] >= result.start]
    if after:
        lines.append("- evaluations in the window: " + ", ".join(f"{c['replay']:.3f} at {c['step']}" for c in after))
    if result.onset is None:
        lines.append("- onset: none (no update's largest gradient norm rose above the spike factor times the "
                     "window's median)")
    else:
        step = next(s for s in result.steps if s["step"] == result.onset)
        lines.append(f"- onset: update {result.onset} (largest gradient norm {step['max_grad_norm']:.3g}, loss "
                     f"{step['loss']:.3f})")
        for kind, label in (("tensor", "tensors"), ("field", "interface fields")):
            lead = leading_views(result, result.onset, kind)
            if lead:
                lines.append(f"- leading {label} at the onset: " + ", ".join(
                    f"{n} {g:.3g} ({x:.0f}x its median)" for n, g, x in lead))
        agree = path_agreement(result, [result.onset])
        if agree:
            lines.append("- paths at the onset (largest relative distance of a tensor's gradient to float64 "
                         "torch): " + ", ".join(f"{p} {d:.2e}" for p, d in sorted(agree.items())))
    rise = loss_rise(result)
    if rise is None:
        lines.append(f"- loss rise: none (no update's loss above {LOSS_RISE_FACTOR:g} times the window's median)")
    else:
        step = next(s for s in result.steps if s["step"] == rise)
        lines.append(f"- loss rise: update {rise} (loss {step['loss']:.3f}, above {LOSS_RISE_FACTOR:g} times the "
                     "window's median so far)"
                     + ("" if result.onset is None else
                        f", {abs(result.onset - rise)} updates {'before' if rise < result.onset else 'after'} "
                        "the gradient onset"))
        for measure, label in (("grad_norm", "gradients"), ("update_norm", "updates")):
            lead = leading_views(result, rise, "tensor", 3, measure)
            if lead:
                lines.append(f"  - {label} at the loss rise: " + ", ".join(
                    f"{n} {g:.3g} ({x:.1f}x its median)" for n, g, x in lead))
    agree = path_agreement(result)
    if agree:
        lines.append("- paths over all compared updates: " + ", ".join(f"{p} {d:.2e}" for p, d in sorted(agree.items())))
    spikes = [s["step"] for s in result.steps if s["spike"]]
    lines.append(f"- spikes (largest gradient norm above the factor): {len(spikes)}"
                 + (f", first {spikes[:8]}" if spikes else ""))
    return "\n".join(lines) + "\n"
