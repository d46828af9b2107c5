"""A report made while a faithful profile still has seeds to run says which: per cell, the planned seeds no
final run has, and the command that runs them."""
from __future__ import annotations

import csv
import os
import shutil

from tests.helpers import ROOT

FOLDER = os.path.join(ROOT, "reports", "table2_reasoning")


def _report_without(tmp_path, cell: str, seed: str) -> str:
    from uwbench.cli import main

    out = tmp_path / "reports"
    fresh = out / "table2_reasoning"
    fresh.mkdir(parents=True)
    with open(os.path.join(FOLDER, "runs.csv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    kept = [r for r in rows if not (r["cell"] == cell and r["seed"] == seed)]
    assert len(kept) == len(rows) - 1
    with open(fresh / "runs.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(kept)
    for name in ("curves.csv", "traces.csv"):
        shutil.copy(os.path.join(FOLDER, name), fresh / name)
    shutil.copytree(os.path.join(FOLDER, "decoder_writes"), fresh / "decoder_writes")
    assert main(["report", "--from-csv", str(fresh / "runs.csv"), "--out", str(out),
                 "--studies-dir", os.path.join(ROOT, "studies")]) == 0
    with open(fresh / "README.md", encoding="utf-8") as f:
        return f.read()


def test_the_report_names_each_cell_s_seeds_not_run_yet(tmp_path):
    from uwbench.spec import load_plan

    plan = load_plan(os.path.join(ROOT, "studies", "table2_reasoning.yaml"), "paper50")
    readme = _report_without(tmp_path, "dnc-add-T50", "1")
    line = next(x for x in readme.splitlines() if x.startswith("**Seeds not run yet"))
    with open(os.path.join(FOLDER, "runs.csv"), encoding="utf-8") as f:
        have = {(r["cell"], int(r["seed"])) for r in csv.DictReader(f) if r["role"] == "final"}
    want = {c.id: [s for s in plan.seeds_of(c.id) if (c.id, s) not in have] for c in plan.cells}
    want["dnc-add-T50"] = sorted(want["dnc-add-T50"] + [1])
    want = {c: s for c, s in want.items() if s}
    n = sum(map(len, want.values()))
    assert f"({n} run{'s' if n != 1 else ''})" in line
    for cell, seeds in want.items():
        assert f"{cell} seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}" in line
    assert "`uwbench sweep studies/table2_reasoning.yaml --profile paper50`" in line
