"""Bad inputs and damaged files, tried as a user would: each gets one line saying what is wrong and the fix
(no traceback unless --debug), the documented exit code, and leaves no MLflow run RUNNING.

The table (``CASES``) runs each case in process through ``uwbench.cli.main`` on tiny settings, against a
private MLflow store and runs folder; after each, every SQLite MLflow store under the test's folder is read
for RUNNING runs. The fault tests below it: a torn Optuna journal resumes with every planned run finished
exactly once, and a report rebuilt from a copied snapshot leaves the committed reports alone.
"""
from __future__ import annotations

import csv
import glob
import hashlib
import os
import shutil
import sqlite3
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Sequence

import pytest

from uwbench.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDIES = os.path.join(ROOT, "studies")
QUICKSTART = os.path.join(STUDIES, "quickstart.yaml")
SNAPSHOT = os.path.join(ROOT, "reports", "table3_pixel_mnist")  # a small committed report (a few seconds)
TINY = ["--task", "copy", "--model", "dnc", "--seq-len", "4", "--hidden-size", "8", "--memory-size", "2",
        "--steps", "2", "--batch-size", "2", "--eval-every", "1", "--no-progress", "--no-system-metrics"]
SMOKE = ["--profile", "smoke", "--workers", "0", "--no-progress", "--no-system-metrics"]
ONE_CELL = ["--cells", "dnc-uniform-*"]  # 2 trials and 2 final runs of 4 updates


@dataclass
class Ctx:
    """What a case builds its command from: the test's folder and its MLflow store."""

    tmp: str
    uri: str
    env: Dict[str, str] = field(default_factory=dict)


@dataclass
class Case:
    id: str
    argv: Callable[[Ctx], List[str]]
    expect: Sequence[str]  # every one in the error output
    code: int = 2
    absent: Sequence[str] = ()  # none of these in it
    after: Callable[[Ctx, str], None] = lambda ctx, err: None  # more checks once it ran (with the output)


# ---- what the cases are made of ----

def train(*flags) -> Callable[[Ctx], List[str]]:
    return lambda ctx: ["train", *TINY, "--tracking-uri", ctx.uri, *flags]


def variant(ctx: Ctx, source: str, *edits) -> str:
    """A copy of a study file with text replaced (each ``(old, new)`` must occur), named by its id."""
    text = open(source, encoding="utf-8").read()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    folder = os.path.join(ctx.tmp, "studies")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, os.path.basename(source))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def quickstart_smoke(*lines) -> Callable[[Ctx], List[str]]:
    """A sweep of the quickstart study with ``lines`` added to its smoke profile."""
    added = "".join(f"    {line}\n" for line in lines)
    return lambda ctx: ["sweep", variant(ctx, QUICKSTART, ("  smoke:\n", "  smoke:\n" + added)), *SMOKE,
                        "--tracking-uri", ctx.uri]


def damaged_store(ctx: Ctx) -> str:
    """A migrated MLflow store whose first page (the schema) is overwritten."""
    path = os.path.join(ctx.tmp, "damaged", "mlflow.db")
    os.makedirs(os.path.dirname(path))
    shutil.copy(ctx.uri[len("sqlite:///"):], path)
    with open(path, "r+b") as f:
        f.seek(100)
        f.write(b"\xab" * 3900)
    return path


def _store_one_migration_back(ctx: Ctx, name: str, drop_a_table: bool) -> str:
    """A copy of the test's migrated MLflow store recorded as one schema migration behind MLflow's newest.
    With ``drop_a_table``, also missing a table: what a first command stopped while creating the store
    leaves (SQLite runs each migration step outside a transaction), so MLflow starts the creation again and
    meets what the stopped one made. Without, a store made by an older MLflow."""
    from alembic.script import ScriptDirectory
    from mlflow.store.db.base_sql_model import Base
    from mlflow.store.db.utils import _get_alembic_config

    path = os.path.join(ctx.tmp, name, "mlflow.db")
    os.makedirs(os.path.dirname(path))
    shutil.copy(ctx.uri[len("sqlite:///"):], path)
    scripts = ScriptDirectory.from_config(_get_alembic_config(f"sqlite:///{path}"))
    db = sqlite3.connect(path)
    db.execute("UPDATE alembic_version SET version_num = ?",
               (scripts.get_revision(scripts.get_current_head()).down_revision,))
    if drop_a_table:
        db.execute(f"DROP TABLE {'workspaces' if 'workspaces' in Base.metadata.tables else sorted(Base.metadata.tables)[-1]}")
    db.commit()
    db.close()
    return path


def half_made_store(ctx: Ctx) -> str:
    return _store_one_migration_back(ctx, "halfmade", drop_a_table=True)


def older_store(ctx: Ctx) -> str:
    return _store_one_migration_back(ctx, "older", drop_a_table=False)


def read_only_store(ctx: Ctx) -> str:
    """A migrated MLflow store this user may read but not write (file and folder without write permission)."""
    folder = os.path.join(ctx.tmp, "readonly")
    os.makedirs(folder)
    path = os.path.join(folder, "mlflow.db")
    shutil.copy(ctx.uri[len("sqlite:///"):], path)
    os.chmod(path, 0o444)
    os.chmod(folder, 0o555)
    return path


def journal_damaged_inside(ctx: Ctx) -> str:
    path = os.path.join(ctx.tmp, "journal", "quickstart.journal")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write('{"op_code": 0, "worker_id": "w"}\n{"op_code": 5, "worker_id": "w", "tri\n{"op_code": 1}\n')
    return path


def snapshot(edit: Callable[[List[List[str]]], List[List[str]]]) -> Callable[[Ctx], List[str]]:
    """``report --from-csv`` of a copy of a committed runs.csv changed by ``edit`` (rows, header first)."""
    def argv(ctx: Ctx) -> List[str]:
        folder = os.path.join(ctx.tmp, "snap", "table3_pixel_mnist")
        os.makedirs(folder)
        with open(os.path.join(SNAPSHOT, "runs.csv"), encoding="utf-8") as f:
            rows = edit(list(csv.reader(f)))
        with open(os.path.join(folder, "runs.csv"), "w", encoding="utf-8", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
        return ["report", "--from-csv", os.path.join(folder, "runs.csv"), "--studies-dir", STUDIES]
    return argv


def without(column: str):
    def edit(rows):
        i = rows[0].index(column)
        return [r[:i] + r[i + 1:] for r in rows]
    return edit


def set_cell(column: str, row: int, value: str):
    def edit(rows):
        rows[row][rows[0].index(column)] = value
        return rows
    return edit


def nothing_written(ctx: Ctx, err: str) -> None:
    assert os.listdir(os.path.join(ctx.tmp, "snap", "table3_pixel_mnist")) == ["runs.csv"]


def plugin_with_a_syntax_error(ctx: Ctx) -> List[str]:
    folder = os.path.join(ctx.tmp, "plug")
    os.makedirs(folder)
    with open(os.path.join(folder, "uwbad_plugin.py"), "w") as f:
        f.write("def broken(:\n    pass\n")
    ctx.env.update(UWBENCH_PLUGINS="uwbad_plugin", _SYS_PATH=folder)
    return ["ls"]


def swept_elsewhere(ctx: Ctx) -> List[str]:
    """The quickstart's one cell swept into the test's store; then the same command with a new store."""
    assert run(["sweep", QUICKSTART, *SMOKE, *ONE_CELL, "--tracking-uri", ctx.uri]) == 0
    return ["sweep", QUICKSTART, *SMOKE, *ONE_CELL, "--tracking-uri",
            f"sqlite:///{os.path.join(ctx.tmp, 'other', 'mlflow.db')}"]


def cell_runs_failed_with_the_error(ctx: Ctx, err: str) -> None:
    """The new store's cell runs are FAILED with the error; the message names the store the runs are in."""
    assert f"the store the sweep recorded them in ({ctx.uri})" in err
    db = sqlite3.connect(os.path.join(ctx.tmp, "other", "mlflow.db"))
    rows = db.execute("select r.status, t.value from runs r join tags t on t.run_uuid = r.run_uuid "
                      "where t.key = 'error'").fetchall()
    assert rows and all(s == "FAILED" and "holds none of them" in e for s, e in rows)


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


CASES = [
    # uwbench train: checked before the run exists
    Case("unknown-controller", train("--controller", "lstmm"), ["unknown controller 'lstmm'", "Did you mean 'lstm'"]),
    Case("device-tpu", train("--device", "tpu"), ["`device` must be cpu, cuda, cuda:N or auto, got 'tpu'"]),
    pytest.param(Case("device-cuda-no-gpu", train("--device", "cuda"),
                      ["this machine has no CUDA GPU", "--device cpu"]),
                 marks=pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU")),
    Case("lr-inf", train("--lr", "inf"), ["`lr <= 3.403e+38` must hold", "got inf"]),
    Case("lr-nan", train("--lr", "nan"), ["train.lr must be a number, got NaN"]),
    Case("lr-1e300", train("--lr", "1e300"), ["`lr <= 3.403e+38` must hold", "got 1e+300"]),
    Case("clip-inf", train("--clip", "inf"), ["`clip` must be finite, got inf", "train.clip_mode=none"]),
    Case("huge-memory", train("--memory-size", str(10**12)), ["the run needs at least", "memory 1000000000000 x 64",
                                                             "--memory-size"]),
    Case("huge-batch", train("--batch-size", str(10**13)), ["the run needs at least", "batch 10000000000000"]),
    Case("huge-seq-len", train("--seq-len", str(10**13)), ["the run needs at least", "T=10000000000000 steps"]),
    # MLflow stores
    Case("server-unreachable", lambda ctx: ["train", *TINY, "--tracking-uri", "http://127.0.0.1:9/"],
         ["connecting to the MLflow server http://127.0.0.1:9/", "cannot reach the MLflow server http://127.0.0.1:9/",
          "UWBENCH_CONNECT_TIMEOUT"]),
    Case("tracking-postgres-refused",  # at once, not after MLflow's minutes of retry warnings
         lambda ctx: ["train", *TINY, "--tracking-uri", "postgresql+psycopg://uw:secret@127.0.0.1:9/mlflow"],
         ["cannot reach the database server of the MLflow store postgresql+psycopg://uw:***@127.0.0.1:9/mlflow",
          "Connection refused", "UWBENCH_CONNECT_TIMEOUT"], absent=["secret", "Operation will be retried"]),
    Case("tracking-scheme", lambda ctx: ["train", *TINY, "--tracking-uri", "foo://bar"],
         ["cannot use the MLflow tracking URI 'foo://bar'", "give --tracking-uri sqlite:///PATH.db"]),
    Case("tracking-unwritable", lambda ctx: ["train", *TINY, "--tracking-uri",
                                             f"sqlite:///{os.path.join(ctx.tmp, 'mlruns', 'mlflow.db', 'x.db')}"],
         ["cannot use the MLflow store", "check that its folder exists and that this user may write there"]),
    pytest.param(Case("tracking-read-only",
                      lambda ctx: ["train", *TINY, "--tracking-uri", f"sqlite:///{read_only_store(ctx)}"],
                      ["cannot be written", os.path.join("readonly", "mlflow.db"), "write access"]),
                 marks=pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")),
    Case("tracking-damaged", lambda ctx: ["train", *TINY, "--tracking-uri", f"sqlite:///{damaged_store(ctx)}"],
         ["damaged", os.path.join("damaged", "mlflow.db"), "restore it from a backup"]),
    Case("tracking-half-made", lambda ctx: ["train", *TINY, "--tracking-uri", f"sqlite:///{half_made_store(ctx)}"],
         ["its tables were left half-made", "it holds no run, so nothing is lost by deleting it",
          f"{os.path.join('halfmade', 'mlflow.db')} and run the command again"], absent=["check that its folder exists"]),
    Case("tracking-older-mlflow", lambda ctx: ["train", *TINY, "--tracking-uri", f"sqlite:///{older_store(ctx)}"],
         ["made by another MLflow version", "mlflow db upgrade sqlite:///", os.path.join("older", "mlflow.db")],
         absent=["check that its folder exists"]),
    # uwbench sweep: Optuna storages, checked before any run exists
    Case("storage-scheme",
         lambda ctx: ["sweep", QUICKSTART, *SMOKE, "--tracking-uri", ctx.uri, "--storage", "foo://bar"],
         ["cannot open the Optuna storage 'foo://bar'", "--storage takes a journal file path"]),
    Case("storage-postgres-down", lambda ctx: ["sweep", QUICKSTART, *SMOKE, "--tracking-uri", ctx.uri, "--storage",
                                               "postgresql+psycopg://uw:secret@127.0.0.1:9/optuna"],
         ["cannot open the Optuna storage 'postgresql+psycopg://uw:***@127.0.0.1:9/optuna'"], absent=["secret"]),
    Case("journal-damaged-inside", lambda ctx: ["sweep", QUICKSTART, *SMOKE, "--tracking-uri", ctx.uri, "--storage",
                                                journal_damaged_inside(ctx)],
         ["quickstart.journal is damaged at line 2 of 3", "Restore the file from a backup", "head -n 1"]),
    Case("stores-disagree", swept_elsewhere,
         ["records 4 trained run(s) of study quickstart", "holds none of them", "--storage PATH.journal"],
         after=cell_runs_failed_with_the_error),
    # seeds, wherever they are given
    Case("final-seeds-repeated", quickstart_smoke("final_seeds: [1, 1]"),
         ["profiles.smoke.final_seeds has repeated seeds [1, 1]"]),
    Case("final-seeds-empty", quickstart_smoke("final_seeds: []"),
         ["profiles.smoke.final_seeds must list at least one seed, got []"]),
    Case("profile-seeds-repeated", quickstart_smoke("seeds: [3, 3]"), ["profiles.smoke.seeds has repeated seeds"]),
    Case("seeds-repeated", lambda ctx: ["sweep", variant(ctx, QUICKSTART, ("\nseeds: [0]\n", "\nseeds: [0, 0]\n")),
                                        *SMOKE, "--tracking-uri", ctx.uri], ["seeds has repeated seeds [0, 0]"]),
    Case("cell-seeds-repeated",
         lambda ctx: ["sweep", variant(ctx, os.path.join(STUDIES, "table2_reasoning.yaml"),
                                       ("  smoke:\n", '  smoke:\n    cell_seeds: {"dnc-*": [4, 4]}\n')),
                      *SMOKE, "--tracking-uri", ctx.uri],
         ["profiles.smoke.cell_seeds.dnc-* has repeated seeds [4, 4]"]),
    # study files and plugins
    Case("label-placeholder",
         lambda ctx: ["sweep", variant(ctx, QUICKSTART, ("DNC ({model.writer}, D={model.memory_size})",
                                                         "DNC ({model.cache_size})")),
                      *SMOKE, "--tracking-uri", ctx.uri],
         ["placeholder {model.cache_size} names a setting this group's cells do not have"], absent=["did you mean"]),
    Case("plugin-syntax-error", plugin_with_a_syntax_error,
         ["names the module 'uwbad_plugin', which has a syntax error", "uwbad_plugin.py, line 1"]),
    # uwbench report --from-csv: refused before anything is written
    Case("csv-no-accuracy", snapshot(without("test_accuracy")), ["runs.csv has no column 'test_accuracy'"],
         after=nothing_written),
    Case("csv-no-cell", snapshot(without("cell")), ["runs.csv has no column 'cell'"], after=nothing_written),
    Case("csv-no-study", snapshot(without("study")), ["runs.csv has no column 'study'"], after=nothing_written),
    Case("csv-junk", snapshot(lambda rows: [["a", "b"], ["1", "2"]]), ["has no column 'study', 'cell'"],
         after=nothing_written),
    Case("csv-not-a-number", snapshot(set_cell("test_accuracy", 3, "high")),
         ["runs.csv, line 4: column 'test_accuracy' holds 'high', not a number"], after=nothing_written),
    # theory
    Case("theory-d-above-t", lambda ctx: ["theory", "bound", "--seq-len", "3", "--memory-size", "10"],
         ["`memory_size < seq_len` must hold", "got D=10, T=3", "regular writing keeps every one"]),
]


def run(argv: List[str]) -> int:
    """``uwbench ARGV`` in this process, its environment as it was afterwards (a sweep sets variables)."""
    saved = dict(os.environ)
    try:
        return main(argv)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def running_runs(folder: str) -> List[str]:
    """Every RUNNING run of every readable MLflow SQLite store under ``folder`` (as store: run name)."""
    out = []
    for path in glob.glob(os.path.join(folder, "**", "*.db"), recursive=True):
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            rows = db.execute("select name from runs where status = 'RUNNING'").fetchall()
        except sqlite3.DatabaseError:  # damaged on purpose, or not an MLflow store
            continue
        out += [f"{path}: {name}" for (name,) in rows]
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_bad_input_is_one_line_with_its_fix_and_leaves_no_run_running(case, tracking_uri, tmp_path, monkeypatch,
                                                                          capsys):
    ctx = Ctx(str(tmp_path), tracking_uri)
    argv = case.argv(ctx)
    if "_SYS_PATH" in ctx.env:
        monkeypatch.syspath_prepend(ctx.env.pop("_SYS_PATH"))
    for key, value in ctx.env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    assert run(argv) == case.code
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and "Traceback" not in err, err
    for text in case.expect:
        assert text in errors[0] or text in err, f"{text!r} not in:\n{err}"
    for text in case.absent:
        assert text not in err, err
    case.after(ctx, err)
    assert running_runs(str(tmp_path)) == []


def test_seeds_a_sweep_would_hang_on_fail_validate(tmp_path, capsys):
    """`uwbench validate` refuses what the sweep refuses (the two final runs of `[1, 1]` share one job)."""
    path = variant(Ctx(str(tmp_path), ""), QUICKSTART, ("  smoke:\n", "  smoke:\n    final_seeds: [1, 1]\n"))
    assert run(["validate", path]) == 1
    assert "profiles.smoke.final_seeds has repeated seeds [1, 1]" in capsys.readouterr().out


def test_debug_shows_the_traceback_and_an_unexpected_error_says_how(monkeypatch, capsys):
    import uwbench.tracking.mlflow  # noqa: F401 - registers the MLflow stores' conditions with uwbench.errors
    from uwbench.errors import one_line

    argv = ["train", *TINY, "--device", "tpu"]
    with pytest.raises(ValueError, match="`device` must be"):
        run(["--debug", *argv])
    with pytest.raises(ValueError, match="`device` must be"):
        run([*argv, "--debug"])
    monkeypatch.setenv("UWBENCH_DEBUG", "1")
    with pytest.raises(ValueError, match="`device` must be"):
        run(argv)
    message, code = one_line(RuntimeError("something broke\nin detail"))
    assert code == 1 and message.startswith("RuntimeError: something broke (") and "--debug" in message
    assert "UWBENCH_DEBUG=1" in message and "\n" not in message
    # what SQLite says of a store it cannot write (root writes read-only files, so the table cannot make one)
    message, code = one_line(sqlite3.OperationalError("attempt to write a readonly database"))
    assert code == 2 and message.startswith("a database file cannot be written") and "write access" in message
    message, code = one_line(MemoryError())
    assert code == 2 and message.startswith("out of memory") and "--batch-size" in message


def test_a_long_bound_shows_its_progress(capsys):
    from uwbench.writer_bounds import schedule_table, work

    done = []
    schedule_table(2500, 4, 0.9, progress=done.append)
    assert sum(done) == work(2500) and len(done) > 2
    assert run(["theory", "bound", "--seq-len", "2500"]) == 0
    out = capsys.readouterr()
    assert "random writer's expected bound, T=2500" in out.err and "g_lambda(2501, 4)" in out.out


# ---- faults ----


def _job_runs(uri: str) -> List[tuple]:
    """(job_key, status) of every training run of the store."""
    db = sqlite3.connect(f"file:{uri[len('sqlite:///'):]}?mode=ro", uri=True)
    return db.execute("select t.value, r.status from runs r join tags t on t.run_uuid = r.run_uuid "
                      "where t.key = 'job_key' and r.lifecycle_stage = 'active'").fetchall()


def test_a_torn_journal_is_repaired_and_resumes_with_every_run_finished_once(tracking_uri, tmp_path, capsys):
    """What a kill or a full disk during an append leaves: the journal's last line cut in half. The next
    sweep cuts it off (keeping a copy), says so, and ends with each planned run finished exactly once."""
    argv = ["sweep", QUICKSTART, *SMOKE, *ONE_CELL, "--tracking-uri", tracking_uri]
    assert run(argv) == 0
    journal = os.path.join(str(tmp_path), "mlruns", "optuna", "quickstart.journal")
    whole = open(journal, "rb").read()
    last = whole[:-1].rsplit(b"\n", 1)[1]
    torn = whole[: len(whole) - 1 - len(last) // 2]
    with open(journal, "wb") as f:
        f.write(torn)
    lines = torn.count(b"\n") + 1
    capsys.readouterr()
    assert run(argv) == 0
    out = capsys.readouterr().out
    assert f"quickstart.journal: line {lines}, the last record, was incomplete" in out
    assert open(journal + ".torn-1", "rb").read() == torn  # the file as it was
    assert open(journal, "rb").read().startswith(torn[: torn.rfind(b"\n") + 1])
    jobs = _job_runs(tracking_uri)
    assert len(jobs) == 4 and len({k for k, _ in jobs}) == 4  # 2 trials + 2 final runs, none twice
    assert {s for _, s in jobs} == {"FINISHED"}
    capsys.readouterr()
    assert run(argv) == 0  # and the repaired journal reads as complete
    assert "nothing to do: every planned run is recorded" in capsys.readouterr().out
    assert running_runs(str(tmp_path)) == []


def _digests(folder: str) -> Dict[str, str]:
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "**", "*"), recursive=True)):
        if os.path.isfile(path):
            out[os.path.relpath(path, folder)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


def test_a_copied_snapshot_is_reported_beside_itself_and_the_committed_report_stays(tmp_path, monkeypatch, capsys):
    """Run from a clone (a folder with the committed reports/) on a copy of a committed snapshot: the report
    is written beside the copy, and not one byte under reports/ changes."""
    study = os.path.basename(SNAPSHOT)
    clone = tmp_path / "clone"
    shutil.copytree(SNAPSHOT, clone / "reports" / study)
    shutil.copy(os.path.join(ROOT, "reports", "README.md"), clone / "reports" / "README.md")
    copy = tmp_path / "copy" / study
    copy.mkdir(parents=True)
    for name in ("runs.csv", "curves.csv", "traces.csv"):
        if os.path.exists(os.path.join(SNAPSHOT, name)):
            shutil.copy(os.path.join(SNAPSHOT, name), copy / name)
    before = _digests(str(clone))
    monkeypatch.chdir(clone)
    assert run(["report", "--from-csv", str(copy / "runs.csv"), "--studies-dir", STUDIES]) == 0
    assert _digests(str(clone)) == before
    assert (copy / "README.md").exists() and (copy / "report.html").exists()
    assert not (tmp_path / "copy" / "README.md").exists()  # no index beside a folder that had none
    assert str(copy / "README.md") in capsys.readouterr().out
