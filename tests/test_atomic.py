"""Files replaced whole (``uwbench.atomic``): a write leaves the old file or the new one, never a part of one,
even when the writer fails or is killed; the temporary file goes away on error, keeps the target's extension
and permissions, and the temporary files of writers that are gone are removed at the next write."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from uwbench import atomic


def hidden(folder) -> list:
    return sorted(n for n in os.listdir(folder) if n.startswith("."))


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "new" / "table.md"  # its folder is made
    assert atomic.write_text(str(path), "old\n") == str(path)
    atomic.write_text(str(path), "new\r\nlines\n")
    assert path.read_bytes() == b"new\r\nlines\n"  # line ends as given, no translation
    atomic.write_bytes(str(path), b"\x00\x01", sync=True)
    assert path.read_bytes() == b"\x00\x01"
    assert hidden(path.parent) == []


def test_an_error_in_the_block_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("old\n")
    with pytest.raises(RuntimeError, match="writer broke"):
        with atomic.replacing(str(path)) as tmp:
            with open(tmp, "w") as f:
                f.write("half of the new")
            assert os.path.exists(tmp) and path.read_text() == "old\n"  # nothing replaced yet
            raise RuntimeError("writer broke")
    assert path.read_text() == "old\n"
    assert hidden(tmp_path) == []
    with pytest.raises(RuntimeError):  # and a file that did not exist is not made
        with atomic.replacing(str(tmp_path / "never.csv")) as tmp:
            raise RuntimeError("writer broke")
    assert sorted(os.listdir(tmp_path)) == ["runs.csv"]


def test_the_temporary_is_hidden_beside_the_target_with_its_extension(tmp_path):
    path = tmp_path / "figure.png"
    with atomic.replacing(str(path)) as tmp:
        assert os.path.dirname(tmp) == str(tmp_path)
        name = os.path.basename(tmp)
        assert name.startswith(f".figure.png.{os.getpid()}-") and name.endswith(".tmp.png")
        assert atomic.TEMP.match(name)
        open(tmp, "wb").close()
        assert not path.exists()  # a reader sees no file until the rename
    assert path.exists()


def test_the_replaced_file_keeps_its_permissions_and_a_new_one_gets_the_umasks(tmp_path):
    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    os.chmod(kept, 0o640)
    atomic.write_text(str(kept), "new")
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o640
    old = os.umask(0o027)
    try:
        fresh = atomic.write_text(str(tmp_path / "fresh.txt"), "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o640  # 0666 & ~027, not mkstemp's 0600


def test_a_writer_killed_before_its_rename_leaves_the_old_file_and_its_temporary_goes_at_the_next_write(tmp_path):
    path = tmp_path / "README.md"
    path.write_text("the old report\n")
    killed = subprocess.run([sys.executable, "-c",
                             "import os, signal, sys\nfrom uwbench import atomic\n"
                             "with atomic.replacing(sys.argv[1]) as tmp:\n"
                             "    open(tmp, 'w').write('half of the new')\n"
                             "    os.kill(os.getpid(), signal.SIGKILL)\n", str(path)])
    assert killed.returncode == -signal.SIGKILL
    assert path.read_text() == "the old report\n"
    [left] = hidden(tmp_path)
    assert open(tmp_path / left).read() == "half of the new"
    atomic.write_text(str(tmp_path / "other.md"), "x")  # any write into the folder
    assert hidden(tmp_path) == []
    assert path.read_text() == "the old report\n"


def test_leftovers_of_writers_that_are_gone_are_removed_and_the_others_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid now runs nothing
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        names = {
            "dead": f".a.csv.{dead.pid}-abcdefgh.tmp.csv",
            "live": f".b.csv.{live.pid}-abcdefgh.tmp.csv",
            "mine": f".c.csv.{os.getpid()}-abcdefgh.tmp.csv",
            "old_no_pid": ".d.csv.abcdefgh.tmp.csv",
            "new_no_pid": ".e.csv.abcdefgh.tmp.csv",
            "not_ours": ".f.csv.tmp",
        }
        for name in names.values():
            (tmp_path / name).write_text("")
        long_ago = time.time() - atomic.OLD_TEMP_AGE - 60
        os.utime(tmp_path / names["old_no_pid"], (long_ago, long_ago))
        assert atomic.remove_leftovers(str(tmp_path)) == 2
        assert hidden(tmp_path) == sorted(names[k] for k in ("live", "mine", "new_no_pid", "not_ours"))
        assert atomic.remove_leftovers(str(tmp_path / "no such folder")) == 0
    finally:
        live.kill()
        live.wait()
