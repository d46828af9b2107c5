"""Training settings and the resolution of a whole run configuration.

``resolve_run({"task": {"name": "copy", "seq_len": 8}, "model": {"name": "dnc"}, "train": {...}})``
fills every default from the components' config dataclasses and validates every key and value, so
the dict MLflow records describes the run completely.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Annotated, Any, Dict, Literal, Mapping, Optional, Union

from pydantic import Field

from uwbench.config import SECTIONS, ConfigError, Why, as_dict, build, check
from uwbench.registry import MODELS, TASKS


DEVICE_FORMS = "cpu, cuda, cuda:N or auto"
DEVICE_PATTERN = re.compile(r"^(cpu|auto|cuda(:\d+)?)$")
FLOAT32_MAX = 3.4028234663852886e38  # the largest step a float32 parameter can take (torch.finfo(torch.float32).max)


AtLeast1 = Annotated[int, Field(ge=1)]


@dataclass
class TrainConfig:
    """The training settings (the ``train`` section). Each rule is in its field's annotation, checked by
    pydantic (``uwbench.config``) when a run config is built and when a ``TrainConfig`` is made directly."""

    steps: AtLeast1 = 10000  # parameter updates (paper: 10k, batch 64)
    batch_size: AtLeast1 = 64
    optimizer: Literal["adam", "rmsprop"] = "adam"
    # a finite step a float32 parameter can take (``inf`` is refused like ``nan``)
    lr: Annotated[float, Field(gt=0, le=FLOAT32_MAX), Why(le="the largest step a float32 parameter can take")] = 1e-3
    # gradient clipping threshold (paper: 10 for copy/reverse/add/max)
    clip: Annotated[float, Field(gt=0, allow_inf_nan=False), Why(finite="for no clipping set train.clip_mode=none")] = 10.0
    # per_tensor | per_variable (the authors' TF variables: a controller's two matrices share one norm) |
    # global | none (docs/reference.md §8.2)
    clip_mode: Literal["per_tensor", "per_variable", "global", "none"] = "per_tensor"
    eval_every: AtLeast1 = 100  # evaluate on fresh batches every N updates (docs/reference.md §8.3)
    eval_batches: AtLeast1 = 5
    early_stop_evals: Optional[AtLeast1] = None  # stop after N evaluations without improvement
    seed: int = 0
    device: Annotated[str, Field(pattern=DEVICE_PATTERN.pattern), Why(pattern=DEVICE_FORMS)] = "cpu"
    threads: Optional[AtLeast1] = None  # torch intra-op threads (None: 1 on CPU, torch's default on CUDA; see loop.py)
    # auto | true | false: run the model's step function under torch.compile; auto does so when the run is
    # long enough for the compilation to pay for itself (uwbench/training/compile_policy.py)
    compile: Union[Literal["auto"], bool] = "auto"
    # auto | true | false: run the memory models' and the lstm baseline's steps through the native C++ kernels
    # (one autograd node per sequence, uwbench/models/native.py); auto does so wherever they apply (CPU,
    # float32/64, every part of the model declaring a kernel) unless train.compile=true asks for the compiled
    # path (compile_policy.py)
    native: Union[Literal["auto"], bool] = "auto"
    # auto | true | false: on CUDA, capture the whole training forward and its backward as CUDA graphs and
    # replay them (uwbench/models/cuda_graph.py); auto does so for the memory models and the lstm baseline
    # unless train.compile=true asks for the compiled path (compile_policy.py)
    cuda_graph: Union[Literal["auto"], bool] = "auto"
    # save a resumable checkpoint every N evaluations; 0 or None: never
    checkpoint_every: Optional[Annotated[int, Field(ge=0)]] = 1

    def __post_init__(self):
        check(self)


@dataclass
class ResolvedRun:
    task_name: str
    task_cfg: Any
    model_name: str
    model_cfg: Any
    train: TrainConfig

    def as_dict(self) -> Dict[str, Dict[str, Any]]:
        return {
            "task": {"name": self.task_name, **as_dict(self.task_cfg)},
            "model": {"name": self.model_name, **as_dict(self.model_cfg)},
            "train": as_dict(self.train),
        }


def with_task_protocol(task_cfg: Any, model_name: str, model: Mapping[str, Any]) -> Dict[str, Any]:
    """The model settings with the task's decoder protocol filled in where the user left it unset.

    A task config may declare ``DECODER_WRITE`` (the synthetic tasks: False, a read-only decoder as in the
    paper's runs; the sinusoid: True, as its appendix says, docs/reference.md §5.4). A memory model takes it
    as ``decoder_write`` unless the run sets ``model.decoder_write`` itself; models without the setting
    (the LSTM baseline) and tasks without a protocol keep their own defaults.
    """
    out = dict(model)
    protocol = getattr(type(task_cfg), "DECODER_WRITE", None)
    config = MODELS.entry(model_name).config if model_name in MODELS else None
    if protocol is None or config is None or "decoder_write" in out:
        return out
    if "decoder_write" in {f.name for f in fields(config)}:
        out["decoder_write"] = bool(protocol)
    return out


def resolve_run(raw: Mapping[str, Mapping[str, Any]]) -> ResolvedRun:
    unknown = set(raw) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"unknown run section(s) {sorted(unknown)}; allowed: {', '.join(SECTIONS)}")
    task = dict(raw.get("task") or {})
    model = dict(raw.get("model") or {})
    if "name" not in task:
        raise ConfigError("the run needs task.name (e.g. --task copy)")
    if "name" not in model:
        raise ConfigError("the run needs model.name (e.g. --model dnc)")
    task_name, model_name = task.pop("name"), model.pop("name")
    task_cfg = TASKS.build_config(task_name, task)
    return ResolvedRun(
        task_name=task_name,
        task_cfg=task_cfg,
        model_name=model_name,
        model_cfg=MODELS.build_config(model_name, with_task_protocol(task_cfg, model_name, model)),
        train=build(TrainConfig, dict(raw.get("train") or {}), "train"),
    )
