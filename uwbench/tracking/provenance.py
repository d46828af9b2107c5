"""Provenance of a run: the code (git commit, uncommitted changes), the software and the machine.

``collect(repo_dir)`` returns a ``Provenance``: ``tags`` (flat strings, recorded as MLflow tags so the UI
can filter on them: ``git_commit``, ``git_dirty``, ``python_version``, ``torch_version``, ``cuda_version``,
``cudnn_version``, ``cpu_model``, ``cpu_count``, ``gpu_model``, ``hostname``, ...) and ``files`` (artifacts:
``packages.txt``, the installed distributions as ``name==version``; ``git_diff.patch``, the output of
``git diff HEAD`` when the work tree is dirty; ``git_untracked.txt``, the untracked files when there are
any). The code's repository is the one holding the uwbench package unless another folder is given.
The result is cached per process and folder: the git calls and the package scan run once.
"""
from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
from dataclasses import dataclass, field
from typing import Dict, Optional

NONE = "none"  # the value of a tag that does not apply (no git repository, no CUDA)
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Provenance:
    tags: Dict[str, str]
    files: Dict[str, str] = field(default_factory=dict)  # artifact file name -> text


def collect(repo_dir: Optional[str] = None) -> Provenance:
    """The provenance of runs started by this process from the code in ``repo_dir`` (default: uwbench's
    own folder)."""
    return _collect(os.path.abspath(repo_dir or PACKAGE_DIR))


@functools.lru_cache(maxsize=None)
def _collect(repo_dir: str) -> Provenance:
    tags: Dict[str, str] = {}
    files: Dict[str, str] = {}
    tags.update(_git(repo_dir, files))
    tags.update(_software())
    tags.update(_machine())
    packages = installed_packages()
    files["packages.txt"] = "\n".join(packages) + "\n"
    tags["package_count"] = str(len(packages))
    return Provenance(tags=tags, files=files)


def _run_git(repo_dir: str, *args: str) -> Optional[str]:
    try:
        out = subprocess.run(["git", *args], cwd=repo_dir, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _git(repo_dir: str, files: Dict[str, str]) -> Dict[str, str]:
    commit = _run_git(repo_dir, "rev-parse", "HEAD")
    if commit is None:
        return {"git_commit": NONE, "git_dirty": NONE}
    status = _run_git(repo_dir, "status", "--porcelain", "--untracked-files=all") or ""
    untracked = [line[3:] for line in status.splitlines() if line.startswith("??")]
    changed = [line for line in status.splitlines() if not line.startswith("??")]
    dirty = bool(changed or untracked)
    if changed:
        files["git_diff.patch"] = _run_git(repo_dir, "diff", "HEAD") or ""
    if untracked:
        files["git_untracked.txt"] = "\n".join(untracked) + "\n"
    branch = (_run_git(repo_dir, "rev-parse", "--abbrev-ref", "HEAD") or "").strip()
    return {"git_commit": commit.strip(), "git_dirty": str(dirty).lower(), "git_branch": branch or NONE,
            "git_changed_files": str(len(changed)), "git_untracked_files": str(len(untracked))}


def _software() -> Dict[str, str]:
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"python_version": platform.python_version(), "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda or NONE, "cudnn_version": str(cudnn) if cudnn else NONE,
            "platform": platform.platform()}


def _machine() -> Dict[str, str]:
    tags = {"hostname": socket.gethostname(), "cpu_model": cpu_model(), "cpu_count": str(os.cpu_count() or 0)}
    try:
        tags["cpu_affinity"] = str(len(os.sched_getaffinity(0)))  # the cores this process may use
    except (AttributeError, OSError):
        pass
    tags.update(_gpus())
    return tags


def _gpus() -> Dict[str, str]:
    """The machine's NVIDIA GPUs and driver, read through NVML (nvidia-ml-py): no CUDA context is made, so
    a CPU run on a GPU machine stays off the GPUs."""
    none = {"gpu_count": "0", "gpu_model": NONE, "nvidia_driver": NONE}
    try:
        import pynvml
    except ImportError:
        return none
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, no GPU
        return none
    try:
        count = pynvml.nvmlDeviceGetCount()
        names = [_text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))) for i in range(count)]
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
    except Exception:  # noqa: BLE001 - pynvml raises its own error types for a GPU it cannot read
        return none
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down is best effort
            pass
    return {"gpu_count": str(count), "gpu_model": ", ".join(sorted(set(names))) or NONE, "nvidia_driver": driver}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, ``platform.processor()`` elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or NONE


def installed_packages() -> list:
    """``name==version`` of every installed distribution, sorted (what ``pip freeze`` lists, read from
    the package metadata without starting pip)."""
    from importlib import metadata

    seen = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() not in seen:
            seen[name.lower()] = f"{name}=={dist.version}"
    return [seen[k] for k in sorted(seen)]
