"""Ending a process without the interpreter's teardown.

Once torch and MLflow are imported, the interpreter takes most of a second to tear itself down after a command
has done its work (module by module, then the shared libraries' destructors; docs/speed.md gives the measure):
time every sweep worker and every command spends, which a short sweep pays at its end. ``exit_now`` ends the process as ``sys.exit``
would, in the same order, less that teardown: it waits for the threads that are not daemons, runs the exit
handlers (``atexit``: logging's flush, multiprocessing's finalizers and children, MLflow's), flushes the
standard streams, and only then leaves with ``os._exit``. What it does not do is what teardown would do
besides: flush a file object that was left open and is collected only at the end. uwbench writes its files
through ``atomic.py`` and closes what it opens, so nothing of its own waits for that.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """End the process with exit status ``code`` (see the module's docstring). Under a profiler or a tracer
    (``python -m cProfile``, a debugger, coverage) the process ends the ordinary way, so that what they
    write when it ends is written."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    me = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not me and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more can reach it
            pass
    os._exit(code)
