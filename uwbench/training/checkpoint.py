"""Mid-run checkpoints: what a training run needs to continue after its process died.

One folder per MLflow run, ``<checkpoint dir>/<run id>/`` (``uwbench.env.checkpoint_dir()``):

- ``state.pt`` while the run trains, rewritten at every ``train.checkpoint_every``-th evaluation: the
  model and optimizer state, the update count, every random generator (training batches, evaluation
  batches, torch's global generators and those of Python and NumPy; the random writer's mask is a buffer
  of the model's state dict), the best weights with their evaluation value and update, the early-stop
  counter, the learning curve so far, the timing sums and the resolved run config. About four copies of
  the weights (model, Adam's two moments, best weights), twice that for a moment while it is replaced.
- ``best.pt`` only, once the run finished: ``state.pt`` is deleted, so a finished run keeps one copy of
  its best weights (the size of the model's state dict; the same file is also an MLflow artifact).
  A pruned or diverged run keeps nothing: resuming it would only repeat the same end.

Every write goes to a temporary file in the same folder, is flushed to disk, then renamed over the old one
(``os.replace``), so a process killed at any moment leaves either the previous checkpoint or the new one.
A checkpoint resumes only the run config it was written for: any other config is refused.
"""
from __future__ import annotations

import glob
import os
import random
import shutil
from typing import Any, Dict, Mapping, Optional

import torch

from uwbench import env
from uwbench.errors import UserError

FORMAT_VERSION = 1
STATE_FILE = "state.pt"
BEST_FILE = "best.pt"


class CheckpointError(UserError):
    """A checkpoint cannot be used to resume this run (another config, a finished run, a broken file)."""


def atomic_save(obj: Any, path: str) -> None:
    """``torch.save(obj)`` to ``path`` atomically: a temporary file beside it, fsync, then ``os.replace``."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    try:  # make the rename itself durable
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- random generators ----


def capture_rng(generators: Mapping[str, torch.Generator]) -> Dict[str, Any]:
    """The state of the named generators and of the global ones (torch CPU and CUDA, Python, NumPy)."""
    import numpy as np

    name, keys, pos, has_gauss, cached = np.random.get_state()
    state: Dict[str, Any] = {
        "generators": {k: g.get_state() for k, g in generators.items()},
        "torch": torch.get_rng_state(),
        "cuda": _cuda_rng(),
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)),
    }
    return state


def _cuda_rng() -> Dict[int, torch.Tensor]:
    """The CUDA generator of the device in use, when this process uses CUDA (never initialising CUDA, nor
    touching the other GPUs)."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    index = torch.cuda.current_device()
    return {index: torch.cuda.get_rng_state(index)}


def restore_rng(state: Mapping[str, Any], generators: Mapping[str, torch.Generator]) -> None:
    """Put back what ``capture_rng`` took."""
    import numpy as np

    missing = set(generators) - set(state["generators"])
    if missing:
        raise CheckpointError(f"the checkpoint has no state for the generator(s) {sorted(missing)}")
    for k, g in generators.items():
        g.set_state(state["generators"][k])
    torch.set_rng_state(state["torch"])
    for index, cuda_state in state["cuda"].items():
        if torch.cuda.is_available() and index < torch.cuda.device_count():
            torch.cuda.set_rng_state(cuda_state, index)
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))


# ---- the checkpoint of one run ----


class Checkpoint:
    """The checkpoint folder of one run. ``every``: save at every ``every``-th evaluation (0/None: never).
    ``config``: the resolved run config (``ResolvedRun.as_dict()``), stored
    with every save and compared on load."""

    def __init__(self, run_id: str, config: Mapping[str, Any], every: Optional[int] = 1,
                 root: Optional[str] = None):
        self.run_id = run_id
        self.config = _plain(config)
        self.every = every or 0
        self.root = os.path.abspath(root) if root else env.checkpoint_dir()
        self.folder = os.path.join(self.root, run_id)
        self.state_path = os.path.join(self.folder, STATE_FILE)
        self.best_path = os.path.join(self.folder, BEST_FILE)

    @property
    def enabled(self) -> bool:
        return self.every > 0

    def due(self, evaluations: int, last: bool) -> bool:
        """Whether to save after the ``evaluations``-th evaluation (``last``: the loop ends after it)."""
        return self.enabled and (last or evaluations % self.every == 0)

    def resumable(self) -> bool:
        return os.path.exists(self.state_path)

    def finished(self) -> bool:
        return os.path.exists(self.best_path) and not self.resumable()

    def load(self) -> Optional[Dict[str, Any]]:
        """The saved state, or None when there is none (a fresh run). Raises ``CheckpointError`` when the
        run already finished, or the checkpoint was written for another config or another format."""
        if self.finished():
            raise CheckpointError(
                f"run {self.run_id} already finished: its checkpoint folder {self.folder} holds only the best "
                f"weights ({BEST_FILE}); start a new run instead of resuming this one")
        if not self.resumable():
            return None
        self._remove_stale()
        state = read(self.state_path, f"delete {self.folder} to start run {self.run_id} again from update 0")
        if state.get("version") != FORMAT_VERSION:
            raise CheckpointError(f"checkpoint {self.state_path} has format {state.get('version')!r}, this uwbench "
                                  f"reads format {FORMAT_VERSION}; resume it with the uwbench that wrote it")
        if state["config"] != self.config:
            raise CheckpointError(
                f"the checkpoint of run {self.run_id} was written for another run config; it differs in "
                f"{config_differences(state['config'], self.config)}. Resume with the stored config "
                f"(`uwbench train --resume {self.run_id}` with no config flags), or start a new run")
        return state

    def save(self, state: Mapping[str, Any]) -> None:
        """Write ``state`` (plus the format version and the config) atomically as ``state.pt``."""
        atomic_save({**state, "version": FORMAT_VERSION, "config": self.config}, self.state_path)

    def finish(self, best_state: Mapping[str, torch.Tensor]) -> None:
        """The run finished: keep only its best weights (``best.pt``), delete the resumable state."""
        if not self.enabled:
            return
        atomic_save(dict(best_state), self.best_path)
        self._remove_stale()
        if os.path.exists(self.state_path):
            os.remove(self.state_path)

    def discard(self) -> None:
        """The run ended for good without a result (pruned, diverged): keep nothing."""
        if self.enabled:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _remove_stale(self) -> None:
        """Temporary files of writes that a killed process left behind."""
        for path in glob.glob(os.path.join(glob.escape(self.folder), "*.tmp-*")):
            try:
                os.remove(path)
            except OSError:
                pass


def status(run_id: str, root: Optional[str] = None) -> Optional[str]:
    """``"resumable"`` (a run that was interrupted), ``"finished"`` (only its best weights are kept) or None
    (no checkpoint), for the run ``run_id`` under ``root`` (default ``uwbench.env.checkpoint_dir()``)."""
    ckpt = Checkpoint(run_id, {}, root=root)
    if ckpt.resumable():
        return "resumable"
    return "finished" if ckpt.finished() else None


def stored_config(run_id: str, root: Optional[str] = None) -> Dict[str, Any]:
    """The resolved run config a resumable checkpoint was written for."""
    ckpt = Checkpoint(run_id, {}, root=root)
    if not ckpt.resumable():
        state = "finished" if ckpt.finished() else "has no checkpoint"
        raise CheckpointError(f"run {run_id} {state} under {ckpt.root}: nothing to resume"
                              + ("" if ckpt.finished() else "; pass the folder it was written to with "
                                 f"--checkpoint-dir (or {env.CHECKPOINT_DIR_ENV})"))
    state = read(ckpt.state_path, f"delete {ckpt.folder} to start run {run_id} again from update 0")
    if "config" not in state:
        raise CheckpointError(f"the checkpoint {ckpt.state_path} is damaged (it holds no run config); delete "
                              f"{ckpt.folder} to start run {run_id} again from update 0")
    return state["config"]


def read(path: str, fix: str) -> Dict[str, Any]:
    """A checkpoint file's contents, loaded with ``weights_only=True`` (tensors and plain values only, never
    arbitrary objects); a damaged file (cut short, garbage, not a checkpoint) is a ``CheckpointError`` naming
    the file, what is wrong with it and ``fix``."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's notes on pickle protocols: the error below says it all
            state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # noqa: BLE001 - every way a file can fail to be a checkpoint is reported alike
        raise CheckpointError(f"the checkpoint {path} is damaged ({_damage(path, exc)}); {fix}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"the checkpoint {path} is damaged (it holds a {type(state).__name__}, not a "
                              f"checkpoint's mapping); {fix}")
    return state


def _damage(path: str, exc: BaseException) -> str:
    """What is wrong with a checkpoint file torch could not load, in a few words (torch's own text is
    paragraphs long and may advise loading with weights_only=False, which would run code from the file)."""
    import pickle
    import zipfile

    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        size, head = None, b""
    if size == 0:
        return "it is empty"
    if head == b"PK\x03\x04" and not zipfile.is_zipfile(path):  # torch's zip, its end missing
        return f"{size} bytes, cut short"
    if head != b"PK\x03\x04":
        return f"{size} bytes that torch cannot read as a checkpoint (not a torch file)"
    if isinstance(exc, pickle.UnpicklingError):
        return "it holds objects other than tensors and plain values, which are not loaded"
    return f"{size} bytes that torch cannot read as a checkpoint ({type(exc).__name__})"


def _plain(config: Mapping[str, Any]) -> Dict[str, Any]:
    """The config as plain nested dicts (tuples as lists), so a saved and a fresh one compare equal."""
    def conv(v):
        if isinstance(v, Mapping):
            return {str(k): conv(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        return v

    return conv(config)


def config_differences(stored: Mapping[str, Any], given: Mapping[str, Any], prefix: str = "") -> str:
    """``section.key: stored -> given`` for each differing leaf, comma separated."""
    out = []
    for key in sorted(set(stored) | set(given)):
        a, b = stored.get(key, "<absent>"), given.get(key, "<absent>")
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            sub = config_differences(a, b, f"{prefix}{key}.")
            if sub:
                out.append(sub)
        elif a != b:
            out.append(f"{prefix}{key}: stored {a!r}, given {b!r}")
    return ", ".join(out)
