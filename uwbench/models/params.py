"""Parameter counts of built models, and their reconciliation with the paper's totals
(docs/reference.md §9).

The paper's counts (Table 1: DNC 98,840; DNC+CUW 96,120; LSTM 103,840; NTM 99,112) come from the
authors' TF code, which counts every trainable variable, including ones it never uses
(docs/reference.md §9.1):

- two V x V embedding matrices (``embe_w``, ``embd_w``) in every model: +2V^2 = 200 for V = 10;
- for the LSTM baseline (``use_mem=False``) also the interface projection H(WR + 3W + 5R + 3) and the
  read-out W_r (WR x V) of the default memory (W = 64, R = 1): +33,000 + 640 for H = 125.

We do not allocate those tensors. ``param_report`` returns our count, per-part subtotals, the unused
TF tensors that bring it to the TF code's total, and the paper's number when the configuration is one
of the paper's rows.

Reconciliations are registered per model name with ``@paper_reconciliation(name)``. The NTM's lives
with the NTM (``uwbench/models/ntm.py``, docs/reference.md §9.4: 99,112); a model without one reports
its own count only. ``count_parameters`` is the one count of a module's trainable parameters.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import torch.nn as nn

from uwbench.errors import UserError

# The paper's Table 1 totals (docs/reference.md §9.2, §9.4).
PAPER_TOTALS = {"dnc": 98_840, "dnc_cuw": 96_120, "lstm": 103_840, "ntm": 99_112}
TF_WORD_SIZE, TF_READ_HEADS = 64, 1  # the TF code's memory defaults, counted even without memory


@dataclass
class ParamReport:
    model: str
    ours: int  # trainable parameters of our module
    parts: List[Tuple[str, int]]  # our count split by top-level submodule / parameter
    unused: List[Tuple[str, int]] = field(default_factory=list)  # TF tensors we do not allocate
    paper: Optional[Tuple[str, int]] = None  # (the paper's row, its total) when the config is that row
    note: str = ""

    @property
    def tf_total(self) -> int:
        """What the authors' code would report for this configuration."""
        return self.ours + sum(n for _, n in self.unused)


Reconciliation = Callable[[nn.Module, object, int, int], Tuple[List[Tuple[str, int]], Optional[Tuple[str, int]]]]
PAPER_RECONCILIATIONS: Dict[str, Reconciliation] = {}


def paper_reconciliation(model_name: str):
    """Register ``fn(model, cfg, input_size, output_size) -> (unused, paper)`` for a model name:
    ``unused`` lists (label, count) of the TF code's tensors we do not allocate, ``paper`` is
    (row label, total) when ``cfg`` is one of the paper's rows, else None."""

    def decorator(fn: Reconciliation) -> Reconciliation:
        if model_name in PAPER_RECONCILIATIONS:
            raise UserError(f"a paper reconciliation for model {model_name!r} is registered twice")
        PAPER_RECONCILIATIONS[model_name] = fn
        return fn

    return decorator


def count_parameters(model: nn.Module) -> int:
    """The number of trainable parameters of ``model`` (what runs record as ``num_parameters``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def parameter_parts(model: nn.Module) -> List[Tuple[str, int]]:
    """Trainable parameters grouped by the first component of their name, in registration order."""
    parts: Dict[str, int] = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            head = name.split(".", 1)[0]
            parts[head] = parts.get(head, 0) + p.numel()
    return list(parts.items())


def param_report(model_name: str, model: nn.Module, cfg, input_size: int, output_size: int) -> ParamReport:
    report = ParamReport(model_name, count_parameters(model), parameter_parts(model))
    fn = PAPER_RECONCILIATIONS.get(model_name)
    if fn is None:
        report.note = (f"no paper reconciliation is registered for model {model_name!r}; its module can add one "
                       "with @uwbench.models.params.paper_reconciliation")
        return report
    report.unused, report.paper = fn(model, cfg, input_size, output_size)
    return report


def embeddings(vocab: int) -> Tuple[str, int]:
    return (f"unused TF embeddings embe_w, embd_w (2 x {vocab}x{vocab})", 2 * vocab * vocab)


def _paper_task(input_size: int, output_size: int) -> bool:
    return input_size == output_size == 10  # V = 10 (docs/reference.md §2.1, §9.2)


@paper_reconciliation("dnc")
def reconcile_dnc(model, cfg, input_size, output_size):
    unused = [embeddings(input_size)]
    paper = None
    base = (_paper_task(input_size, output_size) and cfg.controller == "ln_lstm" and cfg.memory_size == 4
            and cfg.word_size == 64 and cfg.read_heads == 1)
    if base and cfg.hidden_size == 100 and cfg.writer in ("regular", "uniform", "random"):
        paper = ("DNC / DNC+UW / DNC+RW (H=100)", PAPER_TOTALS["dnc"])
    elif (base and cfg.hidden_size == 95 and cfg.writer == "cached_uniform"
          and cfg.writer_config.attention_size == 16):
        paper = ("DNC+CUW (H=95, A=16)", PAPER_TOTALS["dnc_cuw"])
    return unused, paper


@paper_reconciliation("lstm")
def reconcile_lstm(model, cfg, input_size, output_size):
    h, w, r = cfg.hidden_size, TF_WORD_SIZE, TF_READ_HEADS
    unused = [
        embeddings(input_size),
        (f"unused TF interface W_xi ({h}x{w * r + 3 * w + 5 * r + 3})", h * (w * r + 3 * w + 5 * r + 3)),
        (f"unused TF read-out W_r ({w * r}x{output_size})", w * r * output_size),
    ]
    paper = None
    if _paper_task(input_size, output_size) and cfg.controller == "ln_lstm" and h == 125:
        paper = ("LSTM (H=125)", PAPER_TOTALS["lstm"])
    return unused, paper


def format_report(report: ParamReport, header: str = "") -> str:
    lines = [header] if header else []
    width = 58
    for name, n in report.parts:
        lines.append(f"  {name:<{width}} {n:>9,}")
    lines.append(f"  {'ours (trainable parameters)':<{width}} {report.ours:>9,}")
    if report.note:
        lines.append(f"  ({report.note})")
        return "\n".join(lines)
    for label, n in report.unused:
        lines.append(f"  + {label:<{width - 2}} {n:>9,}")
    if report.unused:
        lines.append(f"  = {'TF code total (docs/reference.md §9)':<{width - 2}} {report.tf_total:>9,}")
    if report.paper is None:
        lines.append("  paper: no Table 1 row has this configuration")
    else:
        row, total = report.paper
        verdict = "matches" if total == report.tf_total else f"DIFFERS by {report.tf_total - total:+,}"
        lines.append(f"  {'paper, ' + row:<{width}} {total:>9,}  {verdict}")
    return "\n".join(lines)
