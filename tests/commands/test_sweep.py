"""`uwbench sweep --set` and `--cells` on the quickstart smoke profile, into a real MLflow store: the
overrides reach every run, change the spec hash and are tagged on the cell runs; a subset of cells runs
only those cells, under the study's own spec hash, and the report names the cells not run; bad keys get
the same kind of error as `uwbench train --set`."""
from __future__ import annotations

import json
import os

import pytest

from tests.helpers import ROOT

QUICKSTART = os.path.join(ROOT, "studies", "quickstart.yaml")


def _sweep(*args) -> int:
    from uwbench.cli import main

    saved = dict(os.environ)
    try:
        return main(["sweep", QUICKSTART, "--profile", "smoke", "--workers", "0", "--no-progress", *args])
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _runs(uri: str):
    import mlflow

    mlflow.set_tracking_uri(uri)
    return mlflow.search_runs(experiment_names=["quickstart"])


def test_set_reaches_every_run_changes_the_hash_and_is_tagged(tracking_uri, capsys):
    from uwbench.spec import load_plan

    assert _sweep("--set", "model.hidden_size=6", "--set", "train.clip_mode=global", "--cells", "dnc-uniform-*",
                  "--tracking-uri", tracking_uri) == 0
    df = _runs(tracking_uri)
    plain = load_plan(QUICKSTART, "smoke").spec_hash
    overridden = load_plan(QUICKSTART, "smoke", overrides={"model": {"hidden_size": 6},
                                                           "train": {"clip_mode": "global"}}).spec_hash
    assert overridden != plain
    assert set(df["tags.spec_hash"]) == {overridden}
    parents = df[df["tags.role"] == "cell"]
    assert list(parents["tags.cell"]) == ["dnc-uniform-D2"]
    assert json.loads(parents["tags.overrides"].iloc[0]) == {"model": {"hidden_size": 6},
                                                             "train": {"clip_mode": "global"}}
    children = df[df["tags.role"].isin(["trial", "final"])]
    assert len(children) == 2 + 2  # smoke: 2 trials and 2 final seeds of the one cell
    assert set(children["params.model.hidden_size"]) == {"6"}
    assert set(children["params.train.clip_mode"]) == {"global"}
    assert set(children["tags.clip_mode"]) == {"global"}
    # the study's protocol (a read-only decoder on copy) reaches every run's config and its tags
    assert set(children["params.model.decoder_write"]) == {"False"}
    assert set(children["tags.decoder_write"]) == {"false"}
    assert {json.dumps(json.loads(t), sort_keys=True) for t in children["tags.overrides"]} == {
        json.dumps({"model": {"hidden_size": 6}, "train": {"clip_mode": "global"}}, sort_keys=True)}  # each run says so
    assert "--cells: 1 of 3 cells (dnc-uniform-D2)" in capsys.readouterr().out


@pytest.mark.slow  # two sweeps; `make test` keeps --set's tags and hash, and --cells' report
def test_report_set_picks_the_set_sweep_and_never_pools_it(tracking_uri, tmp_path, capsys):
    """Two run sets in one experiment, a --set sweep and a plain one: `uwbench report --set` with the
    sweep's values reports the first, plain `uwbench report` the second, never both."""
    import pandas as pd

    from uwbench.cli import main

    flags = ["--set", "model.hidden_size=6"]
    assert _sweep(*flags, "--cells", "dnc-uniform-*", "--tracking-uri", tracking_uri) == 0
    assert _sweep("--cells", "dnc-regular-*", "--tracking-uri", tracking_uri) == 0
    out = tmp_path / "reports"
    base = ["report", QUICKSTART, "--profile", "smoke", "--tracking-uri", tracking_uri, "--out", str(out), "--no-traces"]

    def cells_reported(*extra):
        capsys.readouterr()
        assert main(base + list(extra)) == 0
        runs = pd.read_csv(out / "quickstart" / "runs.csv")
        return set(runs.loc[runs["role"] == "final", "cell"]), capsys.readouterr().out

    cells, printed = cells_reported(*flags)
    assert cells == {"dnc-uniform-D2"} and "left out" not in printed
    readme = (out / "quickstart" / "README.md").read_text(encoding="utf-8")
    # the report's commands name the --set values, so they run and report this run set again
    assert "uwbench sweep studies/quickstart.yaml --profile smoke --set model.hidden_size=6" in readme
    assert "uwbench report studies/quickstart.yaml --profile smoke --set model.hidden_size=6" in readme
    assert "--profile smoke --set model.hidden_size=6 --cells 'dnc-regular-D2'" in readme
    rebuilt = tmp_path / "rebuilt"  # runs.csv alone (its overrides column) gives the same commands
    assert main(["report", "--from-csv", str(out / "quickstart" / "runs.csv"), "--out", str(rebuilt)]) == 0
    assert (rebuilt / "quickstart" / "README.md").read_text(encoding="utf-8") == readme
    cells, printed = cells_reported()
    assert cells == {"dnc-regular-D2"} and "left out" not in printed
    # a --set the sweep could not have had gets the sweep's own error, not a silent fallback
    assert main(base + ["--set", "model.hiden_size=6"]) == 2
    assert "no cell's model has the key 'hiden_size'" in capsys.readouterr().err


def test_cells_runs_a_subset_and_the_report_names_the_missing_cells(tracking_uri, tmp_path):
    from uwbench.report import report_study
    from uwbench.spec import load_plan

    assert _sweep("--cells", "dnc-uniform-*", "--cells", "dnc-cached_uniform-*", "--tracking-uri", tracking_uri) == 0
    df = _runs(tracking_uri)
    assert set(df["tags.cell"]) == {"dnc-uniform-D2", "dnc-cached_uniform-D2-L2"}
    assert set(df["tags.spec_hash"]) == {load_plan(QUICKSTART, "smoke").spec_hash}  # the study's own runs
    assert "tags.overrides" not in df.columns or df["tags.overrides"].isna().all()
    report = report_study(QUICKSTART, tracking_uri=tracking_uri, out=str(tmp_path / "reports"), traces=False,
                          index=False, profile="smoke", log=lambda _: None)
    readme = open(os.path.join(report.folder, "README.md"), encoding="utf-8").read()
    assert "**Cells not run (1):** dnc-regular-D2; run them with `uwbench sweep" in readme
    assert "--profile smoke --cells 'dnc-regular-D2'" in readme  # the command names the runs' profile


@pytest.mark.parametrize("args, message", [
    (["--set", "model.hiden_size=6"], r"--set model.hiden_size: no cell's model has the key 'hiden_size' "
                                      r"\(did you mean 'hidden_size'\?\)"),
    (["--set", "trainsteps=6"], r"--set key must be section.key"),
    (["--set", "train.steps=many"], r"train.steps must be an integer, got 'many'"),
    (["--set", "model.writer=uniform"], r"--set model.writer: model.writer is a grid axis"),
    (["--set", "train.lr=0.1"], r"--set train.lr: train.lr is searched by this study"),
    (["--cells", "lstm-*"], r"--cells 'lstm-\*' matches no cell of profile smoke; cells: dnc-regular-D2"),
])
def test_bad_set_and_cells_are_clear_errors(args, message, tracking_uri, capsys):
    import re

    assert _sweep(*args, "--tracking-uri", tracking_uri) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
