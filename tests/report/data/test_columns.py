"""A study's ``more_columns``: the default profile's report shows the paper's whole table, its own cells beside
those of another profile's run set (Table 1's T=50 and T=100 columns), each cell from its own runs."""
from __future__ import annotations

import csv
import os
import shutil

import pytest

from tests.helpers import ROOT

FOLDER = os.path.join(ROOT, "reports", "table1_memorization")


def _rows(path):
    with open(path, encoding="utf-8") as f:
        return {r["Model"]: r for r in csv.DictReader(f)}


def _rebuild(tmp_path, with_t100: bool) -> str:
    from uwbench.cli import main

    out = tmp_path / "reports"
    fresh = out / "table1_memorization"
    fresh.mkdir(parents=True)
    for name in ("runs.csv", "curves.csv", "traces.csv"):
        shutil.copy(os.path.join(FOLDER, name), fresh / name)
    for sub in ("decoder_writes", "authors_clip") + (("t100",) if with_t100 else ()):
        shutil.copytree(os.path.join(FOLDER, sub), fresh / sub)
    assert main(["report", "--from-csv", str(fresh / "runs.csv"), "--out", str(out),
                 "--studies-dir", os.path.join(ROOT, "studies")]) == 0
    return str(fresh)


def test_the_whole_table_holds_each_run_set_s_own_cells(tmp_path):
    fresh = _rebuild(tmp_path, with_t100=True)
    whole = _rows(os.path.join(fresh, "accuracy_whole.csv"))
    t50, t100 = _rows(os.path.join(FOLDER, "accuracy.csv")), _rows(os.path.join(FOLDER, "t100", "accuracy.csv"))
    assert set(whole) == set(t50) == set(t100)
    for model, row in whole.items():
        for task in ("Copy", "Reverse"):
            for key in ("mean", "std", "n", "paper", "state"):
                assert row[f"{task} T=50 {key}"] == t50[model][f"{task} {key}"], (model, task, key)
                assert row[f"{task} T=100 {key}"] == t100[model][f"{task} {key}"], (model, task, key)
    with open(os.path.join(fresh, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "**The paper's whole table**" in readme and "[`t100/`](t100/README.md) (profile paper100)" in readme


def test_without_the_other_run_set_there_is_no_whole_table(tmp_path):
    fresh = _rebuild(tmp_path, with_t100=False)
    assert not os.path.exists(os.path.join(fresh, "accuracy_whole.csv"))
    with open(os.path.join(fresh, "README.md"), encoding="utf-8") as f:
        assert "whole table" not in f.read()


def test_more_columns_must_name_another_profile():
    import yaml

    from uwbench.spec import schema

    with open(os.path.join(ROOT, "studies", "table1_memorization.yaml"), encoding="utf-8") as f:
        data = yaml.safe_load(f)
    data["more_columns"] = [{"profile": "paper500", "snapshot": "t500"}]
    with pytest.raises(ValueError, match=r"more_columns\[0\]\.profile 'paper500': must be a profile of this study"):
        schema.StudySpec.model_validate(data)


@pytest.mark.parametrize("snapshot", ["../t100", "..", "/tmp/t100", "a/b"])
def test_more_columns_reads_only_a_folder_inside_the_study_s(snapshot):
    from uwbench.spec import schema

    with pytest.raises(ValueError, match="snapshot"):
        schema.MoreColumns(profile="paper100", snapshot=snapshot)
