"""The README and docs/ against the files they describe: the README's results block is what `uwbench report`
writes from the committed reports, its board block what `uwbench leaderboard` writes from the committed board,
and every `uwbench` command shown in the README or in docs/ parses.

The commands are extracted from fenced code blocks and inline code spans, split at shell separators
(`&&`, `;`, `|`), stripped of comments, line continuations and leading `VAR=value` settings, and parsed
by the subcommand's own argparse parser (`uwbench.cli.build_parser`): nothing runs.
"""
from __future__ import annotations

import argparse
import contextlib
import fnmatch
import glob
import io
import os
import re
import shlex
import shutil

import pytest

from uwbench.snapshot.folders import is_board_folder
from uwbench.leaderboard import readme as board_readme
from uwbench.report.rendering import readme_block

from tests.helpers import ROOT

README = os.path.join(ROOT, "README.md")
REPORTS = os.path.join(ROOT, "reports")
STUDIES = os.path.join(ROOT, "studies")
DOCS = [README] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
SNAPSHOT = ("runs.csv", "curves.csv", "traces.csv", "verdicts.csv")  # what the index and the block read


# ---- the results block ----

def test_the_readme_results_block_is_what_uwbench_report_writes_from_the_committed_reports():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    block = readme_block.current_block(text)
    assert block is not None, f"README.md has no results block ({readme_block.BEGIN!r} ... {readme_block.END!r})"
    expected = readme_block.render(REPORTS, STUDIES, ROOT)
    assert block == expected, "README.md's results block is stale: rewrite it with `uwbench report --index-only`"


def test_the_readme_board_block_is_what_uwbench_leaderboard_writes_from_the_committed_board():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    block = readme_block.current_block(text, board_readme.BEGIN, board_readme.END)
    assert block is not None, f"README.md has no board block ({board_readme.BEGIN!r} ... {board_readme.END!r})"
    expected = board_readme.render(os.path.join(REPORTS, "leaderboard"), ROOT)
    assert block == expected, "README.md's board block is stale: rewrite it with `uwbench leaderboard --rebuild`"


def test_the_block_names_each_committed_claim_with_its_verdict_and_report():
    """Not an empty table: every claim of a paper study's verdicts.csv appears with its verdict and a link."""
    import pandas as pd

    from uwbench.report.verdicts.claims import CLAIMS

    texts = {c.id: c.text for c in CLAIMS}
    block = readme_block.render(REPORTS, STUDIES, ROOT)
    found = 0
    for e in readme_block.entries(REPORTS, STUDIES):
        link = f"(reports/{e['id']}/README.md)"
        assert link in block
        verdicts = os.path.join(REPORTS, e["id"], "verdicts.csv")
        if not e["paper"] or not os.path.exists(verdicts):
            continue
        frame = pd.read_csv(verdicts, dtype=str, keep_default_na=False)
        for _, row in frame.drop_duplicates("claim").iterrows():
            line = next(x for x in block.splitlines() if x.startswith(f"| {texts[row['claim']]}"))
            assert f"**{row['claim_verdict']}**: " in line and link in line
            found += 1
    assert found > 0


def test_report_index_only_rewrites_a_stale_block_and_leaves_a_readme_without_markers(tmp_path, capsys, monkeypatch):
    from uwbench.cli import main

    out = tmp_path / "reports"
    for folder in sorted(glob.glob(os.path.join(REPORTS, "*", "runs.csv"))):
        src = os.path.dirname(folder)
        if is_board_folder(src):  # a leaderboard's folder is no study report (uwbench leaderboard writes it)
            continue
        dst = out / os.path.basename(src)
        dst.mkdir(parents=True)
        for name in SNAPSHOT:
            if os.path.exists(os.path.join(src, name)):
                shutil.copy(os.path.join(src, name), dst / name)
        for sub in readme_block.nested_reports(src):  # a report of another profile inside it (its README marks it)
            (dst / os.path.basename(sub)).mkdir()
            for name in (*SNAPSHOT, "README.md"):
                if os.path.exists(os.path.join(sub, name)):
                    shutil.copy(os.path.join(sub, name), dst / os.path.basename(sub) / name)
    stale = f"# A copy\n\n{readme_block.BEGIN}\n| old | table |\n{readme_block.END}\n\nafter\n"
    (tmp_path / "README.md").write_text(stale, encoding="utf-8")
    assert main(["report", "--index-only", "--out", str(out), "--studies-dir", STUDIES]) == 0
    text = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert text.startswith("# A copy\n\n") and text.endswith(f"{readme_block.END}\n\nafter\n")
    assert readme_block.current_block(text) == readme_block.render(str(out), STUDIES, str(tmp_path))
    assert "| old | table |" not in text and (out / "README.md").exists()
    with open(README, encoding="utf-8") as f:  # the same reports give the committed README's block
        assert readme_block.current_block(text) == readme_block.current_block(f.read())

    plain = "# No markers\n\n| a table | written by hand |\n"
    (tmp_path / "README.md").write_text(plain, encoding="utf-8")
    assert main(["report", "--index-only", "--out", str(out), "--studies-dir", STUDIES]) == 0
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == plain
    assert main(["report", "--index-only", "--all"]) == 2
    assert "--index-only rebuilds no report" in capsys.readouterr().err
    # without --out: the reports folder of the working directory, the README beside it
    (tmp_path / "README.md").write_text(stale, encoding="utf-8")
    os.rename(out, tmp_path / "reports")
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--index-only", "--studies-dir", STUDIES]) == 0
    assert "| old | table |" not in (tmp_path / "README.md").read_text(encoding="utf-8")


def test_the_block_counts_cpu_core_hours_from_the_runs_own_cpu_seconds(tmp_path):
    """CPU seconds per 100 updates × updates / 100 (a trial's updates from its timings), not wall × threads."""
    import pandas as pd

    from uwbench import snapshot

    folder = tmp_path / "reports" / "quickstart"
    folder.mkdir(parents=True)
    rows = [{"study": "quickstart", "cell": "dnc-regular-D1", "role": role, "status": "finished", "seed": seed,
             "run_id": f"r{seed}", "task": "copy", "model": "dnc", "writer": "regular", "device": "cpu",
             "profile": "cpu", "steps": steps, "mean_seconds_per_100": 4.0, "mean_cpu_seconds_per_100": 2.0,
             "train_seconds": 4.0 * 18, "eval_seconds": 100.0, "torch_threads": 1}
            for seed, role, steps in ((0, "trial", None), (1, "final", 3600), (2, "final", 3600))]
    (folder / "runs.csv").write_text(snapshot.runs_text(rows), encoding="utf-8")
    (e,) = readme_block.entries(str(tmp_path / "reports"), STUDIES)
    # the trial: 1,800 updates (72 s / 4 s per 100) × 2 CPU s per 100 = 36 s; each final run 72 s
    assert e["cpu_hours"] == pytest.approx((36 + 72 + 72) / 3600)
    assert e["runs"] == 3 and e["trials"] == 1 and e["steps"] == [3600] and e["profiles"] == ["cpu"]
    frame = pd.DataFrame(rows).drop(columns=["mean_cpu_seconds_per_100"])
    (folder / "runs.csv").write_text(snapshot.runs_text(frame.to_dict("records")), encoding="utf-8")
    (e,) = readme_block.entries(str(tmp_path / "reports"), STUDIES)
    assert e["cpu_hours"] is None  # not recorded: never replaced by wall time
    assert "| not recorded" in readme_block.render(str(tmp_path / "reports"), STUDIES, str(tmp_path))


# ---- the commands shown in the README and docs/ ----

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`(uwbench [^`]+)`")
SEPARATORS = {"&&", "||", ";", "|"}
FULL, FLAGS = "full", "flags"  # a command line of a code block is parsed whole; a prose span's flags are checked


def _fenced_lines(text: str):
    for lang, body in FENCE.findall(text):
        if lang not in ("", "bash", "sh", "shell", "console"):
            continue
        joined = re.sub(r"\\\n\s*", " ", body)  # line continuations
        yield from joined.splitlines()


def _commands(line: str):
    """The `uwbench` commands of one shell line, as argument lists (without `uwbench`). Usage brackets
    (`[--seq-len 50]`) are dropped; a line of output (`uwbench leaderboard: error: ...`) is no command."""
    try:
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        lex.commenters = "#"
        tokens = list(lex)
    except ValueError:  # an unbalanced quote: not a shell line (prose in a code span)
        return
    current = []
    for tok in tokens + [";"]:
        if tok in SEPARATORS:
            while current and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", current[0]):
                current.pop(0)  # VAR=value before the command
            argv = None
            if current[:1] in (["uwbench"], [".venv/bin/uwbench"]):
                argv = current[1:]
            elif current[:3] in (["python", "-m", "uwbench"], [".venv/bin/python", "-m", "uwbench"]):
                argv = current[3:]
            if argv is not None and not (argv and argv[0].endswith(":")):
                yield [a for a in (t.strip("[]") for t in argv) if a]
            current = []
        else:
            current.append(tok)


def _documented_commands():
    found = []
    for path in DOCS:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        name = os.path.relpath(path, ROOT)
        for kind, lines in ((FULL, _fenced_lines(text)), (FLAGS, INLINE.findall(FENCE.sub("", text)))):
            for line in lines:
                found += [(name, kind, argv) for argv in _commands(line)]
    return found


COMMANDS = _documented_commands()


def _parser_of(argv):
    """The (sub)parser an argument list reaches through its subcommand names, and the names used."""
    from uwbench.cli import build_parser

    parser, used = build_parser(), []
    for tok in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or tok.startswith("-") or tok not in subs[0].choices:
            break
        parser, used = subs[0].choices[tok], used + [tok]
    return parser, used


def test_the_docs_show_uwbench_commands():
    names = {name for name, _, _ in COMMANDS}
    assert "README.md" in names and "docs/usage.md" in names and len(COMMANDS) >= 30
    subcommands = {argv[0] for _, kind, argv in COMMANDS if argv and kind == FULL}
    assert {"train", "sweep", "report", "leaderboard", "theory"} <= subcommands


@pytest.mark.parametrize("where, kind, argv", COMMANDS,
                         ids=[f"{n}:{k}:{' '.join(a)[:60]}" for n, k, a in COMMANDS])
def test_a_documented_command_parses(where, kind, argv):
    """A command of a code block parses whole; one named in prose names a real subcommand, and each of its
    --flags is one of that subcommand's options."""
    from uwbench.cli import build_parser

    shown = f"{where}: `uwbench {' '.join(argv)}`"
    if kind == FLAGS:
        parser, used = _parser_of(argv)
        assert not argv or argv[0].startswith("-") or used, f"{shown}: no such subcommand"
        known = {o for a in parser._actions for o in a.option_strings}
        unknown = [a.split("=")[0] for a in argv if a.startswith("--") and a.split("=")[0] not in known]
        assert not unknown, f"{shown}: {parser.prog} has no option {', '.join(unknown)}"
        return
    if argv in (["--help"], ["-h"]):
        return  # `uwbench --help`: the top-level help
    argv = [a for a in argv if a not in ("--help", "-h")]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"{shown} does not parse ({exc.code}): {err.getvalue().strip()}")
    assert getattr(args, "command", None), f"{shown} names no subcommand"


def test_a_command_that_does_not_parse_is_caught():
    """The extraction and the check see a wrong flag, in a code block and in a prose span alike."""
    text = ("```bash\nuwbench sweep studies/quickstart.yaml \\\n    --wrokers 2   # a typo\n```\n"
            "and `uwbench train --stpes 3`, and `uwbench trian`\n")
    found = [(k, a) for k, lines in ((FULL, _fenced_lines(text)), (FLAGS, INLINE.findall(FENCE.sub("", text))))
             for line in lines for a in _commands(line)]
    assert found == [(FULL, ["sweep", "studies/quickstart.yaml", "--wrokers", "2"]),
                     (FLAGS, ["train", "--stpes", "3"]), (FLAGS, ["trian"])]
    for kind, argv in found:
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            test_a_documented_command_parses("text", kind, argv)


def test_the_sweep_help_example_pattern_matches_cells():
    """`uwbench sweep --help` gives a --cells example; it must select cells of a real study."""
    from uwbench import spec as spec_mod
    from uwbench.cli import build_parser

    sweep = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == "sweep")[1]
    help_text = next(a.help for a in sweep._actions if "--cells" in a.option_strings)
    pattern = re.search(r"e\.g\. '([^']+)'", help_text).group(1)
    path = os.path.join(STUDIES, "quickstart.yaml")
    plan = spec_mod.expand(spec_mod.load(path), "cpu", path)
    assert [c.id for c in plan.cells if fnmatch.fnmatch(c.id, pattern)], (pattern, [c.id for c in plan.cells])
