"""Every report committed under reports/ is what `uwbench report` makes of its own runs.csv: rebuilt from
the snapshot alone (runs.csv, curves.csv, traces.csv copied to a fresh folder), every text file comes out
with the same bytes and every figure with the same pixels within the documented tolerance
(`uwbench.report.rendering.compare`), and no committed file is missing from the rebuild or left over by it.

The rule itself is tested on copies of a committed report: a figure with a few pixels moved by a few
levels is the same report, a changed number in a table or in the HTML text is not."""
from __future__ import annotations

import glob
import io
import os
import shutil

import numpy as np
import pytest

from uwbench.snapshot.folders import is_board_folder
from uwbench.report.rendering import compare

from tests.helpers import ROOT

# every report folder, a report of its own inside a study's folder too (reports/<id>/t100/); a snapshot-only
# folder beside a report (decoder_writes/, authors_clip/: no README.md) is read by its report, not rebuilt
COMMITTED = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(ROOT, "reports", "*", "runs.csv"))
                   + glob.glob(os.path.join(ROOT, "reports", "*", "*", "runs.csv"))
                   if os.path.exists(os.path.join(os.path.dirname(p), "README.md"))
                   and not is_board_folder(os.path.dirname(p)))  # boards: test_leaderboard.py
INPUTS = ("runs.csv", "curves.csv", "traces.csv")  # the snapshot; everything else is derived from it


def test_reports_are_committed():
    assert COMMITTED, "reports/ holds no report with a runs.csv"


@pytest.mark.parametrize("folder", COMMITTED, ids=[os.path.basename(f) for f in COMMITTED])
def test_committed_report_rebuilds_from_its_runs_csv(folder, tmp_path):
    from uwbench.cli import main

    study = os.path.basename(folder)
    out = tmp_path / "reports"
    nested = os.path.basename(os.path.dirname(folder)) != "reports"  # a report inside a study's folder
    fresh = out / os.path.basename(os.path.dirname(folder)) / study if nested else out / study
    fresh.mkdir(parents=True)
    for name in INPUTS:
        if os.path.exists(os.path.join(folder, name)):
            shutil.copy(os.path.join(folder, name), fresh / name)
    for sub in os.listdir(folder):  # other run sets the report reads (a study's `protocols:`), as they are
        if os.path.isfile(os.path.join(folder, sub, "runs.csv")):
            shutil.copytree(os.path.join(folder, sub), fresh / sub)
    where = [] if nested else ["--out", str(out)]  # a nested report is written beside its snapshot, as committed
    assert main(["report", "--from-csv", str(fresh / "runs.csv"), *where,
                 "--studies-dir", os.path.join(ROOT, "studies")]) == 0
    differ = compare.folder_differences(folder, str(fresh))
    assert not differ, f"{study}: the rebuild differs from the committed report:\n" + "\n".join(differ)


# ---- the rule, on copies of one committed report ----

def _pick():
    """A committed report with figures embedded in its HTML."""
    for folder in COMMITTED:
        if any(compare.is_figure(n) for n in os.listdir(folder)):
            return folder
    pytest.skip("no committed report has figures")


def _perturb(png: bytes, n_pixels: int, levels: int, seed: int = 0, block: bool = False) -> bytes:
    """The image with ``n_pixels`` random pixels' colour channels moved by ``levels`` (re-encoded);
    ``block``: a square of ``n_pixels`` in the middle instead (a changed glyph or marker)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        arr = np.array(img.convert("RGBA"))
    if block:
        side = int(round(n_pixels ** 0.5))
        y0, x0 = arr.shape[0] // 2, arr.shape[1] // 2
        ys, xs = np.mgrid[y0:y0 + side, x0:x0 + side].reshape(2, -1)
    else:
        rng = np.random.default_rng(seed)
        flat = rng.choice(arr.shape[0] * arr.shape[1], size=n_pixels, replace=False)
        ys, xs = np.unravel_index(flat, arr.shape[:2])
    for y, x in zip(ys, xs):
        for c in range(3):
            v = int(arr[y, x, c])
            arr[y, x, c] = v - levels if v >= levels else v + levels
    buf = io.BytesIO()
    Image.fromarray(arr, "RGBA").save(buf, format="PNG")
    assert buf.getvalue() != png
    return buf.getvalue()


@pytest.fixture
def report_copy(tmp_path):
    folder = _pick()
    copy = tmp_path / os.path.basename(folder)
    shutil.copytree(folder, copy)
    return folder, copy


def _first_figure(folder) -> str:
    return next(n for n in sorted(os.listdir(folder)) if compare.is_figure(n))


@pytest.mark.parametrize("n_pixels, levels", [(6, 11), (4, 122), (200, 3)])
def test_a_figure_with_a_few_pixels_perturbed_is_the_same_report(report_copy, n_pixels, levels):
    """What rounding on another CPU does: a few pixels a few levels off, or a few pixels across a line,
    or a faint tint of many."""
    folder, copy = report_copy
    name = _first_figure(folder)
    path = copy / name
    path.write_bytes(_perturb(path.read_bytes(), n_pixels=n_pixels, levels=levels))
    assert compare.folder_differences(folder, str(copy)) == []


@pytest.mark.parametrize("n_pixels, levels, block", [(64, 120, True), (5000, 3, False), (40, 100, False)])
def test_a_changed_figure_differs(report_copy, n_pixels, levels, block):
    """A changed glyph or marker (a block of pixels, far off), a changed tint over much of the figure, or
    pixels changed beyond rounding all over it."""
    folder, copy = report_copy
    name = _first_figure(folder)
    (copy / name).write_bytes(_perturb((copy / name).read_bytes(), n_pixels=n_pixels, levels=levels, block=block))
    assert [p.split(":")[0] for p in compare.folder_differences(folder, str(copy))] == [name]


def test_a_changed_number_in_a_table_differs(report_copy):
    folder, copy = report_copy
    table = next(n for n in ("accuracy.md", "accuracy.csv", "time.csv") if (copy / n).exists())
    text = (copy / table).read_text()
    digit = next(i for i, ch in enumerate(text) if ch.isdigit())
    changed = text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:]
    (copy / table).write_text(changed)
    problems = compare.folder_differences(folder, str(copy))
    assert len(problems) == 1 and problems[0].startswith(f"{table}: the bytes differ")


def test_html_text_is_compared_byte_for_byte_and_its_images_by_pixels(report_copy):
    folder, copy = report_copy
    page = (copy / "report.html").read_bytes()
    text, images = compare._split_html(page)
    assert images, "the committed page embeds its figures"
    import base64

    old = base64.b64encode(images[0])
    new = base64.b64encode(_perturb(images[0], n_pixels=4, levels=8))
    (copy / "report.html").write_bytes(page.replace(old, new, 1))
    assert compare.folder_differences(folder, str(copy)) == []
    (copy / "report.html").write_bytes(page.replace(b"<h2>", b"<h2> ", 1))
    problems = compare.folder_differences(folder, str(copy))
    assert len(problems) == 1 and problems[0].startswith("report.html: the text differs")


def test_a_missing_or_extra_file_differs(report_copy):
    folder, copy = report_copy
    name = _first_figure(folder)
    os.remove(copy / name)
    (copy / "extra.md").write_text("x\n")
    assert compare.folder_differences(folder, str(copy)) == [f"{name}: missing", "extra.md: not expected"]


def test_report_command_keeps_the_old_bytes_of_a_figure_that_is_the_same(tmp_path):
    """`uwbench report` over an existing folder: a figure rebuilt with a few pixels off gets its old bytes
    back (no diff in git), while one that really changed is written."""
    from uwbench.cli import main

    folder = _pick()
    out = tmp_path / "reports"
    copy = out / os.path.basename(folder)
    shutil.copytree(folder, copy)
    names = [n for n in sorted(os.listdir(folder)) if compare.is_figure(n)]
    slightly, unlike = names[0], names[-1]
    perturbed = _perturb((copy / slightly).read_bytes(), n_pixels=6, levels=11)
    (copy / slightly).write_bytes(perturbed)  # as another CPU would have drawn it
    (copy / unlike).write_bytes(_perturb((copy / unlike).read_bytes(), n_pixels=5000, levels=120))
    assert main(["report", "--from-csv", str(copy / "runs.csv"), "--out", str(out),
                 "--studies-dir", os.path.join(ROOT, "studies")]) == 0
    assert (copy / slightly).read_bytes() == perturbed  # kept: the same figure
    rebuilt = (copy / unlike).read_bytes()  # rewritten: the committed figure, as this machine draws it
    assert compare.file_difference(unlike, open(os.path.join(folder, unlike), "rb").read(), rebuilt) is None
