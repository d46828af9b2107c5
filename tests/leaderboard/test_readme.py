"""The README's board block (``uwbench/leaderboard/readme.py``): writing a board folder rewrites the block of
the README beside it."""
from __future__ import annotations

import shutil

from tests.leaderboard.boards import fixture_board


def _copy_board(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_writing_the_board_folder_rewrites_the_readme_board_block_beside_it(tmp_path, capsys):
    """`--rebuild` (as `--record-baselines` and `--commit-row`) rewrites the board block of the README beside
    the board folder's parent from the folder's files: the rows in the board's order with their numbers, the
    baselines' account and the figure; a README without the markers is left alone."""
    from uwbench.leaderboard import steps as lb
    from uwbench.cli import main
    from uwbench.leaderboard import readme as board_readme
    from uwbench.report.rendering import readme_block

    folder = tmp_path / "reports" / "leaderboard"
    readme = tmp_path / "README.md"
    stale = f"# Copy\n\n{board_readme.BEGIN}\nold board\n{board_readme.END}\n\nafter\n"
    readme.write_text(stale, encoding="utf-8")
    empty = board_readme.render(str(folder), str(tmp_path))
    assert empty.startswith("No board is committed yet (`reports/leaderboard/runs.csv` is absent)")
    board, _ = lb.write_board(fixture_board(), str(folder))
    capsys.readouterr()
    assert main(["leaderboard", "--rebuild", "--board", str(folder)]) == 0
    assert f"rewrote the board block of {readme}" in capsys.readouterr().out
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# Copy\n\n") and text.endswith(f"{board_readme.END}\n\nafter\n")
    block = readme_block.current_block(text, board_readme.BEGIN, board_readme.END)
    assert block == board_readme.render(str(folder), str(tmp_path)) != empty
    assert "old board" not in block and "[`reports/leaderboard/board.md`](reports/leaderboard/board.md)" in block
    assert "**Baselines: 3 of 4 cells converged** (75%" in block and "(reports/leaderboard/pareto.png)" in block
    lines = [[f.strip() for f in x.strip("|").split("|")] for x in block.splitlines()
             if x.startswith("| ") and x[2].isdigit()]
    assert [x[1] for x in lines] == [r.label for r in board.rows]  # the board's order
    mine = next(x for x in lines if x[1] == board.row("dnc_mine").label)
    assert mine[2] == "85.0"  # the mean over the counted column alone (Copy 50% is not counted)
    dnc = next(x for x in lines if x[1] == board.row("dnc").label)
    assert dnc[-1] == f"{3 * 400 * 2.0 / 100 / 3600:.2f}" == "0.01"  # 3 runs x 400 updates x 2 CPU s per 100
    # another board folder beside the same README (a preview, a row's own board) leaves it alone
    assert main(["leaderboard", "--rebuild", "--board", str(_copy_board(folder, tmp_path / "runs" / "preview"))]) == 0
    assert readme.read_text(encoding="utf-8") == text and "rewrote" not in capsys.readouterr().out
    # a README without the markers is left alone, and an unchanged board rewrites nothing
    assert main(["leaderboard", "--rebuild", "--board", str(folder)]) == 0
    assert "rewrote" not in capsys.readouterr().out
    readme.write_text("# No markers\n", encoding="utf-8")
    assert main(["leaderboard", "--rebuild", "--board", str(folder)]) == 0
    assert readme.read_text(encoding="utf-8") == "# No markers\n"
