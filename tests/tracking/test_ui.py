"""Browsing results: the MLflow UI links (uwbench.tracking.ui) and the optuna-dashboard target.

The links are checked as text, then against real servers on 127.0.0.1: `mlflow ui` over a store made by
the real trainer (cell runs with nested training runs), opened by headless Chromium at the link uwbench
prints, must show the runs table with the cell runs, and each cell run's page its metrics and its
nested runs; `optuna-dashboard` over a real journal file must serve the study and its trials."""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import textwrap
import urllib.request

import pytest

from tests.helpers.processes import CHROMIUM, free_port, run_chromium, stop_process_group, wait_until_answering
from uwbench.tracking import ui

from tests.helpers import ROOT

VENV_BIN = os.path.dirname(sys.executable)
ML = "workflowType=machine_learning"


# --------------------------------------------------------------------------------------------------
# The links as text
# --------------------------------------------------------------------------------------------------


def test_experiment_url_opens_the_runs_table_in_model_training_mode():
    assert ui.experiment_url("7") == f"http://127.0.0.1:5000/#/experiments/7?{ML}"
    assert ui.experiment_url(3, port=5055) == f"http://127.0.0.1:5055/#/experiments/3?{ML}"
    # a tracking server is its own UI
    assert ui.experiment_url("7", "http://10.0.0.5:5000/") == f"http://10.0.0.5:5000/#/experiments/7?{ML}"
    with pytest.raises(ValueError, match="experiment id"):
        ui.experiment_url(" ")


def test_serve_hint_names_the_command_for_that_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ui.serve_hint("sqlite:///runs/mlflow.db") == "make mlflow-ui"  # the store `make mlflow-ui` serves
    elsewhere = ui.serve_hint("sqlite:///other/mlflow.db")
    assert elsewhere.endswith(f"--backend-store-uri sqlite:///{tmp_path}/other/mlflow.db")
    assert "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false mlflow ui --host 127.0.0.1 --port 5000 --workers 1" in elsewhere
    assert ui.serve_hint("http://127.0.0.1:5055") == ""
    assert os.listdir(tmp_path) == []  # nothing was created


def test_study_hint_for_reports():
    md = ui.study_hint("quick<start>")
    assert md.startswith("`make mlflow-ui` serves") and "`quick<start>`" in md
    assert f"`http://127.0.0.1:5000/#/experiments/<id>?{ML}`" in md


def test_links_of_a_real_store(tracking_uri, capsys):
    from uwbench.tracking.mlflow import ensure_experiment

    b = ensure_experiment("study_b", tracking_uri)
    a = ensure_experiment("study_a", tracking_uri)
    found = ui.experiment_ids(tracking_uri)
    assert ("study_a", a) in found and ("study_b", b) in found and "Default" not in dict(found)
    assert [name for name, _ in found][-2:] == ["study_b", "study_a"]  # in id order
    assert ui.experiment_ids(tracking_uri, ["study_a", "nope"]) == [("study_a", a)]

    assert ui.main(["--tracking-uri", tracking_uri, "--port", "5055"]) == 0  # what `make mlflow-ui` prints
    out = capsys.readouterr().out
    assert out.startswith("MLflow UI: http://127.0.0.1:5055.")
    assert re.search(rf"^  study_a +http://127\.0\.0\.1:5055/#/experiments/{a}\?{ML}$", out, re.M)
    assert re.search(rf"^  study_b +http://127\.0\.0\.1:5055/#/experiments/{b}\?{ML}$", out, re.M)

    line = ui.link_line("study_a", tracking_uri=tracking_uri)
    assert ui.experiment_url(a) in line and "--backend-store-uri " + tracking_uri in line
    assert ui.link_line("nope", tracking_uri=tracking_uri) == "MLflow: no experiment 'nope' in this store yet"


def test_make_mlflow_ui_prints_the_links_of_the_store_it_serves():
    make = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    recipe = make.split("\nmlflow-ui:", 1)[1].split("\n\n", 1)[0]
    printer, server = recipe.split(" && ")
    assert "-m uwbench.tracking.ui --tracking-uri sqlite:///runs/mlflow.db --port $(MLFLOW_PORT)" in printer
    assert "mlflow ui --host 127.0.0.1 --port $(MLFLOW_PORT) --workers 1 --backend-store-uri sqlite:///runs/mlflow.db" in server
    assert "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false" in server
    assert f"MLFLOW_PORT ?= {ui.PORT}" in make  # the Makefile's default port is the links' default


def test_no_store_is_created_to_print_links(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path}/none/mlflow.db"
    assert ui.experiment_ids(uri) == []
    assert ui.main(["--tracking-uri", uri]) == 0
    assert "no experiments recorded yet" in capsys.readouterr().out
    assert not (tmp_path / "none").exists()


def test_train_and_sweep_print_the_link(tracking_uri, tmp_path, capsys):
    from uwbench.cli import main
    from uwbench.tracking.mlflow import ensure_experiment

    tiny = ["--set", "task.test_size=8", "--set", "train.eval_batches=1"]
    assert main(["train", "--task", "copy", "--model", "lstm", "--seq-len", "3", "--hidden-size", "4",
                 "--steps", "2", "--eval-every", "1", "--batch-size", "4", "--tracking-uri", tracking_uri,
                 "--no-progress", *tiny]) == 0
    exp_id = ensure_experiment("uwbench-train", tracking_uri)
    assert f"experiment 'uwbench-train': http://127.0.0.1:5000/#/experiments/{exp_id}?{ML}" in capsys.readouterr().out

    study = tmp_path / "linked.yaml"
    study.write_text(textwrap.dedent("""\
        id: linked
        title: test
        question: test
        artifact: none
        mode: faithful
        task: {name: copy, seq_len: 3, test_size: 8}
        fixed: {train: {steps: 2, batch_size: 4, eval_every: 1, eval_batches: 1}}
        cells:
          - {model: lstm, name: lstm, set: {model: {hidden_size: 4}}}
        seeds: [0]
        profiles: {cpu: {}, smoke: {}}
    """))
    assert main(["sweep", str(study), "--workers", "0", "--tracking-uri", tracking_uri, "--no-progress"]) == 0
    exp_id = ensure_experiment("linked", tracking_uri)
    assert capsys.readouterr().out.rstrip().endswith(
        f"experiment 'linked': http://127.0.0.1:5000/#/experiments/{exp_id}?{ML} "
        f"(start the UI with `{ui.serve_hint(tracking_uri)}`)")


# --------------------------------------------------------------------------------------------------
# Real servers
# --------------------------------------------------------------------------------------------------


def _start(cmd, url: str, env=None, timeout_s: float = 120):
    """Start a server in its own process group and wait until ``url`` answers 200."""
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True)
    wait_until_answering(proc, url, timeout_s, os.path.basename(cmd[0]))
    return proc


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200
        return r.read()


def _chromium(url: str, tmp_path, screenshot=None) -> str:
    """The DOM of ``url`` after its scripts ran (virtual time), as headless Chromium sees it; with
    ``screenshot`` (a path) also a 1600x1000 screenshot."""
    shot = ["--screenshot=" + str(screenshot), "--hide-scrollbars"] if screenshot else []
    dom, err, code = run_chromium(tmp_path, "--virtual-time-budget=20000", "--window-size=1600,1000", "--dump-dom",
                                  *shot, url, timeout_s=90, what=url)
    assert code == 0, err.decode(errors="replace")[-2000:]
    return dom.decode("utf-8", errors="replace")


def _texts(dom: str):
    """The page's visible text pieces, in order."""
    body = re.sub(r"<(script|style)\b[^>]*>.*?</\1>", " ", dom, flags=re.S)
    return [t for t in (html.unescape(p).strip() for p in re.split(r"<[^>]+>", body)) if t]


def _recorded_study(uri: str) -> str:
    """A study's worth of runs made by the real code: a parent run per cell, two training runs nested in
    each (the trainer's own metrics), tagged as a sweep tags them. Returns the experiment id."""
    from uwbench.tracking.mlflow import Run, ensure_experiment
    from uwbench.training.loop import train

    exp = ensure_experiment("uistudy", uri)
    for writer in ("regular", "uniform"):
        cell = f"dnc-{writer}"
        parent = Run("uistudy", run_name=cell, tags={"role": "cell", "cell": cell, "writer": writer},
                     uri=uri, experiment_id=exp)
        for seed in (0, 1):
            config = {"task": {"name": "copy", "seq_len": 4, "test_size": 8},
                      "model": {"name": "dnc", "hidden_size": 8, "memory_size": 2, "word_size": 4, "writer": writer},
                      "train": {"steps": 2, "batch_size": 4, "eval_every": 1, "eval_batches": 1, "seed": seed}}
            tags = {"role": "final", "cell": cell, "writer": writer, "memory_size": 2, "lr": 0.001, "clip": 10.0,
                    "seed": seed}
            child = Run("uistudy", run_name=f"{cell}/seed{seed}", tags=tags, parent_run_id=parent.run_id, uri=uri,
                        experiment_id=exp)
            assert train(config, run=child, progress=False).status == "finished"
        parent.log_metrics({"final_test_accuracy_mean": 0.5}, 0)
        parent.end()
    return exp


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); .ci/run installs it")
def test_the_printed_link_opens_the_runs_table_with_the_cell_runs(tracking_uri, tmp_path):
    exp = _recorded_study(tracking_uri)
    port = free_port()
    server = _start([os.path.join(VENV_BIN, "mlflow"), "ui", "--host", "127.0.0.1", "--port", str(port),
                     "--workers", "1", "--backend-store-uri", tracking_uri],
                    f"http://127.0.0.1:{port}/health",
                    env={"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true",
                         "HOME": str(tmp_path)})
    try:
        link = ui.experiment_url(exp, port=port)
        shot = tmp_path / "runs-table.png"
        dom = _chromium(link, tmp_path, screenshot=shot)
        from PIL import Image

        colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50, "the screenshot is (nearly) blank"
        texts = _texts(dom)
        assert texts[0].startswith("Runs - Experiment"), texts[:3]  # the runs table, not the GenAI overview
        assert "Run Name" in texts and "dnc-regular" in texts and "dnc-uniform" in texts
        i = texts.index("matching runs")
        assert texts[i - 1] == "6"  # 2 cell runs and their 4 nested training runs

        # without the parameter MLflow opens its GenAI overview: why every link carries it
        fresh = tmp_path / "fresh"  # a browser that has stored no view choice
        fresh.mkdir()
        plain = _texts(_chromium(f"http://127.0.0.1:{port}/#/experiments/{exp}", fresh))
        assert plain[0].startswith("Overview - Experiment") and "Run Name" not in plain

        # a cell run's page (linked from the table): its metrics and its nested training runs
        cell_pages = set(re.findall(rf'href="#/experiments/{exp}/runs/([0-9a-f]+)"', dom))
        assert len(cell_pages) == 2
        page = _texts(_chromium(f"http://127.0.0.1:{port}/#/experiments/{exp}/runs/{min(cell_pages)}?{ML}", tmp_path))
        cell = next(t for t in page if t in ("dnc-regular", "dnc-uniform"))
        assert "final_test_accuracy_mean" in page and page[page.index("final_test_accuracy_mean") + 1] == "0.5"
        assert "Child runs" in page and f"{cell}/seed0" in page and f"{cell}/seed1" in page
        # a training run's page: the trainer's metrics and the tags that compare cells
        from uwbench.tracking.mlflow import find_runs

        child = find_runs(exp, "tags.role = 'final' and tags.writer = 'uniform' and tags.seed = '0'", tracking_uri)[0]
        page = _texts(_chromium(f"http://127.0.0.1:{port}/#/experiments/{exp}/runs/{child['run_id']}?{ML}", tmp_path))
        for name in ("test_accuracy", "mean_seconds_per_100", "eval_accuracy", "train_loss"):
            assert name in page, name
        assert f"{child['metrics']['test_accuracy']:g}"[:4] in " ".join(page)
        for tag in ("writer", "memory_size", "lr", "clip"):
            assert tag in page, tag
    finally:
        stop_process_group(server.pid, grace_s=3, leader=server)


# --------------------------------------------------------------------------------------------------
# optuna-dashboard
# --------------------------------------------------------------------------------------------------


def test_make_dashboard_serves_a_journal_storage(tmp_path):
    """`make dashboard` runs `python -m uwbench.dashboard --host 127.0.0.1 --port P runs/optuna/<study>.journal`
    (optuna-dashboard behind a Host check); the
    same command over a real journal file (written as the sweeps write it) serves its studies and trials."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    exe = os.path.join(VENV_BIN, "optuna-dashboard")
    if not os.path.exists(exe):
        pytest.skip("optuna-dashboard is not installed (pip install -e '.[dev]')")
    journal = tmp_path / "optuna" / "quick.journal"
    journal.parent.mkdir()
    storage = JournalStorage(JournalFileBackend(str(journal)))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="quick.cpu.abc.dnc-uniform.search", storage=storage, direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(lambda t: -(t.suggest_float("train.lr", 1e-4, 1e-2, log=True) - 3e-3) ** 2, n_trials=3)

    make = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    assert "$(PY) -m uwbench.dashboard --host 127.0.0.1 --port $(DASHBOARD_PORT) $(STORAGE)" in make
    assert "STORAGE ?= runs/optuna/$(STUDY).journal" in make

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = _start([os.path.join(VENV_BIN, "python"), "-m", "uwbench.dashboard", "--host", "127.0.0.1",
                     "--port", str(port), str(journal)], base + "/api/meta", env={"HOME": str(tmp_path)})
    try:
        studies = json.loads(_fetch(base + "/api/studies"))["study_summaries"]
        assert [s["study_name"] for s in studies] == ["quick.cpu.abc.dnc-uniform.search"]
        detail = json.loads(_fetch(f"{base}/api/studies/{studies[0]['study_id']}"))
        assert len(detail["trials"]) == 3 and all(t["state"] == "Complete" for t in detail["trials"])
        assert {p["name"] for t in detail["trials"] for p in t["params"]} == {"train.lr"}
        assert b"<html" in _fetch(base + "/dashboard").lower()
    finally:
        stop_process_group(server.pid, grace_s=3, leader=server)
