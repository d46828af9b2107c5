"""Which kind of folder a snapshot lies in: a study report's, or a leaderboard board's. Both hold a
``runs.csv``; a board folder also holds its page (``board.md``) or, while its baselines are being recorded,
``progress.md``. ``uwbench report``, the reports' index and the README's results block leave a board folder
to ``uwbench leaderboard``, so the test lives here, below both."""
from __future__ import annotations

import os

BOARD_PAGE = "board.md"
PROGRESS_FILE = "progress.md"  # beside runs.csv while the baselines are being recorded, until the board is written
BOARD_MARKERS = (BOARD_PAGE, PROGRESS_FILE)  # a folder with either is a board's, not a study report's


def is_board_folder(folder: str) -> bool:
    """A board folder (a board, or baselines being recorded), which ``uwbench report`` and the reports' index
    and tests leave to ``uwbench leaderboard``."""
    return any(os.path.exists(os.path.join(folder, name)) for name in BOARD_MARKERS)
