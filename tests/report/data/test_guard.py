"""No report replaces a committed report of another profile (`uwbench.report.data.guard`): `uwbench report
--profile X` (what `make paper-cpu` runs) over a folder holding another profile's report is refused unless
`--force`, and `make paper-cpu` writes its reports outside reports/ in the first place."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

import pandas as pd
import pytest

from uwbench import snapshot
from uwbench.report.data import guard

from tests.helpers import FIXTURES, ROOT

FIXTURE = os.path.join(FIXTURES, "report")
TINY_STUDY = os.path.join(FIXTURE, "studies", "report_tiny.yaml")


def _committed(folder, profile: str) -> bytes:
    """A committed report of ``profile`` for report_tiny: the fixture's runs, relabelled."""
    folder.mkdir(parents=True)
    snap = snapshot.Snapshot.from_dir(FIXTURE)
    rows = snap.runs[snap.runs["cell"].isin(["lstm-copy-T50"])].to_dict("records")
    for r in rows:
        r.update(study="report_tiny", cell="lstm", profile=profile)
    text = snapshot.runs_text(rows)
    (folder / "runs.csv").write_text(text, encoding="utf-8")
    # a report's README, as `uwbench report` marks it (a folder of someone else's files is refused earlier)
    (folder / "README.md").write_text(f"{guard.GENERATED_MARKER} -->\nthe committed {profile} report\n",
                                      encoding="utf-8")
    return text.encode()


def test_the_guard_refuses_to_drop_a_profile_unless_forced(tmp_path):
    folder = tmp_path / "report_tiny"
    _committed(folder, "paper50")
    cpu = pd.DataFrame({"profile": ["cpu", "cpu"]})
    with pytest.raises(guard.ProfileClashError, match=r"holds the report of profile paper50.*--force"):
        guard.check(str(folder), cpu)
    guard.check(str(folder), cpu, force=True)
    guard.check(str(folder), pd.DataFrame({"profile": ["paper50"]}))  # the same profile: a rebuild
    guard.check(str(folder), pd.DataFrame({"profile": ["paper50", "cpu"]}))  # nothing dropped
    guard.check(str(tmp_path / "absent"), cpu)  # no report there yet
    (folder / "runs.csv").write_text("study,cell,profile\nreport_tiny,lstm,\n", encoding="utf-8")
    guard.check(str(folder), cpu)  # a snapshot whose runs name no profile is not guarded


def test_report_profile_cannot_replace_the_committed_report_of_another_profile(tracking_uri, tmp_path, capsys):
    """The path `make paper-cpu` takes (`uwbench report STUDY --profile P`, runs from MLflow) over a folder
    holding another profile's report: refused, the folder untouched; --out elsewhere or --force write it."""
    from uwbench.cli import main

    assert main(["sweep", TINY_STUDY, "--profile", "smoke", "--workers", "0", "--tracking-uri", tracking_uri,
                 "--no-progress", "--no-system-metrics"]) == 0
    out = tmp_path / "reports"
    folder = out / "report_tiny"
    committed = _committed(folder, "paper50")
    studies_dir = os.path.dirname(TINY_STUDY)
    base = ["report", TINY_STUDY, "--tracking-uri", tracking_uri, "--studies-dir", studies_dir, "--no-traces"]
    capsys.readouterr()

    assert main(base + ["--profile", "smoke", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds the report of profile paper50" in err and "--force" in err and "--out DIR" in err
    assert (folder / "runs.csv").read_bytes() == committed  # untouched
    assert (folder / "README.md").read_text().endswith("the committed paper50 report\n")
    # without --profile the selection finds only the smoke runs in this store: refused the same way
    assert main(base + ["--all", "--out", str(out)]) == 2
    assert (folder / "runs.csv").read_bytes() == committed

    elsewhere = tmp_path / "runs" / "reports"
    assert main(base + ["--profile", "smoke", "--out", str(elsewhere)]) == 0
    assert guard.folder_profiles(str(elsewhere / "report_tiny")) == {"smoke"}
    assert (folder / "runs.csv").read_bytes() == committed

    assert main(base + ["--profile", "smoke", "--out", str(out), "--force"]) == 0
    assert guard.folder_profiles(str(folder)) == {"smoke"}


def test_from_csv_cannot_replace_the_report_of_another_profile(tmp_path, capsys):
    from uwbench.cli import main

    out = tmp_path / "reports"
    committed = _committed(out / "report_tiny", "paper50")
    source = tmp_path / "other" / "report_tiny"
    _committed(source, "cpu")
    studies_dir = os.path.dirname(TINY_STUDY)
    args = ["report", "--from-csv", str(source / "runs.csv"), "--out", str(out), "--studies-dir", studies_dir]
    assert main(args) == 2
    assert "holds the report of profile paper50" in capsys.readouterr().err
    assert (out / "report_tiny" / "runs.csv").read_bytes() == committed
    assert main(args + ["--force"]) == 0
    assert guard.folder_profiles(str(out / "report_tiny")) == {"cpu"}


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_paper_cpu_reports_outside_the_committed_reports():
    """`make paper-cpu`'s report command, as make would run it, writes to a folder that is not reports/."""
    from uwbench.cli import build_parser

    text = subprocess.run(["make", "-n", "paper-cpu", "PAPER_STUDIES=table1_memorization"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    line = next(x for x in text.splitlines() if " uwbench report " in x)
    command = re.search(r"-m uwbench (report [^|;&]*)", line).group(1)
    argv = [a.replace("$s", "table1_memorization") for a in shlex.split(command)]
    args = build_parser().parse_args(argv)
    assert args.profile == "cpu" and not args.force
    assert os.path.normpath(args.out) != "reports" and not os.path.normpath(args.out).startswith("reports" + os.sep)
