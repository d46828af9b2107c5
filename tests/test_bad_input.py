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

from tests.helpers import ROOT
from tests.helpers.cli import run

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


def not_outside(*names: str) -> Callable[[Ctx, str], None]:
    """Nothing of these names was made in the test's folder or its parent (where a path escaping would go)."""
    def after(ctx: Ctx, err: str) -> None:
        for name in names:
            for where in (ctx.tmp, os.path.dirname(ctx.tmp), os.path.join(ctx.tmp, "mlruns")):
                assert not os.path.exists(os.path.join(where, name)), os.path.join(where, name)
        nothing_written(ctx, err)
    return after


def not_in_store(name: str) -> Callable[[Ctx, str], None]:
    def after(ctx: Ctx, err: str) -> None:
        assert not os.path.exists(os.path.join(ctx.tmp, "mlruns", name))
        assert not os.path.exists(os.path.join(ctx.tmp, name))
    return after


def report_out(out: Callable[[Ctx], str]) -> Callable[[Ctx], List[str]]:
    """``report --from-csv`` of a copy of a committed snapshot with ``--out OUT``."""
    def argv(ctx: Ctx) -> List[str]:
        folder = os.path.join(ctx.tmp, "snap", "table3_pixel_mnist")
        os.makedirs(folder)
        shutil.copy(os.path.join(SNAPSHOT, "runs.csv"), folder)
        return ["report", "--from-csv", os.path.join(folder, "runs.csv"), "--studies-dir", STUDIES, "--out", out(ctx)]
    return argv


def no_readme_at_root(ctx: Ctx, err: str) -> None:
    assert ROOT_README_BEFORE == os.path.exists("/README.md")
    nothing_written(ctx, err)


ROOT_README_BEFORE = os.path.exists("/README.md")


def damaged_checkpoint(kind: str) -> Callable[[Ctx], List[str]]:
    """``train --resume`` of a run whose checkpoint ``state.pt`` is cut short (``truncated``) or garbage."""
    def argv(ctx: Ctx) -> List[str]:
        import torch

        folder = os.path.join(ctx.tmp, "ckpt", "0123abcd")
        os.makedirs(folder)
        path = os.path.join(folder, "state.pt")
        torch.save({"version": 1, "config": {}, "weights": torch.zeros(4096)}, path)
        data = open(path, "rb").read()
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2] if kind == "truncated" else b"not a checkpoint\n" * 40)
        ctx.env["_CKPT"] = path
        return ["train", "--resume", "0123abcd", "--checkpoint-dir", os.path.join(ctx.tmp, "ckpt"),
                "--tracking-uri", ctx.uri]
    return argv


def checkpoint_kept(ctx: Ctx, err: str) -> None:
    assert os.path.exists(os.path.join(ctx.tmp, "ckpt", "0123abcd", "state.pt"))  # the user deletes it, not we


def _machine_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


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
    # the probe's own command: the copy task's defaults (batch 64, H=100, D=4) at T=100000 need over 32 GB
    pytest.param(Case("seq-len-100000", lambda ctx: ["train", "--task", "copy", "--model", "dnc", "--seq-len", "100000",
                                                     "--tracking-uri", ctx.uri, "--no-progress", "--no-system-metrics"],
                      ["the run needs at least 3", "GB (batch 64 x (T=100000 steps x controller 1000",
                       "but this machine's memory is", "--seq-len"]),
                 marks=pytest.mark.skipif(_machine_bytes() > 32 * 10**9, reason="this machine has over 32 GB")),
    Case("experiment-escapes", train("--experiment", "../escaped"),
         ["`--experiment` must be one folder name", "got '../escaped'", "give a plain name"],
         after=not_in_store("escaped")),
    Case("experiment-absolute", train("--experiment", "/tmp/uwbench-escaped-experiment"),
         ["`--experiment` must be one folder name", "it holds a path separator"],
         after=lambda ctx, err: not os.path.exists("/tmp/uwbench-escaped-experiment") or pytest.fail("made")),
    # uwbench train --resume: a damaged checkpoint, named with the fix; torch's unsafe advice never shown
    Case("checkpoint-truncated", damaged_checkpoint("truncated"),
         ["the checkpoint ", os.path.join("ckpt", "0123abcd", "state.pt"), "is damaged (", "cut short",
          f"delete {os.sep}", "to start run 0123abcd again from update 0"],
         absent=["weights_only=False", "PytorchStreamReader"], after=checkpoint_kept),
    Case("checkpoint-garbage", damaged_checkpoint("garbage"),
         ["is damaged (", "bytes that torch cannot read as a checkpoint", "to start run 0123abcd again"],
         absent=["weights_only=False"], after=checkpoint_kept),
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
    # ... a study value that would name a folder outside the report's
    Case("csv-study-escapes", snapshot(set_cell("study", 1, "../../escaped")),
         ["runs.csv, line 2: column 'study' holds '../../escaped', not a study id"], after=not_outside("escaped")),
    Case("csv-study-absolute", snapshot(set_cell("study", 1, "/tmp/uwbench-escaped-study")),
         ["runs.csv, line 2: column 'study' holds '/tmp/uwbench-escaped-study', not a study id"],
         after=lambda ctx, err: (nothing_written(ctx, err), not os.path.exists("/tmp/uwbench-escaped-study")
                                 or pytest.fail("made"))),
    # ... impossible numbers
    Case("csv-accuracy-above-1", snapshot(set_cell("test_accuracy", 2, "5.0")),
         ["runs.csv, line 3: column 'test_accuracy' holds '5.0', but 0 <= accuracy <= 1 must hold"],
         after=nothing_written),
    Case("csv-accuracy-negative", snapshot(set_cell("best_eval_accuracy", 5, "-3")),
         ["runs.csv, line 6: column 'best_eval_accuracy' holds '-3', but 0 <= accuracy <= 1 must hold"],
         after=nothing_written),
    Case("csv-time-negative", snapshot(set_cell("mean_seconds_per_100", 4, "-1.5")),
         ["runs.csv, line 5: column 'mean_seconds_per_100' holds '-1.5', but mean_seconds_per_100 >= 0 (a time)"],
         after=nothing_written),
    Case("csv-run-id-twice", snapshot(lambda rows: rows[:3] + [rows[2]] + rows[3:]),
         ["runs.csv, line 4: column 'run_id' holds", "the run of line 3 again", "remove one of the two"],
         after=nothing_written),
    Case("csv-nan-metric", snapshot(set_cell("test_accuracy", 1, "nan")),
         ["runs.csv, line 2: column 'test_accuracy' holds 'nan', not a finite number"], after=nothing_written),
    Case("csv-finished-without-value", snapshot(set_cell("test_accuracy", 7, "")),
         ["runs.csv, line 8: a finished run (", "has no test value (column 'test_accuracy' and 'test_mse' empty)"],
         after=nothing_written),
    # ... --out: never a system folder or the home folder; never a README.md of the user's
    Case("out-root", report_out(lambda ctx: "/"),
         ["`--out` must name a folder of its own, got '/': it is the root folder"], after=no_readme_at_root),
    Case("out-etc", report_out(lambda ctx: "/etc"), ["`--out` must name a folder of its own, got '/etc'"],
         after=nothing_written),
    Case("out-home", report_out(lambda ctx: os.path.expanduser("~")), ["it is the home folder itself"],
         after=nothing_written),
    # theory
    Case("theory-d-above-t", lambda ctx: ["theory", "bound", "--seq-len", "3", "--memory-size", "10"],
         ["`memory_size < seq_len` must hold", "got D=10, T=3", "regular writing keeps every one"]),
]


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
    ctx.env.pop("_CKPT", None)
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


# ---- paths: nothing outside the folders the program owns; a user's files neither replaced nor removed ----


def _snapshot_copy(folder) -> str:
    folder.mkdir(parents=True)
    for name in ("runs.csv", "curves.csv", "traces.csv"):
        if os.path.exists(os.path.join(SNAPSHOT, name)):
            shutil.copy(os.path.join(SNAPSHOT, name), folder / name)
    return str(folder / "runs.csv")


def test_an_out_folder_is_the_users_its_files_are_neither_replaced_nor_removed(tmp_path, capsys):
    study = os.path.basename(SNAPSHOT)
    csv_path = _snapshot_copy(tmp_path / "snap" / study)
    argv = ["report", "--from-csv", csv_path, "--studies-dir", STUDIES, "--out"]
    # a README.md of the user's where the index would go: refused before anything is written
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("# my notes\n", encoding="utf-8")
    capsys.readouterr()
    assert run([*argv, str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"{mine / 'README.md'} is not a reports index" in err and "give --out a folder of uwbench's own" in err
    assert sorted(os.listdir(mine)) == ["README.md"] and (mine / "README.md").read_text() == "# my notes\n"
    # a study folder of the user's (not a report): refused, its files as they were
    (mine / "README.md").unlink()
    (mine / study).mkdir()
    (mine / study / "notes.md").write_text("mine", encoding="utf-8")
    assert run([*argv, str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"{mine / study} is not a report folder" in err and "(notes.md)" in err and "give --out another folder" in err
    assert sorted(os.listdir(mine)) == [study] and os.listdir(mine / study) == ["notes.md"]
    # a report folder the user added files to: rebuilt, the user's files kept
    out = tmp_path / "out"
    assert run([*argv, str(out)]) == 0
    (out / study / "notes.md").write_text("mine", encoding="utf-8")
    (out / study / "mydata.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    assert run([*argv, str(out)]) == 0
    assert (out / study / "notes.md").read_text() == "mine" and (out / study / "mydata.csv").read_text() == "a,b\n1,2\n"
    assert sorted(os.listdir(out)) == ["README.md", study]  # its own study folder and index, nothing else
    assert sorted(os.listdir(tmp_path)) == ["mine", "out", "snap"]


def test_a_report_removes_the_stale_files_it_made_and_nothing_else(tmp_path):
    """A figure the previous build showed and this one does not draw is removed; a user's file stays."""
    study = os.path.basename(SNAPSHOT)
    folder = tmp_path / study
    shutil.copytree(SNAPSHOT, folder)
    readme = (folder / "README.md").read_text(encoding="utf-8")
    (folder / "README.md").write_text(readme + "\n![an old figure](old_figure.png)\n", encoding="utf-8")
    (folder / "old_figure.png").write_bytes(b"x")
    (folder / "memory_copy_t9_d9_dnc_gru.png").write_bytes(b"x")  # a report's figure name, of no cell here
    (folder / "user.png").write_bytes(b"x")
    assert run(["report", "--from-csv", str(folder / "runs.csv"), "--studies-dir", STUDIES]) == 0
    assert not (folder / "old_figure.png").exists() and not (folder / "memory_copy_t9_d9_dnc_gru.png").exists()
    assert (folder / "user.png").read_bytes() == b"x"


def test_a_temporary_file_left_by_kill_9_is_removed_at_the_next_write_of_its_folder(tmp_path):
    import signal
    import subprocess
    import sys

    study = os.path.basename(SNAPSHOT)
    folder = tmp_path / study
    shutil.copytree(SNAPSHOT, folder)
    killed = subprocess.run([sys.executable, "-c",
                             "import os, signal, sys\nfrom uwbench import atomic\n"
                             "with atomic.replacing(sys.argv[1]) as tmp:\n"
                             "    open(tmp, 'w').close()\n    os.kill(os.getpid(), signal.SIGKILL)\n",
                             str(folder / "README.md")], cwd=ROOT)
    assert killed.returncode == -signal.SIGKILL
    left = [n for n in os.listdir(folder) if n.startswith(".")]
    assert len(left) == 1 and left[0].startswith(".README.md.") and os.path.getsize(folder / left[0]) == 0
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:  # a writer still running keeps its file
        (folder / f".cells.csv.{live.pid}-abcdefgh.tmp.csv").write_text("")
        assert run(["report", "--from-csv", str(folder / "runs.csv"), "--studies-dir", STUDIES]) == 0
        assert [n for n in os.listdir(folder) if n.startswith(".")] == [f".cells.csv.{live.pid}-abcdefgh.tmp.csv"]
    finally:
        live.kill()
        live.wait()


# ---- study files ----


def test_validate_reports_each_bad_study_file_and_goes_on(tmp_path, capsys):
    """A key given twice, 20,000 nested brackets, text that is not UTF-8: each file's own one line, then the
    next file; a good file after them still checked."""
    dup = tmp_path / "dup.yaml"
    dup.write_text(open(QUICKSTART, encoding="utf-8").read().replace("\ntitle:", "\nid: other\ntitle:", 1),
                   encoding="utf-8")
    deep = tmp_path / "deep.yaml"
    deep.write_text("id: deep\nx: " + "[" * 20000 + "]" * 20000 + "\n", encoding="utf-8")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"id: latin\ntitle: caf\xe9\n")
    capsys.readouterr()
    assert run(["validate", str(dup), str(deep), str(latin), QUICKSTART]) == 1
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 4 and "Traceback" not in out.err, out
    assert lines[0].startswith(f"ERROR  {dup}: line ") and "key 'id' appears twice in one mapping (first on line" in lines[0]
    assert lines[1] == (f"ERROR  {deep}: line 2: `nesting depth <= 64` must hold (mappings and lists within each "
                        "other), got deeper: a study file needs a few levels; check the brackets")
    assert lines[2] == f"ERROR  {latin}: line 2: not UTF-8 text (invalid continuation byte at byte 20); save the file as UTF-8"
    assert lines[3].startswith(f"OK     {QUICKSTART}: quickstart:")
    # and a command that reads one says the same, as its one line
    assert run(["sweep", str(deep), *SMOKE]) == 2
    assert "`nesting depth <= 64` must hold" in capsys.readouterr().err


# ---- the memory estimate ----


def test_the_memory_estimate_lets_the_usual_runs_through():
    """Copy at T=50..500 and pixel MNIST at T=784, batch 64 (the paper's sizes), and every cell of every
    study file's profiles, need well under a gigabyte by the estimate; T=100000 over 32 GB."""
    from uwbench import spec
    from uwbench.training.config import resolve_run
    from uwbench.training.sizes import lower_bound

    def need(seq_len, **model):
        return lower_bound(resolve_run({"task": {"name": "copy", "seq_len": seq_len},
                                        "model": {"name": "dnc", **model}, "train": {"batch_size": 64}}))[0]

    for t in (50, 100, 500):
        assert need(t) < 10**9
    assert need(100000) > 32 * 10**9
    assert need(500, memory_size=50) < 10**9  # table3_pixel_mnist's T=784 is among the study files' cells
    for path in glob.glob(os.path.join(STUDIES, "*.yaml")):
        s = spec.load(path)
        for profile in sorted({"paper", *s.profiles}):
            for cell in spec.expand(s, profile, path).cells:
                assert lower_bound(resolve_run(cell.config))[0] < 10**9, (path, profile, cell.id)


# ---- the native kernel cache ----


def test_a_truncated_cached_kernel_library_is_detected_and_rebuilt(tmp_path, monkeypatch, capfd):
    """What a full disk or a kill while the library was copied leaves (a library cut short: loading it ends
    the process with SIGBUS): the next build notices it does not match its record and builds it again."""
    import subprocess
    import sys

    from uwbench import native

    if native.compiler() is None:
        pytest.skip("no C++ compiler")
    built = native.build()  # the machine's cache (built and recorded once, as every native run does)
    assert native.mismatch(built) is None
    cache = tmp_path / "cache"
    cache.mkdir()
    for path in (built, built + native.RECORD_SUFFIX):
        shutil.copy(path, cache)
    monkeypatch.setenv(native.CACHE_ENV, str(cache))
    target = str(cache / os.path.basename(built))
    size = os.path.getsize(target)
    with open(target, "r+b") as f:
        f.truncate(size // 3)
    capfd.readouterr()
    assert native.build() == target
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"uwbench: the cached native kernel library {target} is "
                                                   f"{size // 3} bytes, but {size} were built: rebuilding it")
    assert native.mismatch(target) is None and os.path.getsize(target) > size // 3
    loaded = subprocess.run([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1]).ln_lstm_saved_size",
                             target], capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr
    capfd.readouterr()
    assert native.build() == target and capfd.readouterr().err == ""  # matches now: loaded as it is


# ---- the Optuna dashboard ----


def test_the_dashboard_refuses_a_foreign_host_header_whatever_the_method(tmp_path):
    """DNS rebinding: a page elsewhere sends the user's browser to 127.0.0.1 with its own name as Host."""
    import http.client
    import json
    import socket
    import subprocess
    import sys
    import time

    import optuna

    journal = str(tmp_path / "s.journal")
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(journal))
    optuna.create_study(storage=storage, study_name="kept").optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "uwbench.dashboard", "--port", str(port), journal], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def request(method, path, host):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.putrequest(method, path, skip_host=True)
        conn.putheader("Host", host)
        conn.endheaders()
        response = conn.getresponse()
        body = response.read()
        conn.close()
        return response.status, body

    try:
        for _ in range(600):  # until it listens (or has ended)
            if proc.poll() is not None:
                pytest.fail(proc.stderr.read().decode())
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        status, studies = request("GET", "/api/studies", f"127.0.0.1:{port}")
        assert status == 200
        (sid,) = [s["study_id"] for s in json.loads(studies)["study_summaries"] if s["study_name"] == "kept"]
        for method in ("GET", "DELETE"):
            status, body = request(method, f"/api/studies/{sid}", f"evil.example:{port}")
            assert status == 403 and b"is not this machine's" in body
        status, _ = request("GET", "/api/studies", f"localhost:{port}")
        assert status == 200
        assert [s.study_name for s in optuna.get_all_study_summaries(storage)] == ["kept"]  # the DELETE did nothing
        status, _ = request("DELETE", f"/api/studies/{sid}", f"127.0.0.1:{port}")  # the user's own request does
        assert status == 204 and optuna.get_all_study_summaries(storage) == []
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()


# The library's entry points refuse what the command line refuses: a caller of the Python API cannot write a
# report into a system folder or put an experiment's artifacts outside the store's artifacts folder.
def test_the_report_functions_refuse_a_system_folder_as_out(tmp_path):
    from uwbench.report import report_from_csv, report_study

    folder = tmp_path / "snap" / "table3_pixel_mnist"
    folder.mkdir(parents=True)
    shutil.copy(os.path.join(SNAPSHOT, "runs.csv"), folder)
    for call in (lambda: report_from_csv(str(folder / "runs.csv"), out="/etc", studies_dir=STUDIES),
                 lambda: report_study(os.path.join(STUDIES, "table3_pixel_mnist.yaml"), out="/", source="csv")):
        with pytest.raises(ValueError, match="`--out` must name a folder of its own"):
            call()
    assert ROOT_README_BEFORE == os.path.exists("/README.md")
    assert sorted(os.listdir(folder)) == ["runs.csv"]  # nothing written beside the snapshot either


def test_an_experiment_name_that_is_a_path_is_refused_before_anything_is_made(tmp_path):
    from uwbench.tracking.mlflow import ensure_experiment

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()
    for name in ("../escaped", "/tmp/uwbench-escaped-experiment", ".."):
        with pytest.raises(ValueError, match="`experiment` must be one folder name"):
            ensure_experiment(name, uri)
    assert not (tmp_path / "escaped").exists() and not os.path.exists("/tmp/uwbench-escaped-experiment")
    assert ensure_experiment("plain", uri) == ensure_experiment("plain", uri)  # a plain name still works, once
