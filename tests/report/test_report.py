"""uwbench report: golden tables from a fixture snapshot, figures through their matplotlib objects, byte-identical
rebuilds, a report from real MLflow runs (with a memory trace), the CLI, and the HTML page in headless Chromium.

Regenerate the golden files after an intended change with ``UWBENCH_UPDATE_GOLDEN=1 pytest tests/report/test_report.py``.
"""
from __future__ import annotations

import filecmp
import io
import os
import shutil

import pandas as pd
import pytest
import yaml

from uwbench import snapshot
from uwbench.report.rendering import figures, index, render
from uwbench.report.data import study
from uwbench.report.data.traces import trace_arrays
from uwbench.report.analysis import timing
from uwbench.report.analysis.summary import FAILED, INCOMPLETE, MATCHES, NOT_RUN, OFF, OK, WITHIN, summarize, verdict
from uwbench.tabular import Table, to_latex, to_markdown
from uwbench.values import is_number
from tests.helpers.processes import CHROMIUM, run_chromium

from tests.helpers import FIXTURES, ROOT

FIXTURE = os.path.join(FIXTURES, "report")
EXPECTED = os.path.join(FIXTURES, "expected", "fixture_copy")
TINY_STUDY = os.path.join(FIXTURE, "studies", "report_tiny.yaml")
GOLDEN = ("accuracy.md", "accuracy.csv", "accuracy.tex", "time.md", "time.csv", "time.tex", "cells.csv")


def fixture_view():
    with open(os.path.join(FIXTURE, "study.yaml"), encoding="utf-8") as f:
        return study.from_mapping(yaml.safe_load(f), "studies/fixture_copy.yaml")


@pytest.fixture(scope="module")
def fixture_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reports") / "fixture_copy"
    snap = snapshot.Snapshot.from_dir(FIXTURE)
    return render.build_report(fixture_view(), snap, str(folder), keep_figures=True)


def _files(folder):
    return sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f)))


# --------------------------------------------------------------------------------------------------
# Golden tables
# --------------------------------------------------------------------------------------------------


def test_fixture_renders_to_the_committed_tables(fixture_report):
    if os.environ.get("UWBENCH_UPDATE_GOLDEN"):
        os.makedirs(EXPECTED, exist_ok=True)
        for name in GOLDEN:
            shutil.copy(os.path.join(fixture_report.folder, name), os.path.join(EXPECTED, name))
    for name in GOLDEN:
        with open(os.path.join(EXPECTED, name), encoding="utf-8") as f:
            expected = f.read()
        with open(os.path.join(fixture_report.folder, name), encoding="utf-8") as f:
            got = f.read()
        assert got == expected, f"{name} differs from tests/fixtures/expected/fixture_copy/{name}"


def test_summary_semantics(fixture_report):
    s = fixture_report.summary.set_index("cell")
    # trials never count; of two grid points the one with the better *evaluation* is kept (not the test)
    uw = s.loc["dnc_uw-copy-T50"]
    assert uw["n"] == 3 and uw["n_trials"] == 1 and uw["grid_points"] == 2 and uw["lr"] == pytest.approx(1e-3)
    assert uw["mean"] < 99.0
    # failed and never-run cells are shown as such
    assert s.loc["dnc-copy-T100", "state"] == FAILED
    assert s.loc["dnc_cuw-copy-T100", "state"] == NOT_RUN
    assert s.loc["dnc_cuw-copy-T50", "n_failed"] == 1
    md = open(os.path.join(fixture_report.folder, "accuracy.md"), encoding="utf-8").read()
    assert "failed (0/3)" in md and "not run" in md and "n=2, 1 failed" in md
    # diff = ours - paper, with the paper beside it
    assert uw["diff"] == pytest.approx(uw["mean"] - 97.7)
    assert fixture_report.status == OFF  # the worst cell decides
    red = timing.time_reductions(fixture_report.summary).set_index("cell")
    assert set(red.index) == {"dnc_uw-copy-T50", "dnc_cuw-copy-T50"}
    assert red.loc["dnc_uw-copy-T50", "reduction"] == pytest.approx(
        100 * (1 - s.loc["dnc_uw-copy-T50", "sec100_mean"] / s.loc["dnc-copy-T50", "sec100_mean"]))
    assert "Device: cpu" in open(os.path.join(fixture_report.folder, "time.md")).read() or \
        "(cpu)" in open(os.path.join(fixture_report.folder, "README.md")).read()


def test_verdicts():
    assert verdict(-0.5, None, 90.0, "accuracy", 5.0) == MATCHES
    assert verdict(-3.0, 2.0, 90.0, "accuracy", 5.0) == MATCHES  # within 2 std
    assert verdict(-3.0, 0.1, 90.0, "accuracy", 5.0) == WITHIN
    assert verdict(-9.0, 0.1, 90.0, "accuracy", 5.0) == OFF
    assert verdict(0.1, None, 1.0, "mse", 0.25) == WITHIN
    assert verdict(None, None, None, "accuracy", 5.0) == ""


def test_the_runs_of_two_sweep_backends_are_never_pooled():
    def final(backend, seed, status="finished"):
        return {"cell": "c", "role": "final", "status": status, "seed": seed, "backend": backend}

    rows = [final("optuna", 0), final("optuna", 1), final("ray", 0), final("ray", 1, "failed"),
            {"cell": "c", "role": "trial", "status": "finished", "seed": 0, "backend": "ray"}]
    kept, note = study.one_backend(rows)  # optuna has more finished final runs
    assert [r["backend"] for r in kept] == ["optuna", "optuna"] and "--backend ray" in note
    kept, note = study.one_backend(rows, "ray")
    assert {r["backend"] for r in kept} == {"ray"} and len(kept) == 3 and "optuna" in note
    with pytest.raises(ValueError, match="no runs of backend 'ray'.*backends with runs: optuna"):
        study.one_backend(rows[:2], "ray")
    tie = [final("ray", 0), final("optuna", 0)]
    assert study.one_backend(tie)[0] == [tie[1]]  # a tie goes to the first by name
    single = rows[:2] + [{"cell": "c", "role": "final", "status": "finished", "seed": 2, "backend": None},
                         {"cell": "c", "role": "final", "status": "finished", "seed": 3, "backend": float("nan")}]
    assert study.one_backend(single) == (single, "")  # one backend (and rows of none): kept as they are


def test_text_writers_escape():
    t = Table(title="a_b 50%", columns=["Model", "x|y"], rows=[["DNC+UW", "1.0 ± 0.1"]],
                     groups=[("", 1), ("g", 1)])
    md = to_markdown(t)
    assert "x\\|y" in md and md.count("\n") == 3
    tex = to_latex(t)
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"$\pm$" in tex and r"a\_b 50\%" in tex


def test_snapshot_text_is_stable():
    text = open(os.path.join(FIXTURE, "runs.csv"), encoding="utf-8").read()
    snap = snapshot.Snapshot(text)
    again = snapshot.runs_text(snap.runs.to_dict("records"))
    assert again == text  # parse -> format gives the same bytes
    assert snapshot.format_value(0.1) == "0.1" and snapshot.format_value(3.0) == "3" and snapshot.format_value(float("nan")) == ""


# --------------------------------------------------------------------------------------------------
# Figures, through their matplotlib objects
# --------------------------------------------------------------------------------------------------


def test_figures_have_titles_labels_and_series(fixture_report):
    figs = fixture_report.figures
    assert {"accuracy_vs_ratio", "time_reduction", "learning_curves", "theory_bound"} <= set(figs)

    ax = figs["accuracy_vs_ratio"].axes[0]
    assert "compression ratio" in ax.get_title().lower()
    assert ax.get_xlabel() == "compression ratio (D+1)/T" and "%" in ax.get_ylabel()
    assert len(ax.containers) == 3  # DNC, DNC+UW, DNC+CUW with error bars (LSTM has no memory)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"DNC", "DNC+UW", "DNC+CUW"} <= set(labels) and any("paper" in x for x in labels)

    ax = figs["time_reduction"].axes[0]
    assert ax.get_xlabel() == "memory slots D" and "(%)" in ax.get_ylabel() and "cpu" in ax.get_title()
    assert len([ln for ln in ax.get_lines() if ln.get_label() and not ln.get_label().startswith("_")]) == 2

    lc = figs["learning_curves"]
    panels = [a for a in lc.axes if a.get_visible()]
    assert [a.get_title() for a in panels] == ["Copy, T=50", "Copy, T=100"]
    assert all(a.get_xlabel() == "parameter updates" and "%" in a.get_ylabel() for a in panels)
    assert len(panels[0].get_lines()) == 4 and len(panels[1].get_lines()) == 2  # finished cells only
    assert len(panels[0].collections) >= 4  # a ± std band per cell with several seeds

    ax = figs["theory_bound"].axes[0]
    assert "g_λ" in ax.get_title() and ax.get_xlabel() == "compression ratio (D+1)/T"
    bound_lines = [ln for ln in ax.get_lines() if ln.get_label().startswith("bound")]
    assert len(bound_lines) == len(figures.LAMBDAS) and len(ax.containers) == 3

    heat = [n for n in figs if n.startswith("memory_")]
    assert heat == ["memory_copy_t50_d4_dnc_ln-lstm"]
    hf = figs[heat[0]]
    titles = [a.get_title() for a in hf.axes]
    assert "DNC: write weights" in titles and "DNC+UW: read weights" in titles and "write gate" in titles
    assert hf.get_suptitle().startswith("Memory operations: DNC, Copy, T=50, D=4")
    assert {a.get_xlabel() for a in hf.axes if a.get_title().endswith("weights")} == {"memory slot"}


def test_theory_bound_matches_theory_module(fixture_report):
    from uwbench.theory import g_lambda

    ax = fixture_report.figures["theory_bound"].axes[0]
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "bound g_λ, λ=0.9")
    x, y = line.get_xdata(), line.get_ydata()
    i = int(abs(x - 0.1).argmin())
    assert y[i] == pytest.approx(g_lambda(50, 4, 0.9), rel=1e-3)


def test_heatmap_from_a_model_trace():
    """A trace dict as uwbench.models.mann leaves it (tensors with a batch axis) draws directly."""
    torch = pytest.importorskip("torch")
    S, N = 8, 3
    trace = {"write_weights": torch.rand(2, S, N), "read_weights": torch.rand(2, S, 1, N),
             "write_gate": torch.rand(2, S), "write_mask": torch.tensor([True, False] * (S // 2)),
             "cache_attention": {1: torch.rand(2, 2), 3: torch.rand(2, 2)}, "encoder_steps": 4}
    arrays = trace_arrays(trace)
    assert arrays["write_weights"].shape == (S, N) and arrays["read_weights"].shape == (S, N)
    assert arrays["write_gate"].shape == (S, 1) and arrays["cache_attention"].shape == (2, 2)
    fig = figures.memory_heatmaps({"c": arrays}, {"c": "DNC+UW"}, "Memory operations: test")
    assert len([a for a in fig.axes if a.get_title().startswith("DNC+UW")]) == 2
    assert fig.axes[0].get_ylabel() == "encoder step" and fig.axes[0].images[0].get_array().shape == (4, N)


# --------------------------------------------------------------------------------------------------
# Determinism
# --------------------------------------------------------------------------------------------------


def test_rebuild_is_byte_identical(fixture_report, tmp_path):
    snap = snapshot.Snapshot.from_dir(FIXTURE)
    again = render.build_report(fixture_view(), snap, str(tmp_path / "fixture_copy"))
    names = _files(fixture_report.folder)
    assert names == _files(again.folder)
    _, mismatch, errors = filecmp.cmpfiles(fixture_report.folder, again.folder, names, shallow=False)
    assert not mismatch and not errors
    # a rebuild from the report's own snapshot, in place, changes nothing either
    before = {n: open(os.path.join(again.folder, n), "rb").read() for n in names}
    render.build_report(fixture_view(), snapshot.Snapshot.from_dir(again.folder), again.folder)
    assert {n: open(os.path.join(again.folder, n), "rb").read() for n in names} == before
    with open(os.path.join(again.folder, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "uwbench report --from-csv reports/fixture_copy/runs.csv" in readme
    assert "0123456789ab" in readme and "abc1234" in readme and "3 seeds instead" in readme


def test_png_metadata_has_no_version_or_date(fixture_report):
    from PIL import Image

    img = Image.open(os.path.join(fixture_report.folder, "accuracy_vs_ratio.png"))
    assert "Software" not in img.info and not any("date" in k.lower() for k in img.info)
    assert img.size[0] >= 500


def test_stale_figures_are_removed(tmp_path):
    """A figure a report names as its own (or its previous README showed) that this build does not draw is
    removed; any other file stays (the folder may hold the user's)."""
    folder = tmp_path / "fixture_copy"
    folder.mkdir()
    (folder / "memory_copy_t9_d9_dnc_gru.png").write_bytes(b"x")
    (folder / "old_figure.png").write_bytes(b"x")
    (folder / "keep.txt").write_text("not generated")
    render.build_report(fixture_view(), snapshot.Snapshot.from_dir(FIXTURE), str(folder))
    assert not (folder / "memory_copy_t9_d9_dnc_gru.png").exists()
    assert (folder / "old_figure.png").exists() and (folder / "keep.txt").exists()


# --------------------------------------------------------------------------------------------------
# From real MLflow runs
# --------------------------------------------------------------------------------------------------


QUICKSTART = os.path.join(ROOT, "studies", "quickstart.yaml")


@pytest.mark.skipif(not os.path.exists(QUICKSTART), reason="studies/quickstart.yaml is not there")
def test_report_from_a_real_sweep_then_rebuild_without_mlflow(tracking_uri, tmp_path, capsys):
    """`uwbench sweep studies/quickstart.yaml --profile smoke` into a fresh store, then `uwbench report`."""
    from uwbench.cli import main

    assert main(["sweep", QUICKSTART, "--backend", "optuna", "--profile", "smoke", "--workers", "0",
                 "--tracking-uri", tracking_uri, "--no-progress"]) == 0
    out = tmp_path / "reports"
    studies_dir = os.path.dirname(QUICKSTART)
    args = ["report", QUICKSTART, "--tracking-uri", tracking_uri, "--out", str(out), "--studies-dir", studies_dir]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "quickstart: 3/3 cells run" in printed and "report.html" in printed
    folder = out / "quickstart"
    snap = snapshot.Snapshot.from_dir(str(folder))
    cells = ["dnc-cached_uniform-D2-L2", "dnc-regular-D2", "dnc-uniform-D2"]
    assert sorted(set(snap.runs["cell"])) == cells and set(snap.runs["role"]) == {"trial", "final"}
    assert set(snap.runs["profile"]) == {"smoke"} and snap.runs["lr"].notna().all()
    finals = snap.runs[snap.runs["role"] == "final"]
    assert finals["test_accuracy"].notna().all() and finals["mean_seconds_per_100"].notna().all()
    assert set(snap.curves["run_id"]) == set(finals["run_id"])  # learning curves of the final runs
    assert set(snap.curves["metric"]) == {"eval_accuracy", "train_loss", "grad_norm_max"}
    # each cell's best checkpoint was replayed with tracing on: D = 2 slots
    traces = snap.traces()
    assert sorted(traces) == cells and all(t["arrays"]["write_weights"].shape[1] == 2 for t in traces.values())

    rep_summary = summarize(study.load(QUICKSTART, snap.runs), snap.runs).set_index("cell")
    for cell in cells:  # the tables count the final re-runs only, never the search trials
        n_final = int((finals["cell"] == cell).sum())
        assert rep_summary.loc[cell, "n"] == n_final and rep_summary.loc[cell, "n_trials"] >= 1
        mean = 100 * finals.loc[finals["cell"] == cell, "test_accuracy"].mean()
        assert rep_summary.loc[cell, "mean"] == pytest.approx(mean)
    names = _files(str(folder))
    for name in ("README.md", "report.html", "runs.csv", "curves.csv", "traces.csv", "accuracy.md", "accuracy.csv",
                 "accuracy.tex", "time.md", "cells.csv", "accuracy_vs_ratio.png", "learning_curves.png",
                 "theory_bound.png", "memory_copy_t4_d2_dnc_ln-lstm.png"):
        assert name in names, name
    # the time-reduction figure needs both sides of a pair to have runs that had a core to themselves, which a
    # loaded machine may not give: it is there exactly when some reduction could be computed
    reduced = timing.time_reductions(rep_summary.reset_index())["reduction"].map(is_number).any()
    assert ("time_reduction.png" in names) == bool(reduced)
    readme = (folder / "README.md").read_text()
    assert "(smoke)" in readme and "uwbench sweep studies/quickstart.yaml --profile smoke" in readme and "## Figures" in readme
    acc = (folder / "accuracy.md").read_text()
    assert "DNC+UW" in acc and "DNC+CUW" in acc and "(n=2)" in acc
    assert "[quickstart](quickstart/README.md)" in (out / "README.md").read_text()

    # rebuild without MLflow: the same bytes; and from MLflow again (traces replayed): the same bytes
    before = {n: (folder / n).read_bytes() for n in names}
    assert main(["report", "--from-csv", str(folder / "runs.csv"), "--out", str(out),
                 "--studies-dir", studies_dir]) == 0
    assert {n: (folder / n).read_bytes() for n in _files(str(folder))} == before
    assert main(args) == 0
    assert {n: (folder / n).read_bytes() for n in _files(str(folder))} == before


def test_report_all_uses_committed_snapshots_and_lists_unrun_studies(tmp_path, capsys):
    from uwbench.cli import main

    studies_dir = tmp_path / "studies"
    studies_dir.mkdir()
    shutil.copy(TINY_STUDY, studies_dir)
    other = (open(TINY_STUDY).read().replace("id: report_tiny", "id: report_other")
             .replace("Tiny copy (report test)", "Never run"))
    (studies_dir / "report_other.yaml").write_text(other)
    out = tmp_path / "reports"
    # a committed snapshot of report_tiny (the fixture's runs relabelled) and no MLflow store at all
    folder = out / "report_tiny"
    folder.mkdir(parents=True)
    snap = snapshot.Snapshot.from_dir(FIXTURE)
    rows = snap.runs[snap.runs["cell"].isin(["lstm-copy-T50"])].to_dict("records")
    for r in rows:
        r.update(study="report_tiny", cell="lstm")
    (folder / "runs.csv").write_text(snapshot.runs_text(rows))
    uri = f"sqlite:///{tmp_path / 'absent' / 'mlflow.db'}"
    assert main(["report", "--all", "--studies-dir", str(studies_dir), "--out", str(out),
                 "--tracking-uri", uri]) == 0
    assert not (tmp_path / "absent").exists()  # never creates a store to look for runs
    printed = capsys.readouterr().out
    assert "report_other: not run" in printed and "1 report(s) written" in printed
    index = (out / "README.md").read_text()
    assert "[report_tiny](report_tiny/README.md)" in index and "| not run |" in index.replace("  ", " ")
    acc = (folder / "accuracy.md").read_text()
    assert "40.0" in acc and "LSTM" in acc  # the spec's paper value beside ours
    first = {n: (folder / n).read_bytes() for n in _files(str(folder))}
    assert main(["report", "--all", "--studies-dir", str(studies_dir), "--out", str(out),
                 "--tracking-uri", uri]) == 0
    assert {n: (folder / n).read_bytes() for n in _files(str(folder))} == first


def test_the_index_lists_each_reports_claims_with_their_verdicts(tmp_path):
    (tmp_path / "verdicts.csv").write_text(
        "claim,where,verdict,claim_verdict\n"
        "uw-beats-regular,Copy T=30 D=2,yes,no\nuw-beats-regular,Reverse T=30 D=2,no,no\n"
        "dnc-beats-lstm,Copy T=30,yes,yes\n")
    assert index.claim_summary(str(tmp_path)) == ("UW beats regular writing on copy and reverse: **no**; "
                                                   "Regular DNC beats the LSTM: **yes**")
    assert index.claim_summary(str(tmp_path / "absent")) == ""


def test_cli_errors_are_clear(tmp_path, capsys):
    from uwbench.cli import main

    assert main(["report"]) == 2
    assert "give study files" in capsys.readouterr().err
    assert main(["report", "--from-csv", str(tmp_path / "nope" / "runs.csv")]) == 2
    assert "no runs.csv" in capsys.readouterr().err
    assert main(["report", TINY_STUDY, "--source", "mlflow", "--out", str(tmp_path),
                 "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"]) == 2
    assert "no MLflow experiment 'report_tiny'" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# The HTML page in a browser
# --------------------------------------------------------------------------------------------------


def test_html_page_is_self_contained(fixture_report):
    page = open(os.path.join(fixture_report.folder, "report.html"), encoding="utf-8").read()
    pngs = [f for f in os.listdir(fixture_report.folder) if f.endswith(".png")]
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") == len(pngs) >= 5
    assert 'src="http' not in page and "<table>" in page and "not run" in page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); .ci/run installs it")
def test_html_page_renders_in_headless_chromium(fixture_report, tmp_path):
    from PIL import Image

    shot = tmp_path / "shot.png"
    page = os.path.join(fixture_report.folder, "report.html")
    out, err, _ = run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,900", "--hide-scrollbars",
                               f"file://{page}", timeout_s=50, what="the screenshot")
    assert shot.exists(), f"no screenshot; chromium said: {err.decode(errors='replace')[-2000:]}"
    img = Image.open(shot).convert("RGB")
    assert img.size == (1200, 900)
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50, "the screenshot is (nearly) blank"
    # not one colour covering nearly everything (a blank or error page)
    assert max(c for c, _ in colours) < 0.97 * 1200 * 900


@pytest.mark.skipif(not os.path.exists(QUICKSTART), reason="studies/quickstart.yaml is not there")
def test_one_profile_at_its_current_spec_hash_per_report():
    """Cell ids do not depend on the profile: smoke runs and cpu runs must never be averaged together."""
    from uwbench import spec

    s = spec.load(QUICKSTART)
    h = {p: spec.expand(s, p, QUICKSTART).spec_hash for p in ("cpu", "smoke")}
    rows = [{"run_id": "a", "spec_hash": h["smoke"], "profile": "smoke"},
            {"run_id": "b", "spec_hash": h["cpu"], "profile": "cpu"},
            {"run_id": "c", "spec_hash": "stale0000000", "profile": "cpu"}]
    kept, note = study.select_run_set(rows, s)  # the default profile (cpu) first
    assert [r["run_id"] for r in kept] == ["b"] and note == ""
    kept, _ = study.select_run_set(rows, s, "smoke")
    assert [r["run_id"] for r in kept] == ["a"]
    kept, note = study.select_run_set(rows[2:], s, "cpu")
    assert [r["run_id"] for r in kept] == ["c"] and "earlier version" in note
    kept, _ = study.select_run_set(rows[:1], s)  # only smoke runs: those
    assert [r["run_id"] for r in kept] == ["a"]
    with pytest.raises(ValueError, match="profile 'gpu' is not defined"):
        study.select_run_set(rows, s, "gpu")


@pytest.mark.skipif(not os.path.exists(QUICKSTART), reason="studies/quickstart.yaml is not there")
def test_a_set_sweep_is_a_run_set_of_its_own():
    """--set values are part of the spec hash: the report picks the sweep they name, and with no run
    at a current hash it reports one run set (the largest), never every run pooled."""
    from uwbench import spec

    s = spec.load(QUICKSTART)
    steps = {"train": {"steps": 40}}
    h_cpu = spec.expand(s, "cpu", QUICKSTART).spec_hash
    h_set = spec.expand(s, "cpu", QUICKSTART, overrides=steps).spec_hash
    assert h_set != h_cpu
    final = {"role": "final", "status": "finished", "profile": "cpu"}
    rows = ([{"run_id": f"s{i}", "spec_hash": h_set, **final} for i in range(3)]
            + [{"run_id": f"o{i}", "spec_hash": "other0000000", **final} for i in range(2)])
    kept, note = study.select_run_set(rows, s, "cpu", overrides=steps)
    assert [r["run_id"] for r in kept] == ["s0", "s1", "s2"] and note == ""
    kept, note = study.select_run_set(rows, s)  # no --set given: the largest run set, and a note
    assert [r["run_id"] for r in kept] == ["s0", "s1", "s2"]
    assert "other0000000 (2 runs)" in note and "--set" in note
    kept, note = study.select_run_set(rows[3:] + rows[:1], s, "cpu")  # 2 runs at one hash, 1 at the other
    assert [r["run_id"] for r in kept] == ["o0", "o1"] and h_set in note
    # the view takes its cells from the profile the runs name when no hash matches
    frame = pd.DataFrame(rows)
    assert study.from_spec(s, QUICKSTART, frame).profiles == ["cpu"]
    assert study.from_spec(s, QUICKSTART, frame, steps).spec_hash == f"{h_set} (cpu)"


def test_regression_study_reports_mse(tmp_path):
    """A sinusoid-like study: MSE (lower is better), no percent, no theory figure."""
    rows = []
    for cell, writer, base in (("dnc-sin", "regular", 1.05), ("dnc_uw-sin", "uniform", 0.44)):
        for seed in range(2):
            rows.append({"study": "reg", "cell": cell, "role": "final", "status": "finished", "seed": seed,
                         "run_id": f"{cell}-{seed}", "task": "sinusoid", "model": "dnc", "controller": "ln_lstm",
                         "writer": writer, "seq_len": 100, "memory_size": 4, "lr": 1e-3, "clip": 10.0,
                         "test_mse": base + 0.01 * seed, "best_eval_mse": base, "mean_seconds_per_100": 5.0})
    view = study.from_mapping({"id": "reg", "metric": "mse", "cells": [
        {"id": "dnc-sin", "paper": 1.05}, {"id": "dnc_uw-sin", "paper": 0.44}]})
    rep = render.build_report(view, snapshot.Snapshot(snapshot.runs_text(rows)), str(tmp_path / "reg"), keep_figures=True)
    md = open(os.path.join(rep.folder, "accuracy.md"), encoding="utf-8").read()
    assert "Test MSE" in md and "1.055 ± 0.007 (n=2)" in md and "%" not in md
    assert rep.status == MATCHES and "theory_bound" not in rep.figures
    ax = rep.figures["accuracy_vs_ratio"].axes[0]
    assert ax.get_ylabel() == "test MSE"


def test_time_table_shows_cpu_seconds_when_the_snapshot_has_them(tmp_path):
    """Runs that record their own CPU seconds per 100 updates get a CPU column beside the wall one (a shared
    machine inflates only the wall time); a snapshot without that column gets the table without it."""
    def rows(cpu):
        out = []
        for cell, writer, wall, cpu_s in (("dnc-sin", "regular", 9.0, 6.0), ("dnc_uw-sin", "uniform", 6.0, 4.5)):
            for seed in range(2):
                r = {"study": "reg", "cell": cell, "role": "final", "status": "finished", "seed": seed,
                     "run_id": f"{cell}-{seed}", "task": "sinusoid", "model": "dnc", "controller": "ln_lstm",
                     "writer": writer, "seq_len": 100, "memory_size": 4, "lr": 1e-3, "clip": 10.0,
                     "test_mse": 0.5, "best_eval_mse": 0.5, "mean_seconds_per_100": wall + seed,
                     "torch_threads": 1}
                if cpu:
                    r["mean_cpu_seconds_per_100"] = cpu_s + 0.5 * seed
                out.append(r)
        return out

    view = study.from_mapping({"id": "reg", "metric": "mse", "cells": [{"id": "dnc-sin"}, {"id": "dnc_uw-sin"}]})
    rep = render.build_report(view, snapshot.Snapshot(snapshot.runs_text(rows(True))), str(tmp_path / "a"))
    md = open(os.path.join(rep.folder, "time.md"), encoding="utf-8").read()
    header = next(line for line in md.splitlines() if line.startswith("| Model"))
    assert "| CPU s / 100 |" in header and "6.25" in md and "4.75" in md
    # the regular twin's time beside a reduction is on the reduction's basis (CPU), not the wall seconds
    assert "| regular writing's CPU s / 100 |" in header
    uw = next(line for line in md.splitlines() if line.startswith("| DNC+UW"))
    cols = [c.strip() for c in uw.strip("|").split("|")]
    assert cols[-2:] == ["6.25", "24.0"] and "9.50" not in uw  # 100 × (1 − 4.75 / 6.25)
    assert "cpu_sec100_mean" in open(os.path.join(rep.folder, "time.csv"), encoding="utf-8").readline()
    text = open(os.path.join(rep.folder, "README.md"), encoding="utf-8").read()
    assert "× each run's threads" in text  # the snapshot records the thread count
    old = pd.read_csv(io.StringIO(snapshot.runs_text(rows(False)))).drop(columns=["mean_cpu_seconds_per_100"])
    rep = render.build_report(view, snapshot.Snapshot(old.to_csv(index=False)), str(tmp_path / "b"))
    md = open(os.path.join(rep.folder, "time.md"), encoding="utf-8").read()
    assert "CPU s / 100" not in md and "9.50 ± 0.71" in md and "6.50 ± 0.71" in md


def test_trace_targets_prefer_writer_comparisons():
    from uwbench.report.data import traces

    rows = []
    for i, (task, model, writer) in enumerate([("add", "ntm", "regular")] * 1 + [("reverse", "ntm", "regular")]
                                              + [("add", "dnc", w) for w in ("regular", "uniform", "cached_uniform")]
                                              + [("max", "dnc", w) for w in ("regular", "uniform", "cached_uniform")]
                                              + [("copy", "lstm", "none")]):
        rows.append({"cell": f"{model}_{writer}-{task}", "role": "final", "status": "finished", "seed": 0,
                     "run_id": f"r{i}", "task": task, "model": model, "controller": "ln_lstm", "writer": writer,
                     "seq_len": 50, "memory_size": 4})
    frame = snapshot.Snapshot(snapshot.runs_text(rows)).runs
    old = traces.MAX_GROUPS
    traces.MAX_GROUPS = 2
    try:
        picked = traces.trace_targets(frame, [r["cell"] for r in rows])
    finally:
        traces.MAX_GROUPS = old
    # the two DNC groups comparing three writers (max before add), never the LSTM
    assert sorted(picked) == sorted(f"dnc_{w}-{t}" for t in ("add", "max") for w in ("regular", "uniform",
                                                                                   "cached_uniform"))


def test_a_regression_trace_keeps_the_sequence_and_the_report_draws_it(tmp_path):
    """Sinusoid cells: the traced test sequence (input, truth, generated) and the write gate of every
    step become the appendix's generated-against-true figure, also after a rebuild from traces.csv."""
    torch = pytest.importorskip("torch")
    from uwbench.report.data import traces
    from uwbench.training.config import resolve_run
    from uwbench.training.loop import build_components

    config = {"task": {"name": "sinusoid", "seq_len": 12, "out_len": 6, "test_size": 4},
              "model": {"name": "dnc", "writer": "uniform", "hidden_size": 8, "memory_size": 3, "word_size": 4}}
    resolved = resolve_run(config)
    task, model = build_components(resolved, torch.device("cpu"))
    torch.save(model.state_dict(), tmp_path / "best.pt")
    arrays, why = traces.trace_checkpoint(resolved.as_dict(), str(tmp_path / "best.pt"))
    assert why == ""
    assert arrays["series_input"].shape == (12, 1) and arrays["series_target"].shape == (6, 1)
    assert arrays["write_gate"].shape == (18, 1)  # encoder and decoder steps
    batch = task.test_batches()[0]
    with torch.no_grad():
        expected = model.eval()(batch.inputs[:1], batch.decoder_inputs[:1])
    assert arrays["series_output"][:, 0] == pytest.approx(expected[0, :, 0].numpy(), abs=1e-6)
    assert arrays["series_target"][:, 0] == pytest.approx(batch.targets[0, :, 0].numpy())

    rows = [{"study": "reg", "cell": c, "role": "final", "status": "finished", "seed": 0, "run_id": c,
             "task": "sinusoid", "model": "dnc", "controller": "ln_lstm", "writer": w, "seq_len": 12,
             "memory_size": 3, "test_mse": 1.0, "best_eval_mse": 1.0, "mean_seconds_per_100": 1.0}
            for c, w in (("dnc_uw-sin", "uniform"), ("dnc-sin", "regular"))]
    snap = snapshot.Snapshot(snapshot.runs_text(rows), "",
                         snapshot.traces_text({c: {"run_id": c, "arrays": arrays} for c in ("dnc-sin", "dnc_uw-sin")}))
    view = study.from_mapping({"id": "reg", "metric": "mse", "cells": [{"id": "dnc-sin"}, {"id": "dnc_uw-sin"}]})
    rep = render.build_report(view, snap, str(tmp_path / "reg"), keep_figures=True)
    (name,) = [n for n in rep.figures if n.startswith("sequences_")]
    fig = rep.figures[name]
    assert fig.get_suptitle().startswith("Generated against true continuation: DNC, Sinusoid, T=12, D=3")
    curves = [a for a in fig.axes if a.get_ylabel() == "y"]
    assert [a.get_title() for a in curves] == ["DNC", "DNC+UW"]  # regular writing first
    assert all(len(a.get_lines()) == 4 for a in curves)  # input, truth, generated, the encoder/decoder line
    gates = [a for a in fig.axes if a.get_ylabel() == "write gate"]
    assert len(gates) == 2 and all(len(a.patches) == 18 for a in gates)
    assert os.path.exists(os.path.join(rep.folder, name + ".png"))
    again = snapshot.Snapshot.from_dir(rep.folder)  # the sequence survives traces.csv
    got = again.traces()["dnc-sin"]["arrays"]["series_output"]
    assert got == pytest.approx(arrays["series_output"], rel=1e-4, abs=1e-6)  # traces.csv keeps 6 decimals


def test_ratio_and_time_figures_draw_a_curve_per_writer_and_cache_size_over_several_memory_sizes(tmp_path):
    """The quickstart's grid: regular and uniform writing at D in {1, 2, 4}, cached uniform writing at the
    same D with L in {2, 5}: one accuracy curve per writer (CUW: per L) over three compression ratios, and
    one time-reduction curve per uniform / cached-uniform series over the three D."""
    rows, cells = [], []
    variants = [("regular", None), ("uniform", None), ("cached_uniform", 2), ("cached_uniform", 5)]
    for writer, cache in variants:
        for d in (1, 2, 4):
            cell = f"dnc-{writer}-D{d}" + (f"-L{cache}" if cache else "")
            cells.append({"id": cell})
            for seed in (1, 2):
                rows.append({"study": "grid", "cell": cell, "role": "final", "status": "finished", "seed": seed,
                             "run_id": f"{cell}-{seed}", "task": "copy", "model": "dnc", "controller": "ln_lstm",
                             "writer": writer, "seq_len": 9, "memory_size": d, "cache_size": cache,
                             "lr": 1e-3, "clip": 10.0, "test_accuracy": 0.5 + 0.05 * d + 0.01 * seed,
                             "best_eval_accuracy": 0.5, "mean_seconds_per_100": (3.0 if writer == "regular" else 2.0) + d})
    view = study.from_mapping({"id": "grid", "metric": "accuracy", "cells": cells})
    snap = snapshot.Snapshot(snapshot.runs_text(rows))
    rep = render.build_report(view, snap, str(tmp_path / "grid"), keep_figures=True)

    ax = rep.figures["accuracy_vs_ratio"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["DNC", "DNC+UW", "DNC+CUW (L=2)", "DNC+CUW (L=5)"]
    for container in ax.containers:  # three ratios (D+1)/T per series, in order
        x = list(container.lines[0].get_xdata())
        assert x == pytest.approx([2 / 9, 3 / 9, 5 / 9])

    ax = rep.figures["time_reduction"].axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert sorted(lines) == ["DNC+CUW (L=2)", "DNC+CUW (L=5)", "DNC+UW"]
    for ln in lines.values():
        assert list(ln.get_xdata()) == [1, 2, 4]
        # 100 (1 - (2 + D) / (3 + D))
        assert list(ln.get_ydata()) == pytest.approx([100 * (1 - (2 + d) / (3 + d)) for d in (1, 2, 4)])

    # the learning curves (built from the same rows: one curve per cell) name L too
    curves = [{"run_id": r["run_id"], "metric": "eval_accuracy", "step": step, "value": 0.5} for r in rows
              for step in (1, 2)]
    fig = figures.learning_curves(pd.DataFrame(curves), snap.runs, rep.summary)
    labels = [ln.get_label() for ln in fig.axes[0].get_lines()]
    assert len(labels) == len(set(labels)) == 12 and "DNC+CUW (L=5), D=4 (n=2)" in labels


def test_the_index_names_untested_claims_and_the_budget_that_would_test_them():
    from uwbench import spec as spec_mod

    path = os.path.join(ROOT, "studies", "table1_memorization.yaml")
    assert index.paper_budget_profiles(spec_mod.load(path), path) == ["paper", "paper100", "paper50"]  # cpu, smoke: fewer
    entry = {"id": "t1", "untested": ["UW beats regular writing on copy and reverse"], "steps": 2000,
             "paper_steps": 10000, "budget_profiles": ["paper50"], "path": "studies/t1.yaml"}
    text = index.untested_section([entry, {"id": "t2", "untested": []}])
    assert "**t1** (its runs made 2,000 updates, the paper's 10,000): UW beats regular" in text
    assert "--profile paper50" in text and "t2" not in text
    assert index.untested_section([{"id": "t2", "untested": []}]) == ""


def test_the_index_gives_each_untested_reports_reason_from_its_regimes_csv(tmp_path):
    (tmp_path / "regimes.csv").write_text(
        "cell,regime,steps,detail\n"
        "a,unknown,400,2 evaluation(s) in the last quarter (a slope needs 3)\n"
        "b,unknown,400,2 evaluation(s) in the last quarter (a slope needs 3)\n"
        "c,rising,400,still improving\nd,converged,400,flat\n")
    summary = index.regime_summary(str(tmp_path))
    assert summary == ("of its 4 cells, 1 rising (still improving over the last quarter); 2 unknown: "
                       "2 evaluation(s) in the last quarter (a slope needs 3)")
    entry = {"id": "t1", "untested": ["UW beats regular writing on copy"], "steps": 400, "paper_steps": None,
             "budget_profiles": ["paper"], "path": "studies/t1.yaml", "regimes": summary}
    text = index.untested_section([entry])
    assert "Why (`t1/regimes.csv`): of its 4 cells" in text and "A longer budget: `uwbench sweep" in text
    assert "the paper's" not in text.split("\n- ")[1]  # no paper budget to name
    assert index.regime_summary(str(tmp_path / "absent")) == ""


def test_the_index_names_a_time_claim_timed_on_wall_seconds_so(tmp_path):
    (tmp_path / "verdicts.csv").write_text(
        "claim,claim_text,where,winner,loser,verdict,claim_verdict\n"
        "uw-cuw-cut-time,UW and CUW cut training time (CPU seconds per 100 updates) against regular writing,"
        "Copy T=8 D=1,DNC+UW (wall),DNC (wall),inconclusive,inconclusive\n")
    assert index.claim_summary(str(tmp_path)) == (
        "UW and CUW cut training time (wall seconds per 100 updates) against regular writing: **inconclusive**")


def test_an_interrupted_run_makes_its_cell_incomplete_not_failed():
    """A run ended KILLED by an interruption (it resumes) is not a failure: a cell whose final runs are
    all interrupted reads incomplete, and an interrupted seed beside finished ones is not counted failed."""
    snap = snapshot.Snapshot.from_dir(FIXTURE)
    frame = snap.runs.copy()
    failed = (frame["cell"] == "dnc-copy-T100") & (frame["status"] == "failed")
    assert failed.any()
    frame.loc[failed, "status"] = "killed"
    s = summarize(fixture_view(), frame).set_index("cell")
    assert s.loc["dnc-copy-T100", "state"] == INCOMPLETE and s.loc["dnc-copy-T100", "n_failed"] == 0
    one = (frame["cell"] == "dnc_cuw-copy-T50") & (frame["status"] == "failed")
    frame.loc[one, "status"] = "killed"
    s = summarize(fixture_view(), frame).set_index("cell")
    assert s.loc["dnc_cuw-copy-T50", "n_failed"] == 0 and s.loc["dnc_cuw-copy-T50", "state"] == OK


def test_a_run_set_mixing_solo_and_population_training_says_so_and_keeps_the_column(tmp_path):
    """Runs trained in a population carry ``population_size``: runs.csv gains the column (only then), and the
    time section's notes count how the final runs were trained, saying the kinds are mixed."""
    from uwbench.report import report_from_csv

    committed = os.path.join(ROOT, "reports",
                             "table3_pixel_mnist")
    runs = pd.read_csv(os.path.join(committed, "runs.csv"), dtype=str, keep_default_na=False)
    final = runs.index[(runs["role"] == "final") & (runs["status"] == "finished")]
    together = final[: len(final) // 2]
    runs["population_size"] = ""
    runs.loc[together, "population_size"] = "3"
    src = tmp_path / "snap" / "table3_pixel_mnist"
    src.mkdir(parents=True)
    runs.to_csv(src / "runs.csv", index=False, lineterminator="\n")
    shutil.copy(os.path.join(committed, "curves.csv"), src)
    studies = os.path.join(os.path.dirname(committed), "..", "studies")
    report_from_csv(str(src / "runs.csv"), out=str(tmp_path / "out"), studies_dir=studies, index=False)
    folder = tmp_path / "out" / "table3_pixel_mnist"
    header = (folder / "runs.csv").read_text().splitlines()[0].split(",")
    assert header[-1] == "population_size"
    assert snapshot.Snapshot.from_dir(str(folder)).runs["population_size"].dropna().tolist() == [3.0] * len(together)
    time_md = (folder / "README.md").read_text().split("## Time", 1)[1]  # the time table and its notes
    alone = len(final) - len(together)
    assert f"Trained: {len(together)} in populations of 3, {alone} alone (of {len(final)} final runs)" in time_md
    assert "mixes runs trained alike and not" in time_md
    # the committed report, every run trained alone, has neither the column nor the note
    assert "population_size" not in open(os.path.join(committed, "runs.csv")).readline()
    assert "Trained:" not in open(os.path.join(committed, "README.md")).read()
