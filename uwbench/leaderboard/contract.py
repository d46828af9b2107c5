"""The writer and memory-model contract as a check anyone can run on a plugin before spending a run on it.

``writer_problems(name, model)`` and ``model_problems(name)`` return what a component breaks, one plain
sentence per problem with its fix (an empty list: it keeps the contract); ``check_writer`` and
``check_model`` raise ``ContractError`` with all of them. `uwbench leaderboard` calls them before any
run, and the contract tests (tests/test_contracts.py) use the same checks on every registered component.
The check trains a smoke model (two updates), so it needs the trainer: it sits with the leaderboard, above
``training``, not with the writers (which the models, below training, import).

The contract (``uwbench/writing/base.py``, ``uwbench/models/memory_base.py``):

1. the name is registered, and the writer's own settings build its config;
2. a model of the shared memory frame builds with it at tiny sizes, from its name;
3. ``schedule(n)`` returns one bool per encoder step for every probed length n, the same list when asked
   twice (the schedule is shared by the batch and baked into CUDA graphs), and writes at least once;
4. a ``cached`` writer's attention maps ``h (B, H), cache (B, n, H), r (B, read_size)`` to
   ``(a (B, H), alpha (B, n))``, finite;
5. the model's forward returns ``(B, decoder steps, output size)``, and one backward gives every
   trainable parameter a finite gradient;
6. ``train`` runs two updates to the end (no MLflow run is made).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import torch

from uwbench.config import own_keys, section_keys
from uwbench.errors import UserError
from uwbench.registry import MODELS, WRITERS

PROBE_TASK = "copy"  # the task a component is probed on
PROBE_LENGTHS = (2, 3, 5, 8)  # encoder lengths a schedule is asked for (the last = the probe task's T + 1)
PROBE_BATCH = 3
# tiny sizes, applied where the model has the key
TINY_MODEL = {"hidden_size": 6, "memory_size": 2, "word_size": 4, "cache_size": 2, "attention_size": 3}
TINY_TRAIN = {"steps": 2, "batch_size": 4, "eval_every": 2, "eval_batches": 1, "checkpoint_every": 0}
PROBE_WRITERS = ("regular", "uniform")  # the writers a memory model is probed with


class ContractError(UserError):
    """A plugin breaks the writer or model contract (a ``UserError``: the CLI prints it as one line)."""


def memory_models() -> List[str]:
    """The registered models that take a writer (the shared memory frame's models)."""
    return [m for m in MODELS.names() if MODELS.entry(m).config and "writer" in own_keys(MODELS.entry(m).config)]


def check_writer(name: str, model: str = "dnc", settings: Optional[Mapping[str, Any]] = None,
                 train: bool = True) -> None:
    problems = writer_problems(name, model, settings, train)
    if problems:
        raise ContractError(f"writer {name!r} breaks the writer contract (uwbench/writing/base.py): "
                            + "; ".join(problems))


def check_model(name: str, train: bool = True) -> None:
    problems = model_problems(name, train)
    if problems:
        raise ContractError(f"model {name!r} breaks the memory-model contract (uwbench/models/memory_base.py): "
                            + "; ".join(problems))


def writer_problems(name: str, model: str = "dnc", settings: Optional[Mapping[str, Any]] = None,
                    train: bool = True) -> List[str]:
    """What writer ``name`` breaks when it drives ``model`` (module docstring); [] when nothing."""
    if name not in WRITERS:
        return [f"no writer {name!r} is registered (registered: {', '.join(WRITERS.names())}); register it with "
                "`@WRITERS.register(name, ...)` in the plugin module"]
    if model not in memory_models():
        return [f"model {model!r} takes no writer (models that do: {', '.join(memory_models())})"]
    config = probe_config(model, {"writer": name, **dict(settings or {})})
    built = _build(config)
    if isinstance(built, str):
        return [built]
    task, net = built
    problems = schedule_problems(net.writer)
    if getattr(net.writer, "cached", False):
        problems += attention_problems(net)
    if problems:
        return problems  # a broken schedule or attention would fail the forward pass with a less clear message
    problems += forward_problems(net, task)
    if not problems and train:
        problems += train_problems(config)
    return problems


def model_problems(name: str, train: bool = True) -> List[str]:
    """What memory model ``name`` breaks, probed with regular and uniform writing; [] when nothing."""
    if name not in MODELS:
        return [f"no model {name!r} is registered (registered: {', '.join(MODELS.names())}); register it with "
                "`@MODELS.register(name, config=...)` in the plugin module"]
    if name not in memory_models():
        return [f"model {name!r} has no `writer` setting: the leaderboard compares writing strategies, so a model "
                "must take a writer (build it on the shared memory frame, uwbench/models/mann.py)"]
    problems: List[str] = []
    for writer in PROBE_WRITERS:
        config = probe_config(name, {"writer": writer})
        built = _build(config)
        if isinstance(built, str):
            return [built]
        task, net = built
        found = forward_problems(net, task)
        if not found and train:
            found = train_problems(config)
        problems += [f"with writer {writer!r}: {p}" for p in found]
    return problems


def probe_config(model: str, values: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """A run config of ``model`` on the probe task at tiny sizes (a tiny size only where the model and
    its writer have the key), ``values`` over them."""
    cfg = MODELS.entry(model).config
    keys = section_keys(cfg, dict(values)) if cfg else set()
    tiny = {k: v for k, v in TINY_MODEL.items() if k in keys}
    return {"task": {"name": PROBE_TASK, "seq_len": PROBE_LENGTHS[-1] - 1, "test_size": 4},
            "model": {"name": model, **tiny, **dict(values)}, "train": dict(TINY_TRAIN)}


def _build(config: Mapping[str, Mapping[str, Any]]):
    """(task, model) built from ``config``, or the reason it cannot be."""
    from uwbench.models.base import build_model
    from uwbench.tasks import build_task
    from uwbench.training.config import resolve_run

    try:
        resolved = resolve_run(config)
    except Exception as exc:  # noqa: BLE001 - any error here is the plugin's, reported with its text
        return f"its settings do not build a run config ({exc})"
    try:
        torch.manual_seed(0)
        task = build_task(resolved.task_name, resolved.task_cfg)
        net = build_model(resolved.model_name, task.input_size, task.output_size, resolved.model_cfg, task=task)
    except Exception as exc:  # noqa: BLE001
        return f"model {resolved.model_name!r} does not build with it ({type(exc).__name__}: {exc})"
    return task, net


def schedule_problems(writer, lengths: Sequence[int] = PROBE_LENGTHS) -> List[str]:
    """Rule 3 of the module docstring on a built writer: the first length that breaks it, with the reason."""
    out: List[str] = []
    for n in lengths:
        if out:
            break
        try:
            first, second = writer.schedule(n), writer.schedule(n)
        except Exception as exc:  # noqa: BLE001
            out.append(f"schedule({n}) raised {type(exc).__name__}: {exc}")
            continue
        try:
            size = len(first)
        except TypeError:
            out.append(f"schedule({n}) returned {type(first).__name__}, not a list of bools")
            continue
        if size != n:
            out.append(f"schedule({n}) has {size} entries: it must have one per encoder step ({n})")
            continue
        odd = [v for v in first if not _is_bool(v)]
        if odd:
            out.append(f"schedule({n}) holds {odd[0]!r}: every entry must be True or False")
            continue
        if [bool(v) for v in first] != [bool(v) for v in second]:
            out.append(f"schedule({n}) changed between two calls: the schedule must depend on n alone (draw any "
                       "random choice once, in __init__, as the random writer does)")
    longest = max(lengths)
    if not out and not any(bool(v) for v in writer.schedule(longest)):
        out.append(f"schedule({longest}) never writes: the memory would stay empty")
    return out


def _is_bool(v) -> bool:
    if isinstance(v, bool):
        return True
    try:
        import numpy as np

        if isinstance(v, np.bool_):
            return True
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    return isinstance(v, torch.Tensor) and v.dtype == torch.bool and v.numel() == 1


def attention_problems(net) -> List[str]:
    """Rule 4 of the module docstring on a model built with a cached writer."""
    module = getattr(net, "cache_attention", None)
    if not isinstance(module, torch.nn.Module):
        return ["a cached writer's build_attention(hidden_size, read_size) must return a torch.nn.Module, got "
                f"{type(module).__name__}"]
    h, r = net.cfg.hidden_size, net.read_size
    out = []
    for n in (1, 3):
        g = torch.Generator().manual_seed(n)
        args = (torch.randn(PROBE_BATCH, h, generator=g), torch.randn(PROBE_BATCH, n, h, generator=g),
                torch.randn(PROBE_BATCH, r, generator=g))
        try:
            result = module(*args)
        except Exception as exc:  # noqa: BLE001
            out.append(f"the attention raised {type(exc).__name__} on h (B, H), cache (B, {n}, H), r (B, read_size) "
                       f"= {[tuple(a.shape) for a in args]}: {exc}")
            continue
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            out.append("the attention must return the pair (a (B, H), alpha (B, n)), got "
                       f"{type(result).__name__}")
            continue
        want = [(PROBE_BATCH, h), (PROBE_BATCH, n)]
        got = [tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in result]
        if got != want:
            out.append(f"the attention's outputs have shapes {got} for a cache of {n}: they must be {want} "
                       "(a (B, H), alpha (B, n))")
        elif not all(torch.isfinite(t).all() for t in result):
            out.append(f"the attention's outputs are not finite for a cache of {n}")
    return out


def forward_problems(net, task) -> List[str]:
    """Rule 5 of the module docstring: the output's shape and a finite gradient for every parameter."""
    batch = task.sample(PROBE_BATCH, torch.Generator().manual_seed(0))
    try:
        out = net(batch.inputs, batch.decoder_inputs, batch.lengths)
    except Exception as exc:  # noqa: BLE001
        return [f"the forward pass raised {type(exc).__name__}: {exc}"]
    want = (PROBE_BATCH, batch.decoder_inputs.shape[1], task.output_size)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != want:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return [f"the forward pass returned {got}: it must be (B, decoder steps, output size) = {want}"]
    task.loss(out, batch).backward()
    return gradient_problems(net)


def gradient_problems(net) -> List[str]:
    """After a backward: the trainable parameters with no gradient, or a non-finite one."""
    params = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    missing = [n for n, p in params if p.grad is None]
    bad = [n for n, p in params if p.grad is not None and not torch.isfinite(p.grad).all()]
    out = []
    if missing:
        out.append(f"parameters without a gradient: {', '.join(missing)} (a parameter the forward never uses)")
    if bad:
        out.append(f"non-finite gradients: {', '.join(bad)}")
    return out


def train_problems(config: Mapping[str, Mapping[str, Any]]) -> List[str]:
    """Rule 6 of the module docstring: two updates with the trainer, on whatever path it picks."""
    from uwbench.training.loop import train

    try:
        result = train(dict(config), progress=False)
    except Exception as exc:  # noqa: BLE001
        return [f"training two updates raised {type(exc).__name__}: {exc}"]
    if result.status != "finished" or result.steps_done != TINY_TRAIN["steps"]:
        return [f"training two updates ended {result.status} after {result.steps_done} ({result.error})"]
    return []
