"""Files replaced whole: written to a temporary file beside the target, then renamed over it
(``os.replace``), so a process killed at any moment leaves the old file or the new one, never a part of one.

Every file uwbench writes outside MLflow and the Optuna storage goes through here: report folders and
their snapshots, the reports index, the leaderboard's files, benchmark results, theory figures. Training
checkpoints have their own writer with an fsync (``training/checkpoint.py``); the native kernels' library
is renamed into place the same way (``native/__init__.py``). A process killed before its rename leaves
its hidden temporary file (named with its pid); the next write into that folder removes it.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from typing import Iterator, Optional

# A temporary file of ``replacing``: ``.<name>.<pid>-<random>.tmp<ext>`` (``<pid>-`` absent in older ones).
TEMP = re.compile(r"^\..+\.(?:(?P<pid>\d+)-)?[a-z0-9_]{8}\.tmp(?:\.[^.]*)?$")
OLD_TEMP_AGE = 3600.0  # seconds: a temporary file without its writer's pid is left over once this old


@contextlib.contextmanager
def replacing(path: str, sync: bool = False) -> Iterator[str]:
    """Yield a temporary path in ``path``'s folder (hidden, with the same extension, so writers that infer a
    format from it still do); when the block ends without an error it is renamed over ``path``, otherwise
    removed. ``sync``: flush it to disk before the rename (for files a resume depends on). The temporary
    files a killed writer left in the folder are removed first (``remove_leftovers``)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    remove_leftovers(folder)
    base = os.path.basename(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{base}.{os.getpid()}-", suffix=".tmp" + os.path.splitext(base)[1])
    os.close(fd)
    try:
        yield tmp
        if sync:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.chmod(tmp, _mode_of(path))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def remove_leftovers(folder: str) -> int:
    """Remove the temporary files of ``replacing`` in ``folder`` whose writer is gone (a process killed before
    its rename: its pid runs nothing on this machine; one without a pid once ``OLD_TEMP_AGE`` old). A
    writer still running keeps its file. Returns how many were removed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    removed = 0
    for name in names:
        found = TEMP.match(name)
        if found is None:
            continue
        path = os.path.join(folder, name)
        if not _writer_gone(found.group("pid"), path):
            continue
        try:
            os.remove(path)
            removed += 1
        except OSError:
            pass
    return removed


def _writer_gone(pid: Optional[str], path: str) -> bool:
    if pid is None:
        try:
            return time.time() - os.stat(path).st_mtime > OLD_TEMP_AGE
        except OSError:
            return False
    if int(pid) == os.getpid():
        return False  # this process's own (another thread's write)
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False
    return False


def _mode_of(path: str) -> int:
    """The permissions the file has (or a new file would get under the umask): mkstemp's are 0600."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it, which races other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def write_text(path: str, text: str, sync: bool = False) -> str:
    """``text`` as UTF-8 with the line ends as given (no newline translation); returns ``path``."""
    with replacing(path, sync) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    return path


def write_bytes(path: str, data: bytes, sync: bool = False) -> str:
    with replacing(path, sync) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return path
