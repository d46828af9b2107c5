"""Search analysis of tuned studies: importance and the parallel-coordinates, slice and contour figures
drawn from a real Optuna journal and from the snapshot's trial rows agree (same ranking, same PNG bytes),
rebuilds are byte-identical, thin cells say why nothing is drawn, and the section is in a tuned report."""
from __future__ import annotations

import json
import math
import os

import pytest

from uwbench import snapshot
from uwbench.report.rendering import render
from uwbench.report.analysis import search
from uwbench.report.rendering import search as search_section
from uwbench.report.data import study
from uwbench.report.analysis.summary import summarize

from tests.helpers import ROOT

QUICKSTART = os.path.join(ROOT, "studies", "quickstart.yaml")
PROFILE = "smoke"
CELL = "dnc-regular-D2"

pytestmark = pytest.mark.skipif(not os.path.exists(QUICKSTART), reason="studies/quickstart.yaml is not there")


def objective(params):
    """lr matters (a peak at 10^-2.5), clip barely: the importance ranking is known."""
    return 0.9 - 0.5 * (math.log10(params["train.lr"]) + 2.5) ** 2 + 0.002 * params["train.clip"]


def _plan():
    from uwbench import spec

    return spec.expand(spec.load(QUICKSTART), PROFILE, QUICKSTART)


def _row(plan, cell_id, number, params, status, value, run_id):
    return {"study": plan.id, "cell": cell_id, "role": "trial", "status": status, "seed": 0,
            "trial_number": number, "run_id": run_id, "task": "copy", "model": "dnc", "controller": "ln_lstm",
            "writer": cell_id.split("-", 1)[1], "seq_len": 4, "memory_size": 2,
            "lr": params.get("train.lr"), "clip": params.get("train.clip"),
            "search_params": json.dumps(params, sort_keys=True), "device": "cpu", "spec_hash": plan.spec_hash,
            "profile": PROFILE, "backend": "optuna", "best_eval_accuracy": value,
            "test_accuracy": value if status == "finished" else None}  # a finished run has its test value


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    """A real Optuna journal (JournalStorage + JournalFileBackend) holding the search of one quickstart
    cell as the Optuna backend names it: 8 finished trials and a pruned one, each with its MLflow run id;
    and the snapshot (runs.csv text) of the same trials."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from uwbench.sweeps import space

    plan = _plan()
    path = str(tmp_path_factory.mktemp("optuna") / "quickstart.journal")
    storage = JournalStorage(JournalFileBackend(path))
    name = search.storage_study_name(plan.id, PROFILE, plan.spec_hash, CELL)
    st = optuna.create_study(study_name=name, storage=storage, direction="maximize",
                             sampler=optuna.samplers.RandomSampler(seed=3))

    def fn(trial):
        params = space.suggest(trial, plan.search)
        trial.set_user_attr("mlflow_run_id", f"run{trial.number:02d}")
        if trial.number == 4:
            raise optuna.TrialPruned()
        return objective(params)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    st.optimize(fn, n_trials=9)
    rows = []
    for t in st.trials:
        status = "finished" if t.state.name == "COMPLETE" else "pruned"
        rows.append(_row(plan, CELL, t.number, t.params, status, t.value, t.user_attrs["mlflow_run_id"]))
    return {"url": "journal:" + path, "rows": rows, "plan": plan}


def _analyse(rows, folder, storage=None, view=None):
    snap = snapshot.Snapshot(snapshot.runs_text(rows))
    view = view or study.load(QUICKSTART, snap.runs)
    summary = summarize(view, snap.runs)
    os.makedirs(folder, exist_ok=True)
    analysis = search.analyse(view, summary, snap.runs, storage=storage)
    files = search_section.write(analysis, str(folder)) if analysis is not None else []
    return analysis, files


def _cell(analysis, cell_id=CELL):
    return next(c for c in analysis.cells if c.cell == cell_id)


def _bytes(files):
    return {os.path.basename(f): open(f, "rb").read() for f in files}


def test_storage_and_csv_give_the_same_importance_and_figures(journal, tmp_path):
    from_store, files_a = _analyse(journal["rows"], tmp_path / "a", storage=journal["url"])
    from_csv, files_b = _analyse(journal["rows"], tmp_path / "b")
    a, b = _cell(from_store), _cell(from_csv)
    assert (a.source, b.source) == ("storage", "runs")
    assert a.n_trials == 9 and a.n_finished == b.n_finished == 8  # the pruned trial is not analysed
    assert search.ranking(from_store) == search.ranking(from_csv)
    assert search.ranking(from_csv)[CELL] == ["train.lr", "train.clip"]  # the objective's own ranking
    assert a.importance == pytest.approx(b.importance)
    assert sum(a.importance.values()) == pytest.approx(1.0)
    names = sorted(os.path.basename(f) for f in files_a if f.endswith(".png"))
    assert names == [f"search_{CELL.lower()}_{k}.png" for k in ("contour", "parallel", "slice")]
    assert _bytes(files_a) == _bytes(files_b)  # PNGs and importance.{md,csv}: the same bytes either way
    # the other cells have no trials in this snapshot, and say so
    assert _cell(from_csv, "dnc-uniform-D2").notes == ["no search trials recorded"]


def test_rebuild_gives_identical_png_bytes(journal, tmp_path):
    _, first = _analyse(journal["rows"], tmp_path / "a")
    _, again = _analyse(journal["rows"], tmp_path / "b")
    assert [os.path.basename(f) for f in first] == [os.path.basename(f) for f in again]
    assert _bytes(first) == _bytes(again)


def test_importance_table_and_csv(journal, tmp_path):
    analysis, files = _analyse(journal["rows"], tmp_path)
    md = (tmp_path / "importance.md").read_text()
    assert "| DNC " in md and "train.lr" in md and "train.clip" in md
    lines = (tmp_path / "importance.csv").read_text().splitlines()
    assert lines[0] == "cell,model,finished_trials,param,importance,rank"
    assert lines[1].startswith(f"{CELL},DNC,8,train.lr,") and lines[1].endswith(",1")
    section = search_section.markdown(analysis)
    assert section.startswith("## Search analysis") and f"search_{CELL.lower()}_contour.png" in section
    assert "fANOVA, seed 0" in section


def test_storage_missing_a_snapshot_trial_falls_back_to_the_snapshot(journal, tmp_path):
    plan = journal["plan"]
    extra = _row(plan, CELL, 99, {"train.lr": 0.004, "train.clip": 5}, "finished", 0.5, "not-in-the-journal")
    analysis, _ = _analyse(journal["rows"] + [extra], tmp_path, storage=journal["url"])
    cell = _cell(analysis)
    assert cell.source == "runs" and cell.n_finished == 9
    # a storage URL whose journal does not exist is not created
    missing = tmp_path / "none.journal"
    analysis, _ = _analyse(journal["rows"], tmp_path / "m", storage=f"journal:{missing}")
    assert _cell(analysis).source == "runs" and not missing.exists()


def test_thin_cells_say_why_nothing_is_drawn(tmp_path):
    plan = _plan()
    rows = [_row(plan, "dnc-regular", 0, {"train.lr": 0.003, "train.clip": 1}, "finished", 0.7, "r0"),
            _row(plan, "dnc-regular", 1, {"train.lr": 0.005, "train.clip": 5}, "failed", None, "r1"),
            _row(plan, "dnc-uniform", 0, {"train.lr": 0.003, "train.clip": 1}, "finished", 0.8, "u0"),
            _row(plan, "dnc-uniform", 1, {"train.lr": 0.006, "train.clip": 5}, "finished", 0.8, "u1")]
    analysis, files = _analyse(rows, tmp_path)
    one = _cell(analysis, "dnc-regular")
    assert one.n_finished == 1 and not one.figures and "need at least 2" in one.notes[0]
    flat = _cell(analysis, "dnc-uniform")
    assert not flat.importance and "same objective" in flat.notes[0]
    assert [n for n, _ in flat.figures] == ["search_dnc-uniform_parallel", "search_dnc-uniform_slice"]
    assert "need at least 2" in search_section.markdown(analysis)


def test_a_single_searched_parameter(tmp_path):
    view = study.from_mapping({"id": "one_param", "mode": "tuned", "cells": [
        {"id": "dnc-regular", "task": "copy", "model": "dnc", "writer": "regular", "seq_len": 4, "memory_size": 2}]})
    plan = _plan()
    rows = [dict(_row(plan, "dnc-regular", i, {"train.lr": lr}, "finished", v, f"r{i}"), study="one_param")
            for i, (lr, v) in enumerate([(0.001, 0.5), (0.003, 0.7), (0.009, 0.6)])]
    analysis, files = _analyse(rows, tmp_path, view=view)
    cell = _cell(analysis, "dnc-regular")
    assert cell.importance == {"train.lr": 1.0} and "one searched parameter" in cell.notes[0]
    assert [n for n, _ in cell.figures] == ["search_dnc-regular_parallel", "search_dnc-regular_slice"]


def test_a_parameter_no_trial_varied_gets_no_importance_and_no_contour(tmp_path):
    """Two searched parameters, one of them at the same value in every finished trial (a choice of one, or
    a short search): importance goes to the other one, the note says why, and no contour is drawn."""
    plan = _plan()
    rows = [_row(plan, "dnc-regular", i, {"train.lr": lr, "train.clip": 10}, "finished", v, f"r{i}")
            for i, (lr, v) in enumerate([(0.001, 0.5), (0.003, 0.7), (0.009, 0.6)])]
    analysis, files = _analyse(rows, tmp_path)
    cell = _cell(analysis, "dnc-regular")
    assert cell.params == ["train.lr"] and cell.importance == {"train.lr": 1.0}
    assert any("train.clip = 10" in n and "same value in every finished trial" in n for n in cell.notes)
    assert [n for n, _ in cell.figures] == ["search_dnc-regular_parallel", "search_dnc-regular_slice"]


def test_figures_leave_the_report_style_alone(journal, tmp_path):
    import matplotlib

    before = dict(matplotlib.rcParams)
    _analyse(journal["rows"], tmp_path)
    assert dict(matplotlib.rcParams) == before  # Optuna's ggplot style does not leak out


def test_only_tuned_studies_get_the_section(journal, tmp_path):
    faithful = study.from_mapping({"id": "quickstart", "mode": "faithful", "cells": []})
    analysis, files = _analyse(journal["rows"], tmp_path, view=faithful)
    assert analysis is None and files == []


def test_tuned_report_has_the_search_section(journal, tmp_path):
    snap = snapshot.Snapshot(snapshot.runs_text(journal["rows"]))
    view = study.load(QUICKSTART, snap.runs)
    folder = tmp_path / "quickstart"
    rep = render.build_report(view, snap, str(folder), search_storage=journal["url"])
    readme = (folder / "README.md").read_text()
    assert "## Search analysis" in readme and f"search_{CELL.lower()}_parallel.png" in readme
    assert readme.index("## Verdicts") < readme.index("## Search analysis") < readme.index("## Deviations")
    page = (folder / "report.html").read_text()
    assert "<h2>Search analysis</h2>" in page and page.count("data:image/png;base64") >= 3
    assert str(folder / "importance.csv") in rep.files
    # rebuilt from its runs.csv without the storage: the same bytes
    before = {n: (folder / n).read_bytes() for n in os.listdir(folder)}
    render.build_report(view, snapshot.Snapshot.from_dir(str(folder)), str(folder))
    assert {n: (folder / n).read_bytes() for n in os.listdir(folder)} == before


def test_the_study_files_space_is_kept_when_only_an_unsearched_setting_changed():
    """Runs made at an older spec hash (the study file gained a fixed setting since) are analysed over the
    profile's space when it holds every value they took; a value outside it falls back to an inferred space."""
    from uwbench.spec import load_plan

    plan = load_plan(os.path.join("studies", "pareto_copy.yaml"), "cpu")
    names = sorted(plan.search)
    inside = [search.SearchTrial(i, {n: _inside(plan.search[n]) for n in names}, 0.5) for i in range(3)]
    kept = search.distributions_for([plan], "0ld0ld0ld0ld", inside, "cpu")
    assert kept == search.distributions_for([plan], plan.spec_hash, inside)  # the file's own space
    assert search.distributions_for([plan], "0ld0ld0ld0ld", inside, "paper") == search.infer_distributions(inside)
    outside = inside + [search.SearchTrial(9, {**inside[0].params, names[0]: 1e9}, 0.5)]
    assert search.distributions_for([plan], "0ld0ld0ld0ld", outside, "cpu") == search.infer_distributions(outside)


def _inside(param):
    values = getattr(param, "values", None)
    return values[0] if values else param.low
