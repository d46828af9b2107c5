"""What counts as a value in a recorded row (``uwbench.values``): None, NaN and (for numbers) text are missing,
whichever source the row came from."""
from __future__ import annotations

import math

import numpy as np

from uwbench.values import is_number, number_or_none, present


def test_a_number_is_there_unless_none_nan_or_text():
    for v in (0, 0.0, -1.5, np.float64(2.5), np.int64(3), math.inf):
        assert is_number(v), v
    for v in (None, math.nan, np.float64("nan"), "0.5", ""):
        assert not is_number(v), v


def test_number_or_none_is_a_float_for_a_number_and_none_otherwise():
    assert number_or_none(np.int64(3)) == 3.0 and type(number_or_none(np.int64(3))) is float
    assert number_or_none("0.5") is None and number_or_none(math.nan) is None and number_or_none(None) is None


def test_present_counts_text_but_not_the_three_kinds_of_missing():
    for v in (0, "0", "text", False):
        assert present(v), v
    for v in (None, math.nan, ""):
        assert not present(v), v
