"""`uwbench params`: a model's parameter count and its reconciliation with the paper (docs/reference.md §9)."""
from __future__ import annotations

HELP = "count a model's parameters and reconcile them with the paper's totals"

# CLI flag -> model config key. Flags left unset keep the model's own default.
MODEL_FLAGS = {"hidden_size": "hidden_size", "memory_size": "memory_size", "writer": "writer",
               "controller": "controller", "cache_size": "cache_size"}


def add_arguments(p) -> None:
    p.add_argument("--model", required=True, help="model name (see `uwbench ls models`)")
    p.add_argument("--task", default="copy", help="task whose input/output sizes the model gets (default: copy)")
    p.add_argument("--hidden-size", type=int, help="controller units H")
    p.add_argument("--memory-size", type=int, help="memory slots D (memory models)")
    p.add_argument("--writer", help="regular | uniform | cached_uniform | random (memory models)")
    p.add_argument("--controller", help="ln_lstm | lstm | gru | rnn")
    p.add_argument("--cache-size", type=int, help="CUW interval and cache length L")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="any other model or task setting, e.g. --set model.attention_size=16 (repeatable)")


def run(args) -> int:
    from uwbench.config import ConfigError, as_dict, parse_assignments
    from uwbench.models.base import build_model
    from uwbench.models.params import format_report, param_report
    from uwbench.registry import MODELS
    from uwbench.tasks import build_task

    sets = parse_assignments(args.assignments)
    if "train" in sets:
        raise ConfigError("`uwbench params` takes only model.* and task.* settings, got train.*")
    model_values = dict(sets.get("model", {}))
    for flag, key in MODEL_FLAGS.items():
        value = getattr(args, flag, None)
        if value is not None:
            model_values[key] = value
    task = build_task(args.task, sets.get("task", {}))
    cfg = MODELS.build_config(args.model, model_values)
    model = build_model(args.model, task.input_size, task.output_size, cfg, task=task)
    settings = ", ".join(f"{k}={v}" for k, v in as_dict(cfg).items())
    header = (f"model {args.model} ({settings})\n"
              f"task {args.task}: input {task.input_size}, output {task.output_size}")
    print(format_report(param_report(args.model, model, cfg, task.input_size, task.output_size), header))
    return 0
