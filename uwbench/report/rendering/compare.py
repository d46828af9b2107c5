"""When two builds of a report are the same (docs/design.md §10): the one rule the rebuild test and
``uwbench report`` apply.

- **Text** (Markdown, CSV, LaTeX, the README, and the HTML page with its embedded images cut out):
  byte for byte. Every number a report states is in its text files, and the data behind each figure is
  in the folder's CSVs (``runs.csv``, ``curves.csv``, ``traces.csv``, ``cells.csv``, ``pareto.csv`` ...),
  so a changed number, label or data point always fails.
- **Figures** (the PNG files, and the PNG images embedded in the HTML page): by their pixels, within
  ``FIGURE_TOLERANCE``. The contour interpolation of the search plots (and matplotlib's anti-aliasing)
  rounds differently on different CPUs: a handful of pixels along a contour line come out a few levels
  off, or a single pixel lands on the other side of a line. A changed figure (a moved point or line,
  another label or colour) changes whole glyphs, markers or strokes: tens to thousands of pixels.

The tolerance (``Tolerance``): the same size; at most ``max_fraction`` of the pixels differ at all
(0.1%: 252 pixels of a 600 x 420 figure), and of those at most ``max_changed_fraction`` (0.01%: 25
pixels) by more than ``max_levels`` (24 of 255, in any RGBA channel). Rounding stays well inside both;
one changed character of a label is already outside the second. The rebuild test
(``tests/repo/test_committed_reports.py``) holds examples of both sides.
"""
from __future__ import annotations

import base64
import contextlib
import os
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional

from uwbench import atomic

FIGURE_SUFFIXES = (".png",)
_EMBEDDED = re.compile(rb"data:image/png;base64,([A-Za-z0-9+/=]+)")


@dataclass(frozen=True)
class Tolerance:
    """How far two renderings of one figure may differ and still be the same figure."""

    max_fraction: float = 0.001  # of the figure's pixels, that may differ at all
    max_levels: int = 24  # a pixel off by more than this (of 255, in some channel) has changed, not rounded
    max_changed_fraction: float = 0.0001  # of the figure's pixels, that may have changed


FIGURE_TOLERANCE = Tolerance()


def is_figure(name: str) -> bool:
    return name.lower().endswith(FIGURE_SUFFIXES)


def figure_difference(expected: bytes, actual: bytes, tolerance: Tolerance = FIGURE_TOLERANCE) -> Optional[str]:
    """None when two PNG images are the same figure within ``tolerance``, else what differs."""
    if expected == actual:
        return None
    import numpy as np

    a, b = _pixels(expected), _pixels(actual)
    if a.shape != b.shape:
        return f"the size differs: {a.shape[1]}x{a.shape[0]} vs {b.shape[1]}x{b.shape[0]} pixels"
    delta = np.abs(a.astype(np.int16) - b.astype(np.int16))
    per_pixel = delta.max(axis=2)
    n_differ = int((per_pixel > 0).sum())
    n_changed = int((per_pixel > tolerance.max_levels).sum())
    allowed = int(tolerance.max_fraction * per_pixel.size)
    allowed_changed = int(tolerance.max_changed_fraction * per_pixel.size)
    if n_differ > allowed or n_changed > allowed_changed:
        return (f"{n_differ} of {per_pixel.size} pixels differ (at most {allowed} may), {n_changed} of them by "
                f"more than {tolerance.max_levels} levels (at most {allowed_changed} may)")
    return None


def html_difference(expected: bytes, actual: bytes, tolerance: Tolerance = FIGURE_TOLERANCE) -> Optional[str]:
    """None when two HTML pages have the same text byte for byte and the same embedded PNG images within
    ``tolerance``, else what differs."""
    if expected == actual:
        return None
    text_a, images_a = _split_html(expected)
    text_b, images_b = _split_html(actual)
    if text_a != text_b:
        return f"the text differs (first at byte {_first_difference(text_a, text_b)} of the page without images)"
    if len(images_a) != len(images_b):
        return f"{len(images_a)} vs {len(images_b)} embedded images"
    for i, (a, b) in enumerate(zip(images_a, images_b)):
        why = figure_difference(a, b, tolerance)
        if why:
            return f"embedded image {i + 1}: {why}"
    return None


def file_difference(name: str, expected: bytes, actual: bytes,
                    tolerance: Tolerance = FIGURE_TOLERANCE) -> Optional[str]:
    """None when two versions of the report file ``name`` are the same by the rule above, else why not."""
    if expected == actual:
        return None
    if is_figure(name):
        return figure_difference(expected, actual, tolerance)
    if name.lower().endswith(".html"):
        return html_difference(expected, actual, tolerance)
    return f"the bytes differ (first at byte {_first_difference(expected, actual)})"


def folder_differences(expected: str, actual: str, tolerance: Tolerance = FIGURE_TOLERANCE) -> List[str]:
    """Every way the report folder ``actual`` differs from ``expected`` (files missing, left over, or
    different by the rule above); empty when they are the same report."""
    a, b = _files(expected), _files(actual)
    problems = [f"{n}: missing" for n in sorted(set(a) - set(b))]
    problems += [f"{n}: not expected" for n in sorted(set(b) - set(a))]
    for name in sorted(set(a) & set(b)):
        why = file_difference(name, _read(os.path.join(expected, name)), _read(os.path.join(actual, name)), tolerance)
        if why:
            problems.append(f"{name}: {why}")
    return problems


@contextlib.contextmanager
def unchanged_kept(root: str, tolerance: Tolerance = FIGURE_TOLERANCE,
                   folders: Optional[List[str]] = None) -> Iterator[List[str]]:
    """Within the block, report folders under ``root`` (or the report ``folders`` named) may be rewritten;
    afterwards every figure or HTML page whose new bytes are the same report file as before (by the rule
    above) gets its old bytes back, so a rebuild of unchanged runs leaves the committed files untouched on
    any machine. Yields the list of the paths kept, filled in when the block ends."""
    before = _snapshot(root, folders)
    kept: List[str] = []
    try:
        yield kept
    finally:
        for path, old in before.items():
            try:
                new = _read(path)
            except OSError:
                continue
            if new != old and file_difference(path, old, new, tolerance) is None:
                atomic.write_bytes(path, old)
                kept.append(path)


def _snapshot(root: str, folders: Optional[List[str]] = None) -> Dict[str, bytes]:
    """The figures and HTML pages of every report folder directly under ``root`` (of ``folders`` when given)."""
    out: Dict[str, bytes] = {}
    if folders is None:
        folders = [os.path.join(root, sub) for sub in sorted(os.listdir(root))] if os.path.isdir(root) else []
    for folder in folders:
        if os.path.isdir(folder):
            for name in _files(folder):
                if is_figure(name) or name.lower().endswith(".html"):
                    out[os.path.join(folder, name)] = _read(os.path.join(folder, name))
    return out


def _pixels(png: bytes):
    import io

    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        return np.asarray(img.convert("RGBA"))


def _split_html(page: bytes):
    images = [base64.b64decode(m) for m in _EMBEDDED.findall(page)]
    return _EMBEDDED.sub(b"data:image/png;base64,", page), images


def _first_difference(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _files(folder: str) -> List[str]:
    return sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f)))


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()
