"""`uwbench restore`: a committed report's finished runs go back into a fresh MLflow store and Optuna storage, a
sweep there trains only what the report lacks, and a report made from the restored store is the report the
runs were committed in (run ids aside)."""
from __future__ import annotations

import csv
import os
import shutil

import pytest

from tests.helpers import ROOT

STUDY = os.path.join(ROOT, "studies", "table2_reasoning.yaml")  # faithful, DNC cells: traced in the report
TUNED = os.path.join(ROOT, "studies", "quickstart.yaml")


def _store(tmp_path, name: str, template: str) -> str:
    path = tmp_path / name / "mlflow.db"
    path.parent.mkdir()
    shutil.copy(template, path)
    return f"sqlite:///{path}"


def _sweep(capsys, uri: str, storage: str) -> str:
    from uwbench.cli import main

    saved = dict(os.environ)
    try:
        assert main(["sweep", STUDY, "--profile", "smoke", "--workers", "0", "--no-progress",
                     "--tracking-uri", uri, "--storage", storage]) == 0
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return capsys.readouterr().out if capsys is not None else ""


def _report(uri: str, out: str) -> str:
    from uwbench.report import report_study

    # the study shows its other protocol's runs beside its own: the report reads them from its folder
    shutil.copytree(os.path.join(ROOT, "reports", "table2_reasoning", "decoder_writes"),
                    os.path.join(out, "table2_reasoning", "decoder_writes"))
    report_study(STUDY, tracking_uri=uri, out=out, profile="smoke", index=False, log=lambda *_: None)
    return os.path.join(out, "table2_reasoning")


def _rows(path: str):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _plan():
    from uwbench.spec import load_plan

    return load_plan(STUDY, "smoke")


@pytest.fixture(scope="module")
def committed(tmp_path_factory, _migrated_mlflow_db):
    """The smoke profile swept into one store and reported: the report a repository commits (made once)."""
    base = tmp_path_factory.mktemp("committed")
    uri = _store(base, "store", _migrated_mlflow_db)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UWBENCH_RUNS_DIR", str(base / "runs"))
        _sweep(None, uri, str(base / "first.journal"))
        return _report(uri, str(base / "committed"))


def test_a_restored_report_sweeps_nothing_and_reports_the_same(committed, tmp_path, capsys, tracking_uri):
    from uwbench.sweeps.restore import restore

    plan = _plan()
    uri, storage = tracking_uri, str(tmp_path / "fresh.journal")
    done = restore(plan, committed, uri=uri, storage=storage, out=lambda *_: None)
    assert len(done.written) == plan.n_runs() and not done.present

    out = _sweep(capsys, uri, storage)
    assert f"{plan.n_runs()} runs planned, {plan.n_runs()} recorded" in out and "nothing to do" in out

    again = _report(uri, str(tmp_path / "again"))
    old, new = _rows(os.path.join(committed, "runs.csv")), _rows(os.path.join(again, "runs.csv"))
    ids = {}
    for a, b in zip(sorted(old, key=lambda r: (r["cell"], r["seed"])), sorted(new, key=lambda r: (r["cell"], r["seed"]))):
        ids[a["run_id"]] = b["run_id"]
        assert {k: v for k, v in a.items() if k != "run_id"} == {k: v for k, v in b.items() if k != "run_id"}
    assert len(ids) == plan.n_runs() and all(a != b for a, b in ids.items())  # new runs, the same rows
    for name, key in (("curves.csv", ("metric", "step", "value")), ("traces.csv", ("cell", "array", "row", "col", "value"))):
        want = sorted((ids[r["run_id"]],) + tuple(r[k] for k in key) for r in _rows(os.path.join(committed, name)))
        got = sorted((r["run_id"],) + tuple(r[k] for k in key) for r in _rows(os.path.join(again, name)))
        assert got == want and got, name  # the heatmaps of the restored runs come from their kept traces
    for name in ("accuracy.md", "regimes.csv", "cells.csv"):
        with open(os.path.join(committed, name), encoding="utf-8") as a, open(os.path.join(again, name), encoding="utf-8") as b:
            assert a.read() == b.read(), name

    twice = restore(plan, committed, uri=uri, storage=storage, out=lambda *_: None)
    assert not twice.written and len(twice.present) == plan.n_runs()


def test_a_partly_restored_study_trains_only_what_the_report_lacks(committed, tmp_path, capsys, tracking_uri):
    from uwbench.sweeps.restore import restore
    from uwbench.tracking import mlflow as tracking

    plan = _plan()
    part = tmp_path / "part"
    shutil.copytree(committed, part)
    rows = _rows(os.path.join(committed, "runs.csv"))
    dropped = rows[0]
    with open(part / "runs.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows[1:])
    uri, storage = tracking_uri, str(tmp_path / "fresh.journal")
    assert len(restore(plan, str(part), uri=uri, storage=storage, out=lambda *_: None).written) == plan.n_runs() - 1

    out = _sweep(capsys, uri, storage)
    assert f"{plan.n_runs() - 1} recorded" in out
    children = tracking.search_runs([plan.id], uri, filter_string="tags.role = 'final'")
    assert len(children) == plan.n_runs() and (children["tags.status"] == "finished").all()
    trained = children[children["tags.restored_run_id"].isna()]  # the one run the sweep trained
    assert list(trained["tags.cell"]) == [dropped["cell"]]


def test_a_run_that_reads_back_otherwise_is_refused(committed, tmp_path, monkeypatch, tracking_uri):
    from uwbench.sweeps import restore as restore_mod

    real = restore_mod._log_curves
    monkeypatch.setattr(restore_mod, "_log_curves", lambda run, curves: real(run, curves.iloc[:-1]))
    uri = tracking_uri
    with pytest.raises(restore_mod.RestoreError, match="other learning curves"):
        restore_mod.restore(_plan(), committed, uri=uri, storage=str(tmp_path / "j.journal"), out=lambda *_: None)


def test_what_cannot_be_restored_is_named(committed, tmp_path, tracking_uri):
    from uwbench.spec import load_plan
    from uwbench.sweeps.restore import RestoreError, candidates, restore
    from uwbench.snapshot import Snapshot

    uri = tracking_uri
    with pytest.raises(RestoreError, match="only faithful studies"):
        restore(load_plan(TUNED, "smoke"), committed, uri=uri, out=lambda *_: None)
    with pytest.raises(RestoreError, match="no runs.csv in"):
        restore(_plan(), str(tmp_path / "nowhere"), uri=uri, out=lambda *_: None)
    other = load_plan(STUDY, "smoke", overrides={"train": {"steps": 6}})  # another run set
    kept, left = candidates(other, Snapshot.from_dir(committed).runs, "optuna")
    assert not kept and sum(left.values()) == _plan().n_runs() and any("another run set" in k for k in left)


def test_the_command_restores_and_says_how_to_resume(committed, tmp_path, capsys, tracking_uri):
    from uwbench.cli import main

    uri = tracking_uri
    storage = str(tmp_path / "c.journal")
    assert main(["restore", STUDY, "--from", committed, "--profile", "smoke", "--tracking-uri", uri,
                 "--storage", storage]) == 0
    out = capsys.readouterr().out
    assert f"restored {_plan().n_runs()} run(s); 0 already in the stores (planned or run)" in out
    assert f"resume with: uwbench sweep {STUDY} --profile smoke --tracking-uri {uri} --storage {storage}" in out


def test_a_restore_killed_half_way_is_cleaned_up_by_the_next(committed, tmp_path, monkeypatch, tracking_uri):
    """What a kill while the second run's curves are written leaves (that run RUNNING, no trial for it): the
    next restore deletes it, says so, and ends with each run restored once and none RUNNING."""
    from uwbench.sweeps import restore as restore_mod
    from uwbench.tracking import mlflow as tracking

    plan, uri, storage = _plan(), tracking_uri, str(tmp_path / "k.journal")
    real, calls = restore_mod._log_curves, []

    def killed(run, curves):
        calls.append(run.run_id)
        if len(calls) == 2:
            run.end = lambda *args, **kwargs: None  # a killed process ends nothing
            raise KeyboardInterrupt("killed")
        real(run, curves)

    monkeypatch.setattr(restore_mod, "_log_curves", killed)
    with pytest.raises(KeyboardInterrupt):
        restore_mod.restore(plan, committed, uri=uri, storage=storage, out=lambda *_: None)
    half = calls[1]
    assert tracking.get_run(half, uri)["status"] == "RUNNING"
    monkeypatch.setattr(restore_mod, "_log_curves", real)
    lines = []
    done = restore_mod.restore(plan, committed, uri=uri, storage=storage, out=lines.append)
    assert done.removed == [half] and any(f"removed {half}" in line for line in lines), lines
    assert len(done.written) == plan.n_runs() - 1 and len(done.present) == 1
    children = tracking.search_runs([plan.id], uri, filter_string="tags.role = 'final'")
    assert len(children) == plan.n_runs() and len(set(children["tags.job_key"])) == plan.n_runs()
    assert (children["status"] == "FINISHED").all() and tracking.get_run(half, uri) is None


def _widened_study(tmp_path) -> str:
    """The study with its smoke profile given a second seed on the DNC+CUW cells (``cell_seeds``)."""
    with open(STUDY, encoding="utf-8") as f:
        text = f.read()
    old = '    cells: ["dnc-*-T50", "dnc_cuw-*-T50"]\n    seeds: [0]\n'
    assert old in text
    path = tmp_path / "studies" / "table2_reasoning.yaml"
    path.parent.mkdir()
    path.write_text(text.replace(old, old + '    cell_seeds: {"dnc_cuw-*": [0, 1]}\n'), encoding="utf-8")
    return str(path)


def test_a_profile_given_more_seeds_keeps_the_runs_it_had(committed, tmp_path, capsys, tracking_uri):
    """A profile given more seeds is another run set (its spec hash covers the seeds), but its runs on the old
    seeds are the same runs: restore takes them into it, and the sweep trains only the new seeds."""
    from uwbench.cli import main
    from uwbench.spec import load_plan
    from uwbench.sweeps.restore import RESTORED_SPEC_HASH, narrower_run_sets, restore
    from uwbench.snapshot import Snapshot
    from uwbench.tracking import mlflow as tracking

    narrow, wide = _plan(), load_plan(_widened_study(tmp_path), "smoke")
    assert wide.spec_hash != narrow.spec_hash and wide.n_runs() == narrow.n_runs() + 2
    assert narrower_run_sets(wide, Snapshot.from_dir(committed).runs) == {narrow.spec_hash}
    uri, storage = tracking_uri, str(tmp_path / "w.journal")
    lines = []
    done = restore(wide, committed, uri=uri, storage=storage, out=lines.append)
    assert len(done.written) == narrow.n_runs() and not done.left_out
    assert all(f"narrower run set {narrow.spec_hash}" in line for line in lines if "restored" in line)

    saved = dict(os.environ)
    try:
        assert main(["sweep", wide.path, "--profile", "smoke", "--workers", "0", "--no-progress",
                     "--tracking-uri", uri, "--storage", storage]) == 0
    finally:
        os.environ.clear()
        os.environ.update(saved)
    out = capsys.readouterr().out
    assert f"{wide.n_runs()} runs planned, {narrow.n_runs()} recorded" in out
    children = tracking.search_runs([wide.id], uri, filter_string=f"tags.spec_hash = '{wide.spec_hash}'")
    children = children[children["tags.role"] == "final"]
    assert len(children) == wide.n_runs() and (children["tags.status"] == "finished").all()
    restored = children[children[f"tags.{RESTORED_SPEC_HASH}"].notna()]
    assert set(restored[f"tags.{RESTORED_SPEC_HASH}"]) == {narrow.spec_hash} and len(restored) == narrow.n_runs()
    trained = children[children[f"tags.{RESTORED_SPEC_HASH}"].isna()]
    assert sorted(zip(trained["tags.cell"], trained["tags.seed"].astype(int))) == [
        ("dnc_cuw-add-T50", 1), ("dnc_cuw-max-T50", 1)]


def test_a_run_set_that_differs_in_more_than_seeds_is_not_widened(committed):
    from dataclasses import replace

    from uwbench.spec import load_plan
    from uwbench.spec.hash import plan_hash
    from uwbench.sweeps.restore import candidates, narrower_run_sets
    from uwbench.snapshot import Snapshot

    runs = Snapshot.from_dir(committed).runs
    other = load_plan(STUDY, "smoke", overrides={"train": {"steps": 6}})
    assert narrower_run_sets(other, runs) == set()
    # fewer seeds than the snapshot's is not wider: the snapshot's run set is not contained in it
    plan = _plan()
    less = replace(plan, seeds=[], cell_seeds={})
    less.spec_hash = plan_hash(less)
    kept, left = candidates(less, runs, "optuna")
    assert not kept and any("another run set" in k for k in left)
