"""The one "did you mean" rule (uwbench.suggest) and the messages that use it."""
from __future__ import annotations

from uwbench import suggest


def test_closest_known_name_or_none():
    assert suggest.closest("memory_sise", ["writer", "memory_size", "hidden_size"]) == "memory_size"
    assert suggest.closest("zzz", ["writer", "memory_size"]) is None
    assert suggest.closest(3, ["3a", "b"]) == "3a"  # any value is compared as its text


def test_hint_forms():
    known = {"uniform", "regular"}
    assert suggest.hint("unifrom", known) == " (did you mean 'uniform'?)"
    assert suggest.hint("unifrom", known, suggest.SENTENCE) == " Did you mean 'uniform'?"
    assert suggest.hint("unifrom", known, " (did you mean {{model.{}}}?)") == " (did you mean {model.uniform}?)"
    assert suggest.hint("xyzzy", known) == ""
