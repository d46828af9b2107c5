"""Workers forked from the warm server (``uwbench.sweeps.backends.worker_processes``): each sees the parent's
environment and working folder as they are when it starts, not as they were when the server started."""
from __future__ import annotations

import multiprocessing
import os

import pytest

from uwbench.sweeps.backends import worker_processes


def _report(queue, names) -> None:
    queue.put(({n: os.environ.get(n) for n in names}, os.getcwd(), multiprocessing.get_start_method()))


def test_a_worker_has_the_parents_environment_and_folder_of_the_moment_it_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("UWBENCH_TEST_EARLY", "before the server")
    monkeypatch.delenv("UWBENCH_TEST_LATE", raising=False)
    worker_processes.warm_up()
    monkeypatch.setenv("UWBENCH_TEST_LATE", "after the server")
    monkeypatch.delenv("UWBENCH_TEST_EARLY")
    monkeypatch.chdir(tmp_path)

    ctx = worker_processes.context()
    queue = ctx.Queue()
    environ = dict(os.environ, CUDA_VISIBLE_DEVICES="3")
    p = ctx.Process(target=worker_processes.worker_entry,
                    args=(environ, _report, queue, ["UWBENCH_TEST_EARLY", "UWBENCH_TEST_LATE", "CUDA_VISIBLE_DEVICES"]))
    p.start()
    seen, cwd, method = queue.get(timeout=120)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert seen == {"UWBENCH_TEST_EARLY": None, "UWBENCH_TEST_LATE": "after the server", "CUDA_VISIBLE_DEVICES": "3"}
    assert os.path.samefile(cwd, tmp_path)
    assert method == ctx.get_start_method()


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver here")
def test_workers_come_from_a_server_that_has_the_heavy_libraries_imported_already():
    ctx = worker_processes.context()
    assert ctx.get_start_method() == "forkserver"
    queue = ctx.Queue()
    p = ctx.Process(target=worker_processes.worker_entry, args=(dict(os.environ), _imported, queue))
    p.start()
    imported = queue.get(timeout=120)
    p.join(timeout=60)
    assert imported == {name: True for name in worker_processes.PRELOAD}


def _imported(queue) -> None:
    import sys

    queue.put({name: name in sys.modules for name in worker_processes.PRELOAD})

