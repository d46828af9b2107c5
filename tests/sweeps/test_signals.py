"""How a sweep process takes signals: SIGTERM stops it as Ctrl-C does; a worker stops on the first signal and
ignores the ones after it while it ends its runs (after a Ctrl-C that reached it, its parent sends SIGTERM)."""
from __future__ import annotations

import signal
import time

import pytest


def _signal_self(signum) -> None:
    """The signal delivered to this (the main) thread itself, so its handler runs before the call returns; a
    signal sent to the process could land on another thread of the test process and be handled late."""
    signal.raise_signal(signum)
    time.sleep(0.01)  # the handler runs in the main thread between bytecodes


def test_sigterm_stops_the_process_as_ctrl_c_does_every_time():
    from uwbench.sweeps.common import terminate_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    with terminate_as_interrupt():
        for _ in range(2):
            with pytest.raises(KeyboardInterrupt, match="signal 15"):
                _signal_self(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.fixture
def interactive_sigint():
    """SIGINT as an interactive process has it (Ctrl-C raises KeyboardInterrupt), whatever the shell that
    started the tests did: a command started in the background with `&` inherits SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_worker_stops_on_the_first_signal_and_ends_its_runs_through_the_next(first, interactive_sigint):
    from uwbench.sweeps.common import terminate_as_interrupt

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    cleaned = False
    with terminate_as_interrupt(once=True):
        with pytest.raises(KeyboardInterrupt, match=f"signal {int(first)}"):
            try:
                _signal_self(first)
            finally:
                _signal_self(signal.SIGTERM)  # the parent's, while the clean-up runs: not raised
                _signal_self(signal.SIGINT)
                cleaned = True
    assert cleaned
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_worker_started_in_the_background_keeps_ignoring_ctrl_c_and_still_stops_on_sigterm():
    from uwbench.sweeps.common import terminate_as_interrupt

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `sweep ... &` leaves it
    try:
        with terminate_as_interrupt(once=True):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            _signal_self(signal.SIGINT)  # ignored: nothing is raised
            with pytest.raises(KeyboardInterrupt, match="signal 15"):
                _signal_self(signal.SIGTERM)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
