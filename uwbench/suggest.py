"""The "did you mean" of every error about a misspelt name: one rule for how close a known name must be.

``hint("memory_sise", ["memory_size", "writer"])`` -> ``" (did you mean 'memory_size'?)"``; the
``form`` decides how the suggestion is written into the message, the rule stays here.
"""
from __future__ import annotations

import difflib
from typing import Iterable, Optional

CUTOFF = 0.5  # difflib's similarity ratio a known name needs to be suggested
IN_PARENS = " (did you mean {!r}?)"
SENTENCE = " Did you mean {!r}?"


def closest(name: object, known: Iterable[str]) -> Optional[str]:
    """The known name most like ``name``, or None when none is close enough."""
    found = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=CUTOFF)
    return found[0] if found else None


def hint(name: object, known: Iterable[str], form: str = IN_PARENS) -> str:
    """``form`` filled with the closest known name, or "" when there is none."""
    match = closest(name, known)
    return form.format(match) if match is not None else ""
