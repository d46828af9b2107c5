"""A population: K runs of one shape trained in lockstep as one model, each member exactly its solo run.

The runs of a sweep's cell share every shape (model, controller, task, T, D, L, H, W, batch, writer,
updates) and differ in seed, learning rate and clip (``MEMBER_KEYS``). Trained together, every update runs
group by group (``uwbench/models/stacked.py``: on the torch path the members with one write schedule,
batched; on the C++ path one member, its own native node): the group's forward, one backward of its
members' summed losses (they share no parameter, so each member's gradient is its own loss's), then each
member's own clip and optimiser step. One group's graph is alive at a time, as a solo run's is.

What makes a member its solo run (``tests/training/test_population.py`` checks it in float64 on both paths):

- its model is built after ``torch.manual_seed(seed)``, as the solo run's is, and it draws its training
  and evaluation batches from its own generators, seeded as the solo run's;
- its learning rate, clip and clip mode, its Adam state, its evaluations, best weights, test and
  checkpoints are its own: each member is a ``loop._Trainer``, and everything but the update itself
  runs through the trainer's own methods;
- a member whose loss is not finite fails (recorded as a solo run that diverged) and the others go on;
  a member pruned by its ``report`` callback (``Pruned``) stops, is recorded KILLED, and the others go on.

**Time.** A member's ``seconds_per_100`` (and its CPU figures) is its share of the population's time:
each update's time divided by the members it trained, summed over the member's updates. So a member of
a population of K costs what K of them cost together, over K; the population's own seconds per 100
population updates and its size are tags of every member's run (``population_seconds_per_100``,
``population_size``). A run trained alone has no ``population`` tag; a report whose runs mix the two
says so in its time table (``report/analysis/timing.py``, ``training_note``).

**Slots.** A population has K slots. Given a ``refill`` (a sweep's next trial of the cell), a slot a
member leaves is taken by another run of the same shape after the update in which it was left; the new
member starts from its own update 0 and counts its own updates, so members stand at different updates
and each evaluates at its own ``eval_every``. Nothing a member computes depends on the others, so a
refilled member is still its solo run.

**Resume.** Each member checkpoints as a solo run does, and continues from its own checkpoint: after a
kill, members that stand at different updates (the kill fell between two members' checkpoint writes, or
they joined at different times) each go on from their own, so no update is lost or repeated. ``uwbench
train`` finds an interrupted population by its ``population_key`` tag (the command's member settings),
so the same command resumes it.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import torch

from uwbench import env
from uwbench.errors import UserError
from uwbench.models.stacked import PopulationForward
from uwbench.training import record
from uwbench.training.checkpoint import Checkpoint
from uwbench.training.config import ResolvedRun, resolve_run
from uwbench.training.loop import (Diverged, Pruned, RunResult, _Trainer, check_loss, check_run, clip_gradients,
                                   end_interrupted, resolve_threads, tf_variables)

MEMBER_KEYS = ("seed", "lr", "clip", "clip_mode")  # the train settings a member may have of its own
MEMBER_PATHS = frozenset(f"train.{k}" for k in MEMBER_KEYS)  # the same, as config paths (search spaces, params)
STACKED = "stacked"  # the path tag of a member trained through the batched torch forward


class PopulationError(UserError):
    """The runs asked for cannot train as one population (they differ in a shape setting)."""


def shape(resolved: ResolvedRun) -> Dict:
    """The run config without the settings a member may have of its own: members share this whole dict."""
    d = resolved.as_dict()
    d["train"] = {k: v for k, v in d["train"].items() if k not in MEMBER_KEYS}
    return d


def _first_difference(a, b, prefix: str = "") -> str:
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            found = _first_difference(x, y, f"{prefix}{key}.")
            if found:
                return found
        elif x != y:
            return f"{prefix}{key} ({x!r} against {y!r})"
    return ""


def check_shapes(resolved: Sequence[ResolvedRun]) -> None:
    """All members share one shape: a ``PopulationError`` naming the first setting that differs."""
    first = shape(resolved[0])
    for i, r in enumerate(resolved[1:], start=1):
        diff = _first_difference(first, shape(r))
        if diff:
            raise PopulationError(
                f"members of a population must differ only in train.{{{', '.join(MEMBER_KEYS)}}}; member {i} "
                f"differs from member 0 in {diff}: train them in separate populations (--population off)")


def population_key(configs: Sequence[Mapping], experiment: str) -> str:
    """The identity of a population's settings (the members' resolved configs in order, and the
    experiment): the tag by which the same command finds the population again."""
    text = json.dumps([resolve_run(c).as_dict() for c in configs] + [experiment], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class _Window:
    """A member's share of the population's time in the current evaluation window: what the member's
    ``_Trainer._evaluation`` closes, as it would close its own ``timing.UpdateTimer``'s window."""

    seconds: float = 0.0
    cpu: float = 0.0
    model_cpu: float = 0.0
    timed: int = 0
    warmup_seconds: float = 0.0

    def close_window(self, result, counters) -> float:
        sec100 = self.seconds / self.timed * 100.0 if self.timed else self.warmup_seconds * 100.0
        result.train_seconds += self.seconds
        counters.timed_steps += self.timed
        counters.timed_cpu += self.cpu
        counters.timed_model_cpu += self.model_cpu
        self.seconds = self.cpu = self.model_cpu = 0.0
        self.timed = 0
        return sec100


@dataclass
class _Member:
    index: int
    trainer: _Trainer
    variables: Optional[list]
    loss_sum: torch.Tensor  # the window's summed training loss (as the solo loop sums it)
    grad_max: torch.Tensor  # the window's largest gradient before clipping
    window: _Window = field(default_factory=_Window)
    steps_in_window: int = 0
    step: int = 0  # the member's last update done (its own count: members that joined later stand behind)
    warm: bool = False  # its first update in this process is done (that one is timed apart, as a solo run's)
    state: str = "training"  # training | finished | failed | pruned


@dataclass
class Joiner:
    """A run that takes a freed slot of a population (``Population(refill=...)``): its nested config (of the
    population's shape), its open MLflow run (or None) and its pruning callback (or None)."""

    config: Mapping
    run: Optional[object] = None
    report: Optional[Callable[[int, float], None]] = None


class Population:
    """K members trained in lockstep (see the module docstring). Build it, then ``train()``: a list of the
    members' ``RunResult`` in the order they joined. ``runs[i]`` is member i's open MLflow run (or None),
    ``reports[i]`` its pruning callback (or None).

    **Slots.** The population has as many slots as it has first members. With ``refill`` (a callable
    returning a ``Joiner``, or None when there is none to give now), a slot a member leaves (finished,
    pruned, failed) is taken, after the update in which it was left, by the run ``refill`` gives, which
    trains from its own update 0 (or from its checkpoint) exactly as it would alone; ``refill`` is asked
    again after every evaluation while a slot is free. ``on_end(index, result)`` is called as each member
    ends, before its slot is refilled (a sweep tells its outcome there, so the next trial's sampler sees it)."""

    def __init__(self, configs: Sequence[Mapping], runs: Optional[Sequence] = None,
                 reports: Optional[Sequence[Optional[Callable[[int, float], None]]]] = None,
                 checkpoint_dir: Optional[str] = None, system_metrics: Optional[bool] = None,
                 tags: Optional[Mapping[str, str]] = None, refill: Optional[Callable[[], Optional[Joiner]]] = None,
                 on_end: Optional[Callable[[int, RunResult], None]] = None):
        if not configs:
            raise PopulationError("a population needs at least one member")
        self.resolved = [resolve_run(c) for c in configs]
        check_shapes(self.resolved)
        k = len(configs)
        self.runs = list(runs) if runs is not None else [None] * k
        self.reports = list(reports) if reports is not None else [None] * k
        if len(self.runs) != k or len(self.reports) != k:
            raise PopulationError(f"one run and one report per member: `len(runs) == len(reports) == {k}` must hold, "
                                  f"got {len(self.runs)} and {len(self.reports)}")
        self.checkpoint_dir, self.system_metrics = checkpoint_dir, system_metrics
        self.tags = dict(tags or {})
        self.slots = k
        self.refill, self.on_end = refill, on_end
        self.device = check_run(self.resolved[0])
        for r in self.resolved[1:]:
            check_run(r)
        self.members: List[_Member] = []
        self.results: List[Optional[RunResult]] = [None] * k
        self.population_seconds = 0.0
        self.population_updates = 0
        self.bar = None
        self.forward: Optional[PopulationForward] = None

    # set-up --------------------------------------------------------------------------------------------

    def _member(self, i: int) -> _Member:
        """Member i built (its model from its own seed, or restored from its run's checkpoint), its run
        opened and its path added to the population's forward."""
        resolved, run = self.resolved[i], self.runs[i]
        tc = resolved.train
        ckpt = saved = None
        if run is not None:
            ckpt = Checkpoint(run.run_id, resolved.as_dict(), tc.checkpoint_every, self.checkpoint_dir)
            saved = ckpt.load()
            if env.system_metrics() if self.system_metrics is None else self.system_metrics:
                run.start_system_metrics()
        trainer = _Trainer(resolved, self.device, run, self.reports[i], ckpt, saved)
        if trainer.result.path != "native":
            trainer.model._compiled_step = None  # the stacked forward maps the eager step (stacked.py)
            trainer.result.path = STACKED + ("+cuda_graph" if trainer.forward is not trainer.model else "")
        variables = tf_variables(trainer.model) if tc.clip_mode == "per_variable" else None
        trainer.model.train()
        m = _Member(i, trainer, variables, torch.zeros((), device=self.device), torch.zeros((), device=self.device),
                    step=trainer.start)
        if self.forward is None:
            self.forward = PopulationForward([], [], cuda_graph=trainer.result.path.endswith("cuda_graph"))
        self.forward.add(trainer.model, trainer.result.path == "native")
        return m

    def _build(self) -> None:
        """The first members built (their runs not yet opened)."""
        for i in range(self.slots):
            self.members.append(self._member(i))

    def _open(self, m: _Member) -> None:
        t = m.trainer
        if t.run is not None:
            record.open_run(t.run, t.resolved, t.result, t.saved, t.counters.resumes, self.device)
            t.run.set_tags({"population_size": self.slots, **self.tags})

    def _join(self, joiner: Joiner) -> Optional[_Member]:
        """A refilled slot's run made a member (its config checked against the population's shape); None when
        it could not start (it is then recorded failed and told, and the others go on)."""
        resolved = resolve_run(joiner.config)
        check_shapes([self.resolved[0], resolved])
        check_run(resolved)
        i = len(self.resolved)
        self.resolved.append(resolved)
        self.runs.append(joiner.run)
        self.reports.append(joiner.report)
        self.results.append(None)
        try:
            m = self._member(i)
            self.members.append(m)
            self._open(m)
        except Exception as exc:  # this run cannot start (say, its checkpoint cannot be read): it alone fails
            from uwbench import errors

            if errors.fault(exc) is not None:  # a fault of the machine stops the population: raised
                raise
            if joiner.run is not None:
                record.fail(joiner.run, exc)
            if self.members and self.members[-1].index == i:
                self.members[-1].state = "failed"
            if len(self.forward.models) == i:  # its place in the forward, kept so later members' indices match
                self.forward.add(None, False)
            self.results[i] = RunResult(status="failed", metric=self.members[0].trainer.task.metric,
                                        error=f"{type(exc).__name__}: {exc}")
            if self.on_end is not None:
                self.on_end(i, self.results[i])
            return None
        except BaseException as exc:
            if joiner.run is not None:
                record.fail(joiner.run, exc)
            raise
        if self.bar is not None:
            self.bar.total += self.resolved[0].train.steps - m.step
            self.bar.refresh()
        if m.trainer.done:  # its last evaluation was checkpointed before the test: conclude it now
            self._conclude(m)
        return m

    # the loop ------------------------------------------------------------------------------------------

    def train(self, progress: bool = True, progress_desc: Optional[str] = None) -> List[RunResult]:
        threads = resolve_threads(self.resolved[0].train.threads, self.device)
        previous = torch.get_num_threads()
        if threads is not None:
            torch.set_num_threads(threads)
        try:
            try:
                self._build()
                for m in self.members:
                    self._open(m)
            except BaseException as exc:
                for run in self.runs:
                    if run is not None:
                        record.fail(run, exc)
                raise
            try:
                self._train(progress, progress_desc)
            except BaseException as exc:  # interrupted or crashed: every member's checkpoint stays
                for m in self.members:
                    if m.state == "training":
                        self._end(m, exc)
                raise
            finally:
                if self.bar is not None:
                    self.bar.close()
        finally:
            torch.set_num_threads(previous)
        return [r for r in self.results]

    def _training(self) -> List[_Member]:
        return [m for m in self.members if m.state == "training"]

    def _fill(self) -> None:
        """Free slots taken by the runs ``refill`` gives, until it gives none or every slot is taken."""
        while self.refill is not None and len(self._training()) < self.slots:
            joiner = self.refill()
            if joiner is None:
                return
            self._join(joiner)

    def _train(self, progress: bool, progress_desc: Optional[str]) -> None:
        steps = self.resolved[0].train.steps
        for m in self.members:
            if m.trainer.done:  # its last evaluation was checkpointed before the test: conclude it now
                self._conclude(m)
        self._fill()
        if progress:
            from tqdm.auto import tqdm

            r0 = self.resolved[0]
            self.bar = tqdm(total=sum(steps - m.step for m in self._training()), unit="upd", dynamic_ncols=True,
                            leave=True, desc=progress_desc or f"{r0.model_name}/{r0.task_name} x{self.slots}",
                            mininterval=env.progress_interval())
        sync = torch.cuda.synchronize if self.device.type == "cuda" else (lambda: None)
        eval_every = self.resolved[0].train.eval_every
        rounds = 0
        while True:
            active = self._training()
            if not active:
                break
            trained = self._update(active, first_round=rounds == 0, sync=sync)
            rounds += 1
            ended = len(trained) < len(active)  # a member diverged in this update
            evaluated = [m for m in trained if m.step % eval_every == 0 or m.step == steps]
            if evaluated:
                self._evaluations(evaluated)
            ended = ended or any(m.state != "training" for m in trained)
            if self.bar is not None:
                self.bar.update(len(trained))
                self.bar.set_postfix(training=len(self._training()))
            if ended or evaluated:
                self._fill()

    def _update(self, active: List[_Member], first_round: bool, sync) -> List[_Member]:
        """One update of every active member, group by group (``stacked.group_members``): the group's
        batches, its forward, its members' losses, one backward of their sum, then each member's clip and
        step. A group at a time keeps one group's graph alive, as a solo run keeps its own: on the native
        path (a member per group) a member's working set is its solo run's. The members that updated (a
        member whose loss is not finite fails instead)."""
        t0, c0 = time.perf_counter(), time.process_time()
        model_cpu = 0.0
        steps = self.resolved[0].train.steps
        eval_every = self.resolved[0].train.eval_every
        by_index = {m.index: m for m in active}
        first = active[0].trainer
        batches = {active[0].index: first.task.sample(first.tc.batch_size, first.generators["train"]).to(self.device)}
        trained: List[_Member] = []
        for group in self.forward.groups(list(by_index), int(batches[active[0].index].inputs.shape[1])):
            for i in group:
                if i not in batches:
                    t = by_index[i].trainer
                    batches[i] = t.task.sample(t.tc.batch_size, t.generators["train"]).to(self.device)
            m0 = time.process_time()
            outs = self.forward.run(group, batches)
            losses = {}
            for i in group:
                m = by_index[i]
                step = m.step + 1
                loss = m.trainer.task.loss(outs[i], batches[i])
                if self.device.type == "cpu" and not torch.isfinite(loss):
                    self._diverged(m, Diverged(f"loss became {float(loss.detach())} at update {step}"))
                    continue
                if step == 1:
                    m.trainer.counters.first_loss = float(loss.detach())
                losses[i] = loss
                m.trainer.optimizer.zero_grad(set_to_none=True)
            if losses:
                torch.stack(list(losses.values())).sum().backward()
            model_cpu += time.process_time() - m0
            for i, loss in losses.items():
                m = by_index[i]
                t = m.trainer
                m.step += 1
                if t.observer is not None:
                    t.observer(m.step, batches[i], loss)
                size = clip_gradients(t.model.parameters(), t.tc.clip, t.tc.clip_mode, m.variables)
                if size is not None:
                    torch.maximum(m.grad_max, size.detach().to(m.grad_max.dtype), out=m.grad_max)
                t.optimizer.step()
                m.loss_sum += loss.detach()
                m.steps_in_window += 1
                trained.append(m)
            del outs, losses
            for i in group:
                batches.pop(i, None)
        if first_round or any(not m.warm or m.step % eval_every == 0 or m.step == steps for m in trained):
            sync()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        n = max(len(trained), 1)
        self.population_seconds += wall if not first_round else 0.0
        self.population_updates += 0 if first_round else 1
        for m in trained:
            w = m.window
            if not m.warm:  # the member's first update in this process, timed apart as a solo run's first
                m.warm = True
                w.warmup_seconds = wall / n
                if m.step == 1:
                    m.trainer.result.first_update_seconds = wall / n
                else:
                    m.trainer.counters.resume_warmup_seconds += wall / n
            else:
                w.seconds += wall / n
                w.cpu += cpu / n
                w.model_cpu += model_cpu / n
                w.timed += 1
        return trained

    def _evaluations(self, members: List[_Member]) -> None:
        """The evaluation of each member whose update closed its evaluation window, every one of them
        before any that is done concludes: a member's pruning callback then sees the others of its
        population still running, as trials that train at the same time are, and none is pruned at its last
        evaluation for a member that finished a moment before it."""
        done = []
        for m in members:
            if m.state != "training" or not m.steps_in_window:
                continue
            step = m.step
            mean_loss = float(m.loss_sum) / m.steps_in_window
            grad = float(m.grad_max)
            m.loss_sum.zero_()
            m.grad_max.zero_()
            m.steps_in_window = 0
            try:
                check_loss(mean_loss, step, m.trainer.counters)
            except Diverged as exc:
                self._diverged(m, exc)
                continue
            try:
                if m.trainer._evaluation(step, mean_loss, m.window, grad):
                    done.append(m)
            except Pruned:
                m.trainer.result.status = "pruned"
                m.state = "pruned"
                self._finish_tags(m)
                record.finish(m.trainer.run, m.trainer.result, "KILLED")
                if m.trainer.ckpt is not None:
                    m.trainer.ckpt.discard()
                self._settle(m)
        for m in done:
            self._conclude(m)

    # ends ----------------------------------------------------------------------------------------------

    def _settle(self, m: _Member) -> None:
        """Member m has ended (its run recorded): its result kept, and the caller told."""
        self.results[m.index] = m.trainer.result
        if self.on_end is not None:
            self.on_end(m.index, m.trainer.result)

    def _finish_tags(self, m: _Member) -> None:
        run = m.trainer.run
        if run is not None and self.population_updates:
            run.set_tags({"population_seconds_per_100": self.population_seconds / self.population_updates * 100.0})

    def _conclude(self, m: _Member) -> None:
        self._finish_tags(m)
        m.trainer._conclude()
        m.state = "finished"
        self._settle(m)

    def _diverged(self, m: _Member, exc: Diverged) -> None:
        t = m.trainer
        t.result.error = f"diverged: {exc}. Try a lower lr (now {t.tc.lr}) or a tighter clip (now {t.tc.clip})."
        self._finish_tags(m)
        record.finish(t.run, t.result, "FAILED")
        if t.ckpt is not None:
            t.ckpt.discard()
        m.state = "failed"
        self._settle(m)

    def _end(self, m: _Member, exc: BaseException) -> None:
        t = m.trainer
        end_interrupted(t.run, t.result, exc)
        m.state = "failed"
        self.results[m.index] = t.result


def train_population(configs: Sequence[Mapping], runs: Optional[Sequence] = None,
                     reports: Optional[Sequence] = None, progress: bool = True,
                     progress_desc: Optional[str] = None, checkpoint_dir: Optional[str] = None,
                     system_metrics: Optional[bool] = None, tags: Optional[Mapping[str, str]] = None,
                     refill: Optional[Callable[[], Optional[Joiner]]] = None,
                     on_end: Optional[Callable[[int, RunResult], None]] = None) -> List[RunResult]:
    """Train ``configs`` (nested run configs of one shape) as one population: each member's ``RunResult``
    in order, each as its solo ``loop.train`` would return it (``status`` finished, failed or pruned; a
    pruned member does not raise). ``runs``: an open MLflow run per member (or None); they are ended here."""
    return Population(configs, runs, reports, checkpoint_dir, system_metrics, tags, refill,
                      on_end).train(progress, progress_desc)
