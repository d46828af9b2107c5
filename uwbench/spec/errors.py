"""Study-file errors: ``SpecError`` and the formatting of pydantic validation errors as
``<file>: <key path>: <message>`` lines."""
from __future__ import annotations

from typing import Any, Tuple

from pydantic import ValidationError

from uwbench.config import ConfigError


class SpecError(ConfigError):
    """An invalid study file; the message names the file, the key path and what is allowed."""


def _loc(loc: Tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part) in ("float", "int", "choice", "function-after[_check(), FloatParam]"):
            continue  # discriminated-union tags pydantic adds to the path
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def format_validation_error(exc: ValidationError, path: str) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = err["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        lines.append(f"{path}: {_loc(loc)}: {msg}")
    return "\n".join(lines)
