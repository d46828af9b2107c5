"""The one PNG writer of the package: every matplotlib figure uwbench saves (a report's figures and search
figures, the leaderboard's, a traced fall's, the speed benchmarks' population figure, ``uwbench theory``'s
plots) goes through ``save_png``, written atomically with fixed metadata (no version string, no date), so
an unchanged figure rebuilds to the same bytes."""
from __future__ import annotations

from uwbench import atomic

DPI = 100  # the report's; a caller may give its own
PNG_METADATA = {"Software": None}  # no version string, no date: identical bytes on rebuild


def save_png(fig, path: str, dpi: float = DPI, **savefig) -> str:
    """Write ``fig`` to ``path`` as PNG (atomically: a reader never sees half a file); ``savefig``: further
    ``Figure.savefig`` options (``bbox_inches``, ``pad_inches``). Returns ``path``."""
    with atomic.replacing(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, metadata=PNG_METADATA, **savefig)
    return path
