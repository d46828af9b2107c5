"""benchmarks/README.md's result tables are what ``uwbench.bench.readme`` writes from the committed results,
and ``uwbench bench --refresh-docs`` rewrites a stale one (nothing is timed)."""
from __future__ import annotations

import os
import shutil

from uwbench.bench import readme
from uwbench.bench.sections import SECTIONS

from tests.helpers import ROOT

README = os.path.join(ROOT, readme.README)
RESULTS = os.path.join(ROOT, readme.RESULTS)


def test_every_section_has_its_block_and_each_block_is_current():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    for name in SECTIONS:
        block = readme.current(text, name)
        assert block is not None, f"benchmarks/README.md has no `{name}` block ({readme.begin(name)!r})"
        assert block == readme.render(name, RESULTS), (
            f"benchmarks/README.md's `{name}` table is stale: rewrite it with `uwbench bench --refresh-docs`")


def test_a_block_comes_from_the_newest_result_with_its_section():
    name, result = readme.newest("headline", RESULTS)
    later = [f for f, r in readme.results(RESULTS) if f > name and "headline" in r["sections"]]
    assert not later
    assert f"`{readme.RESULTS}/{name}`" in readme.render("headline", RESULTS)


def test_refresh_docs_rewrites_a_stale_block_and_leaves_the_rest(tmp_path, monkeypatch):
    from uwbench.cli import main

    (tmp_path / "benchmarks").mkdir()
    shutil.copytree(RESULTS, tmp_path / readme.RESULTS)
    stale = f"# Bench\n\n{readme.begin('trainer')}\nold\n{readme.end('trainer')}\n\nafter\n"
    (tmp_path / readme.README).write_text(stale, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--refresh-docs"]) == 0
    text = (tmp_path / readme.README).read_text(encoding="utf-8")
    assert text.startswith("# Bench\n\n") and text.endswith(f"{readme.end('trainer')}\n\nafter\n")
    assert readme.current(text, "trainer") == readme.render("trainer", RESULTS) and "old" not in text
    assert main(["bench", "--refresh-docs"]) == 0  # current: nothing to rewrite
    assert (tmp_path / readme.README).read_text(encoding="utf-8") == text
