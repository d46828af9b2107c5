"""Paths the program derives from a name or a value it was given stay inside the folder they belong to.

``folder_name(value, what, fix)`` checks a name that becomes one folder (an MLflow experiment's artifact
folder, a report folder named by a runs.csv's study): one plain component, never absolute, never ``.`` or
``..``, no separator. ``user_folder(path, flag)`` refuses a folder given on the command line that is the
root, a system folder or the home folder itself, where a command would write its own files among the
system's or the user's (``uwbench report --out /``).
"""
from __future__ import annotations

import os
from typing import Optional

from uwbench.errors import UserError

# Folders of the system: nothing uwbench makes belongs in them or anywhere under them.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                "/sys", "/usr")
# Folders that hold other folders, not files of a program's own: refused as themselves, not below.
SYSTEM_FOLDERS = ("/", "/home", "/mnt", "/media", "/opt", "/root", "/srv", "/tmp", "/var", "/var/tmp")


def folder_name(value: str, what: str, fix: str) -> str:
    """``value`` when it is one plain folder name, else a ValueError naming ``what`` it is and ``fix``."""
    text = str(value)
    bad = None
    if not text.strip():
        bad = "it is empty"
    elif "\0" in text:
        bad = "it holds a NUL character"
    elif "/" in text or "\\" in text:
        bad = "it holds a path separator"
    elif text in (".", ".."):
        bad = f"{text!r} names a folder, not a name"
    if bad is None:
        return text
    raise UserError(f"`{what}` must be one folder name (no '/', '\\', '..' or absolute path), got {text!r}: {bad}; "
                     f"{fix}")


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def system_folder(path: str) -> Optional[str]:
    """Why ``path`` is no folder for a program's files (the root, a system folder, the home folder itself),
    or None."""
    real = _real(path)
    home = os.path.expanduser("~")
    home = _real(home) if home and home != "~" else None
    if home is not None and real == home:
        return "it is the home folder itself"
    for tree in SYSTEM_TREES:
        if real == tree or real.startswith(tree + os.sep):
            return f"{tree} is the system's"
    if real in SYSTEM_FOLDERS:
        return "it is the root folder" if real == "/" else f"{real} is a system folder"
    return None


def user_folder(path: str, flag: str) -> str:
    """``path`` (given with ``flag``) unless it is a system folder (``system_folder``): ValueError."""
    why = system_folder(path)
    if why is None:
        return path
    raise UserError(f"`{flag}` must name a folder of its own, got {path!r}: {why}; give a new or empty folder "
                     f"(e.g. {flag} runs/reports)")
