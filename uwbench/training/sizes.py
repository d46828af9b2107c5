"""Whether a run's tensors can fit in the machine's memory, decided from its config before anything is
allocated (or recorded), so a mistyped size is a one-line error instead of an allocator's traceback.

The estimate is a lower bound: what training must hold at once whatever the execution path, namely for
each of the batch's B sequences and each of its T steps (the task's ``seq_len``; 1 for a task without one)
the state the backward pass needs, at least the memory (D slots x W words) and the controller's H units,
as float32. The real need is several times larger (gates, reads, the link matrix of the DNC, gradients,
Adam's moments), so a run refused here could never have run; one that passes may still run out of memory,
which the CLI reports as one line too (``uwbench.errors``).
"""
from __future__ import annotations

import os
from typing import Optional, Tuple

FLOAT_BYTES = 4  # float32, the models' dtype


def lower_bound(resolved) -> Tuple[int, str]:
    """(bytes, how they were counted) for a ``ResolvedRun``."""
    task, model, train = resolved.task_cfg, resolved.model_cfg, resolved.train
    steps = int(getattr(task, "seq_len", 1) or 1)
    slots, word = int(getattr(model, "memory_size", 0) or 0), int(getattr(model, "word_size", 0) or 0)
    hidden = int(getattr(model, "hidden_size", 0) or 0)
    per_step = slots * word + hidden
    total = FLOAT_BYTES * train.batch_size * steps * per_step
    memory = f"memory {slots} x {word} + " if slots else ""
    how = (f"batch {train.batch_size} x T={steps} steps x ({memory}hidden {hidden}) float32 values kept for the "
           "backward pass")
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
        raise ValueError(f"the run needs at least {human(need)} ({how}) but {what} is {human(have)}: lower the "
                         "batch size, the sequence length or the memory size (--batch-size, --seq-len, --memory-size)")


def human(n: float) -> str:
    """Bytes in the largest unit that keeps the number >= 1: 1.5 GB, 20 TB."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    raise AssertionError("unreachable")
