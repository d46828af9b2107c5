"""What counts as a value in a recorded row: the one home of the "is this a present number" checks.

Rows come from pandas frames (a missing number is NaN), from CSV text (a missing value is ``""``) and from
MLflow (``None``), so each check names the three kinds of missing at once:

- ``is_number(v)``: a number that is there: not None, not NaN, not text (``"0.5"`` is text, not a number);
- ``number_or_none(v)``: ``float(v)`` where ``is_number(v)``, else None;
- ``present(v)``: any value that is there, text included: not None, not NaN, not ``""``.
"""
from __future__ import annotations

import math
from typing import Any, Optional


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def is_number(v: Any) -> bool:
    """A number that is there (not None, NaN or text)."""
    return v is not None and not isinstance(v, str) and not _nan(v)


def number_or_none(v: Any) -> Optional[float]:
    """``float(v)`` for a number that is there, else None."""
    return float(v) if is_number(v) else None


def present(v: Any) -> bool:
    """A value that is there, text included (not None, NaN or the empty string)."""
    return v is not None and not _nan(v) and v != ""
