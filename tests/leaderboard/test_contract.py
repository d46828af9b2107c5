"""The writer contract (``uwbench/leaderboard/contract.py``): the check passes the built-in writers and names
what a broken one breaks; the example writer keeps it."""
from __future__ import annotations

import os
import sys

import pytest

from tests.helpers import ROOT


# ---- the contract check ----


def test_the_contract_check_passes_the_builtin_writers_and_names_what_a_broken_one_breaks():
    from uwbench.registry import WRITERS
    from uwbench.leaderboard import contract

    for writer in WRITERS.names():
        net = contract._build(contract.probe_config("dnc", {"writer": writer}))[1]
        assert contract.schedule_problems(net.writer) == [], writer

    class Short:
        def schedule(self, n):
            return [True] * (n - 1)

    class Floats:
        def schedule(self, n):
            return [0.5] * n

    class Coin:
        calls = 0

        def schedule(self, n):
            Coin.calls += 1
            return [Coin.calls % 2 == 0] * n

    class Never:
        def schedule(self, n):
            return [False] * n

    assert contract.schedule_problems(Short()) == [
        "schedule(2) has 1 entries: it must have one per encoder step (2)"]
    assert "holds 0.5: every entry must be True or False" in contract.schedule_problems(Floats())[0]
    assert "changed between two calls" in contract.schedule_problems(Coin())[0]
    assert contract.schedule_problems(Never()) == ["schedule(8) never writes: the memory would stay empty"]
    assert "no writer 'nope' is registered" in contract.writer_problems("nope")[0]
    assert "takes no writer" in contract.writer_problems("uniform", "lstm")[0]
    assert "has no `writer` setting" in contract.model_problems("lstm")[0]


# ---- the example writer ----


@pytest.fixture
def front_loaded():
    """examples/front_loaded_writer.py imported as a plugin is, then unregistered (later tests see the
    registry they expect)."""
    import importlib.util

    from uwbench.registry import WRITERS

    path = os.path.join(ROOT, "examples", "front_loaded_writer.py")
    spec = importlib.util.spec_from_file_location("uwbench_test_front_loaded", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass reads the module's namespace
    spec.loader.exec_module(module)
    yield module
    WRITERS.unregister("front_loaded")
    del sys.modules[spec.name]


def test_the_example_writer_writes_as_often_as_uw_but_earlier_and_keeps_the_contract(front_loaded):
    from uwbench.theory import uniform_positions
    from uwbench.leaderboard import contract

    for n, d in ((21, 1), (21, 4), (21, 7), (41, 3), (41, 15), (7, 1), (5, 3)):
        uw = uniform_positions(n, d)
        mine = front_loaded.front_loaded_positions(n, len(uw), 2.0)
        assert len(mine) == len(set(mine)) == len(uw) and mine == sorted(mine)
        assert mine[-1] == n - 1 == uw[-1]  # the end marker's step is written, as by UW
        assert sum(mine) < sum(uw)  # earlier on the whole
        assert front_loaded.front_loaded_positions(n, len(uw), 1.0) == uw  # power 1: UW's own positions
    assert front_loaded.front_loaded_positions(21, 5, 2.0) == [0, 3, 7, 13, 20]
    assert contract.writer_problems("front_loaded", "dnc", {"power": 1.5}) == []
    assert "`power > 0` must hold, got 0" in contract.writer_problems("front_loaded", "dnc", {"power": 0})[0]
