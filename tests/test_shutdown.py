"""``uwbench.shutdown.exit_now``: the process ends with its code after what ``sys.exit`` would have done
first (threads joined, exit handlers run, buffered output flushed), and the ordinary way under a profiler."""
from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import atexit, sys, threading, time
    from uwbench.shutdown import exit_now

    out = sys.argv[1]
    atexit.register(lambda: open(out + ".atexit", "w").write("ran"))
    def late():
        time.sleep(0.3)
        open(out + ".thread", "w").write("ran")
    threading.Thread(target=late).start()  # not a daemon: the process waits for it
    sys.stdout.write("buffered, no newline")  # a pipe: block-buffered, so still in the buffer
    exit_now(7)
""")


def test_exit_now_keeps_what_an_ordinary_exit_does_first(tmp_path):
    script = tmp_path / "ends.py"
    script.write_text(SCRIPT)
    out = tmp_path / "mark"
    done = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 7, done.stderr
    assert done.stdout == "buffered, no newline"
    assert (tmp_path / "mark.atexit").read_text() == "ran"
    assert (tmp_path / "mark.thread").read_text() == "ran"


def test_under_a_profiler_the_process_ends_the_ordinary_way_and_the_profile_is_written(tmp_path):
    script = tmp_path / "ends.py"
    script.write_text(SCRIPT)
    profile = tmp_path / "run.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(profile), str(script), str(tmp_path / "m")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr  # cProfile itself ends with 0 after its script's sys.exit
    assert done.stdout == "buffered, no newline"
    assert profile.stat().st_size > 0
