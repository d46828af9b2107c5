"""A study's run sets under two protocols side by side (``report/data/protocols.py``, ``report/verdicts/protocols.py``, ``report/rendering/protocols.py``): the fixture's runs as the
read-only decoder's, and a copy of them with other test values as the writing decoder's, in a snapshot
folder inside the report folder."""
from __future__ import annotations

import os

import pandas as pd
import pytest
import yaml

from uwbench import snapshot
from uwbench.report.data.protocols import RunSet, protocol_text
from uwbench.report.verdicts.protocols import points
from uwbench.report.rendering import render
from uwbench.report.data import study

from tests.helpers import FIXTURES

FIXTURE = os.path.join(FIXTURES, "report")


def _view(with_protocols=True):
    with open(os.path.join(FIXTURE, "study.yaml"), encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if with_protocols:
        data["protocols"] = {"label": "read-only decoder",
                             "others": [{"label": "decoder writes", "snapshot": "decoder_writes"}]}
    return study.from_mapping(data, "studies/fixture_copy.yaml")


def _with_protocol(frame: pd.DataFrame, writes: bool, shift: float = 0.0, prefix: str = "") -> pd.DataFrame:
    out = frame.copy()
    out["run_id"] = prefix + out["run_id"]  # another run set: other runs
    memory = out["model"].isin(["dnc", "ntm"])
    out["decoder_write"] = ["true" if writes else "false" if m else "" for m in memory]
    out["clip_mode"] = "per_tensor"
    out.loc[memory, "test_accuracy"] = out.loc[memory, "test_accuracy"] - shift
    return out


@pytest.fixture
def report(tmp_path):
    base = pd.read_csv(os.path.join(FIXTURE, "runs.csv"), dtype=str, keep_default_na=False)
    base["test_accuracy"] = pd.to_numeric(base["test_accuracy"], errors="coerce")
    folder = tmp_path / "fixture_copy"
    other = folder / "decoder_writes"
    other.mkdir(parents=True)
    _with_protocol(base, writes=True, shift=0.2, prefix="w").to_csv(other / "runs.csv", index=False)
    own = tmp_path / "own"
    own.mkdir()
    _with_protocol(base, writes=False).to_csv(own / "runs.csv", index=False)
    with open(os.path.join(FIXTURE, "curves.csv"), encoding="utf-8") as f:
        curves = f.read()
    (own / "curves.csv").write_text(curves, encoding="utf-8")
    lines = curves.splitlines(keepends=True)
    (other / "curves.csv").write_text(lines[0] + "".join("w" + line for line in lines[1:]), encoding="utf-8")
    snap = snapshot.Snapshot.from_dir(str(own))
    return render.build_report(_view(), snap, str(folder)), folder


def test_the_two_protocols_are_one_table_with_each_sets_values_and_welchs_p(report):
    rep, folder = report
    table = pd.read_csv(folder / "protocols.csv")
    uw = table.set_index("cell").loc["dnc_uw-copy-T50"]
    own = rep.summary.set_index("cell").loc["dnc_uw-copy-T50"]
    assert uw["this_mean"] == pytest.approx(own["mean"], abs=1e-4)
    assert uw["other1_mean"] == pytest.approx(own["mean"] - 20.0, abs=1e-4)  # 0.2 of accuracy = 20 points
    assert uw["this_n"] == uw["other1_n"] == own["n"]
    assert 0.0 <= uw["other1_p"] < 0.05  # the same spread shifted by 20 points: a clear difference
    assert uw["paper"] == pytest.approx(97.7)
    lstm = table.set_index("cell").loc["lstm-copy-T50"]
    assert lstm["other1_p"] == pytest.approx(1.0)  # no memory: the same runs under both protocols
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert "**Protocols side by side**" in text
    assert "read-only decoder: decoder_write=false, clip_mode=per_tensor (this report's runs)" in text
    assert "decoder writes: decoder_write=true, clip_mode=per_tensor (snapshot [`decoder_writes/runs.csv`]" in text
    assert (folder / "decoder_writes" / "runs.csv").exists()  # the other run set is read, never removed
    assert "Protocols side by side" in (folder / "report.html").read_text(encoding="utf-8")


def test_the_collapsed_runs_are_counted_per_cell_and_run_set(report):
    _, folder = report
    table = pd.read_csv(folder / "protocols.csv", dtype=str, keep_default_na=False).set_index("cell")
    assert table.loc["dnc_uw-copy-T50", "this_collapsed"] != ""  # a count wherever a cell has curves
    md = (folder / "protocols.md").read_text(encoding="utf-8")
    assert " of " in md and "collapsed late" in md


def test_a_missing_run_set_is_a_clear_error(tmp_path):
    snap = snapshot.Snapshot.from_dir(FIXTURE)
    with pytest.raises(FileNotFoundError, match="decoder writes.*no runs.csv.*protocols:"):
        render.build_report(_view(), snap, str(tmp_path / "fixture_copy"))


def test_without_protocols_there_is_no_table(tmp_path):
    snap = snapshot.Snapshot.from_dir(FIXTURE)
    render.build_report(_view(with_protocols=False), snap, str(tmp_path / "r"))
    assert not (tmp_path / "r" / "protocols.md").exists()
    assert protocol_text(snap.runs) == ""  # the fixture predates the protocol columns


def test_a_report_still_showing_the_other_run_set_says_so_instead_of_comparing_it_with_itself(tmp_path):
    folder = tmp_path / "fixture_copy"
    other = folder / "decoder_writes"
    other.mkdir(parents=True)
    base = pd.read_csv(os.path.join(FIXTURE, "runs.csv"), dtype=str, keep_default_na=False)
    base["test_accuracy"] = pd.to_numeric(base["test_accuracy"], errors="coerce")
    _with_protocol(base, writes=True).to_csv(other / "runs.csv", index=False)
    snap = snapshot.Snapshot.from_dir(str(other))  # the report's own runs are the other set's
    render.build_report(_view(), snap, str(folder))
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert "**Protocols side by side.** This report's runs are the run set 'decoder writes'" in text
    assert "decoder_write=true" in text and "read-only decoder, has no runs in this snapshot yet" in text
    assert not (folder / "protocols.csv").exists()


def test_the_protocols_figure_draws_every_seed_of_every_run_set_and_the_readme_shows_it(report):
    rep, folder = report
    assert (folder / "protocols.png").stat().st_size > 0
    assert "![" in (text := (folder / "README.md").read_text(encoding="utf-8")) and "(protocols.png)" in text
    own = snapshot.Snapshot.from_dir(str(folder))  # the report's own snapshot, as written
    other = snapshot.Snapshot.from_dir(str(folder / "decoder_writes"))
    pts = points(_view(), RunSet("read-only decoder", own.runs, own.curves),
                           [RunSet("decoder writes", other.runs, other.curves, "decoder_writes")])
    summary = rep.summary.set_index("cell")
    assert [label for label, _ in pts.sets] == ["read-only decoder", "decoder writes"]
    for cell, seeds in pts.sets[0][1].items():  # the study's own set: exactly the table's per-seed values
        assert seeds == pytest.approx(summary.loc[cell]["samples"])
    uw = "dnc_uw-copy-T50"
    assert [a - b for a, b in zip(pts.sets[0][1][uw], pts.sets[1][1][uw])] == pytest.approx([20.0] * len(pts.sets[0][1][uw]))
    assert pts.paper[uw] == pytest.approx(97.7)


def test_without_other_run_sets_there_is_no_protocols_figure(tmp_path):
    snap = snapshot.Snapshot.from_dir(FIXTURE)
    render.build_report(_view(with_protocols=False), snap, str(tmp_path / "r"))
    assert not (tmp_path / "r" / "protocols.png").exists()
    assert points(_view(), RunSet("own", snap.runs, snap.curves), []) is None
