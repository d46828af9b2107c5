"""Whether a run's tensors can fit in the machine's memory, decided from its config before anything is
allocated (or recorded), so a mistyped size is a one-line error instead of an allocator's traceback or the
kernel's out-of-memory killer.

The estimate is a lower bound: what training must hold at once whatever the execution path, as float32, for
each of the batch's B sequences and each of its T steps (the task's ``seq_len``; 1 for a task without one;
the decoder's steps are not counted) the values the backward pass needs:

- the controller: its state h and the gradient reaching it, and its G = gates x H pre-activations (the
  input's projection) and their gradient: 2 H + 2 G per step (the native path's workspace holds these
  for every step, ``models/native.py``; the eager path's autograd graph holds more);
- the memory (D slots x W words) at every step that writes, every step for the regular writer, D steps
  for the others (they write D times).

The real need is larger (the link matrix of the DNC, reads, interfaces, the cell's saved values, Adam's
moments), so a run refused here could never have run; one that passes may still run out of memory, which
the CLI reports as one line too (``uwbench.errors``).
"""
from __future__ import annotations

import os
from typing import Optional, Tuple

from uwbench.errors import UserError

FLOAT_BYTES = 4  # float32, the models' dtype
EVERY_STEP_WRITERS = ("regular",)  # writers that write the memory at every step

# members per population with --population auto (``uwbench train`` and ``uwbench sweep``): on a GPU a
# population is one batched forward per write schedule (benchmarks/results/*-population.json); on the CPU
# each member runs its own native node and the saving is the trainer's per-update work, which flattens out
# by 8 members
AUTO_SIZE = {"cuda": 256, "cpu": 8}


def _gates(controller: Optional[str]) -> int:
    """The controller's gates per hidden unit (4 for an LSTM, 3 for a GRU; 1 when unknown)."""
    if not controller:
        return 1
    try:
        from uwbench.models import controllers  # noqa: F401 - registers the controllers
        from uwbench.registry import CONTROLLERS

        return max(int(getattr(CONTROLLERS.get(controller), "gates", 1) or 1), 1)
    except Exception:  # noqa: BLE001 - an unknown controller is the model config's error, not this estimate's
        return 1


def lower_bound(resolved) -> Tuple[int, str]:
    """(bytes, how they were counted) for a ``ResolvedRun``."""
    task, model, train = resolved.task_cfg, resolved.model_cfg, resolved.train
    steps = int(getattr(task, "seq_len", 1) or 1)
    slots, word = int(getattr(model, "memory_size", 0) or 0), int(getattr(model, "word_size", 0) or 0)
    hidden = int(getattr(model, "hidden_size", 0) or 0)
    gates = _gates(getattr(model, "controller", None) or ("lstm" if resolved.model_name == "lstm" else None))
    controller = 2 * hidden + 2 * gates * hidden
    writer = getattr(model, "writer", None)
    writes = steps if writer in EVERY_STEP_WRITERS else min(slots, steps)
    total = FLOAT_BYTES * train.batch_size * (steps * controller + writes * slots * word)
    memory = (f" + memory {slots} x {word} at {'each of the' if writes == steps else 'its'} {writes} write(s)"
              if slots and word else "")
    how = (f"batch {train.batch_size} x (T={steps} steps x controller {controller} (2 H + 2 G, H={hidden}, "
           f"G={gates * hidden}){memory}) float32 values kept for the backward pass")
    return total, how


def machine_memory(device) -> Tuple[Optional[int], str]:
    """(bytes, what they are) of the memory a run on ``device`` (a ``torch.device``) allocates from: the GPU's
    for CUDA, the machine's RAM otherwise; None when it cannot be read."""
    if device.type == "cuda":
        import torch

        index = device.index if device.index is not None else torch.cuda.current_device()
        return torch.cuda.get_device_properties(index).total_memory, f"GPU {index}'s memory"
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's memory"
    except (ValueError, OSError, AttributeError):  # not a POSIX system: nothing to compare with
        return None, "this machine's memory"


def check_fits(resolved, device) -> None:
    """Refuse a run whose lower bound exceeds the memory it would allocate from, with both figures."""
    need, how = lower_bound(resolved)
    have, what = machine_memory(device)
    if have is not None and need > have:
        raise UserError(f"the run needs at least {human(need)} ({how}) but {what} is {human(have)}: lower the "
                         "batch size, the sequence length or the memory size (--batch-size, --seq-len, --memory-size)")


def human(n: float) -> str:
    """Bytes in the largest unit that keeps the number >= 1: 1.5 GB, 20 TB."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    raise AssertionError("unreachable")
