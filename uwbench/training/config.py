"""Training settings and the resolution of a whole run configuration.

``resolve_run({"task": {"name": "copy", "seq_len": 8}, "model": {"name": "dnc"}, "train": {...}})``
fills every default from the components' config dataclasses and validates every key and value, so
the dict MLflow records describes the run completely.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from typing import Any, Dict, Literal, Mapping, Optional, Union

from uwbench.config import SECTIONS, ConfigError, as_dict, build
from uwbench.registry import MODELS, TASKS


DEVICE_FORMS = "cpu, cuda, cuda:N or auto"
DEVICE_PATTERN = re.compile(r"^(cpu|auto|cuda(:\d+)?)$")
FLOAT32_MAX = 3.4028234663852886e38  # the largest step a float32 parameter can take (torch.finfo(torch.float32).max)


@dataclass
class TrainConfig:
    steps: int = 10000  # parameter updates (paper: 10k, batch 64)
    batch_size: int = 64
    optimizer: Literal["adam", "rmsprop"] = "adam"
    lr: float = 1e-3
    clip: float = 10.0  # gradient clipping threshold (paper: 10 for copy/reverse/add/max)
    # per_tensor | per_variable (the authors' TF variables: a controller's two matrices share one norm) |
    # global | none (docs/reference.md §8.2)
    clip_mode: Literal["per_tensor", "per_variable", "global", "none"] = "per_tensor"
    eval_every: int = 100  # evaluate on fresh batches every N updates (docs/reference.md §8.3)
    eval_batches: int = 5
    early_stop_evals: Optional[int] = None  # stop after N evaluations without improvement
    seed: int = 0
    device: str = "cpu"  # cpu | cuda | cuda:N | auto
    threads: Optional[int] = None  # torch intra-op threads (None: 1 on CPU, torch's default on CUDA; see loop.py)
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
    checkpoint_every: Optional[int] = 1  # save a resumable checkpoint every N evaluations; 0 or None: never

    def __post_init__(self):
        checks = [
            ("steps >= 1", self.steps >= 1, self.steps),
            ("batch_size >= 1", self.batch_size >= 1, self.batch_size),
            ("lr > 0", self.lr > 0, self.lr),
            ("clip > 0", self.clip > 0, self.clip),
            ("eval_every >= 1", self.eval_every >= 1, self.eval_every),
            ("eval_batches >= 1", self.eval_batches >= 1, self.eval_batches),
        ]
        if self.early_stop_evals is not None:
            checks.append(("early_stop_evals >= 1", self.early_stop_evals >= 1, self.early_stop_evals))
        if self.checkpoint_every is not None:
            checks.append(("checkpoint_every >= 0", self.checkpoint_every >= 0, self.checkpoint_every))
        if self.threads is not None:
            checks.append(("threads >= 1", self.threads >= 1, self.threads))
        for rule, ok, value in checks:
            if not ok:
                raise ValueError(f"`{rule}` must hold, got {value}")
        self._check_finite()
        if not isinstance(self.device, str) or not DEVICE_PATTERN.match(self.device):
            raise ValueError(f"`device` must be {DEVICE_FORMS}, got {self.device!r}")

    def _check_finite(self) -> None:
        """lr and clip are finite (``inf`` is refused like ``nan``); lr fits a float32 step."""
        if not self.lr <= FLOAT32_MAX:
            raise ValueError(f"`lr <= {FLOAT32_MAX:.4g}` must hold (a finite step a float32 parameter can take), "
                             f"got {self.lr}")
        if not math.isfinite(self.clip):
            raise ValueError(f"`clip` must be finite, got {self.clip}; for no clipping set train.clip_mode=none")


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
