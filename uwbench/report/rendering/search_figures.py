"""The search figures of a tuned study's cell (Optuna's parallel-coordinate, slice and contour plots), drawn
in the report's style and saved with its fixed PNG metadata (``uwbench.png``), for ``rendering.search``."""
from __future__ import annotations

import warnings

from uwbench.png import save_png
from uwbench.report.rendering.figures import STYLE

FIGURE_SIZE = (7.0, 4.5)
DEFAULT_TITLES = ("Parallel Coordinate Plot", "Slice Plot", "Contour Plot")  # optuna's, replaced by ours


def draw(study, kind, title: str, target_name: str):  # kind: analysis.search.Kind
    """One search figure of ``study`` as a matplotlib Figure. Draw and save it (``save``) inside ``style()``:
    Optuna's functions switch pyplot's style, which must leak neither into the report's other figures nor
    into the next search figure."""
    import optuna.visualization.matplotlib as ovm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = getattr(ovm, kind.plot)(study, target_name=target_name)
    first = out.flat[0] if hasattr(out, "flat") else out
    fig = first.figure
    for ax in fig.axes:
        if ax.get_title() in DEFAULT_TITLES:
            ax.set_title("")
        if ax.get_xscale() == "log":  # minor-tick labels of a short log range overlap when level
            ax.tick_params(axis="x", which="both", labelrotation=30, labelsize=8)
        for coll in ax.collections:
            if kind.name == "parallel" and coll.get_array() is not None:
                _visible_colors(coll)
    fig.suptitle(title)
    fig.set_size_inches(*FIGURE_SIZE)
    return fig


def _visible_colors(mappable) -> None:
    """Drop the palest quarter of a mappable's colormap: the worst trial's line is white on white otherwise."""
    import numpy as np
    from matplotlib.colors import ListedColormap

    cmap = mappable.get_cmap()
    light_first = sum(cmap(0.0)[:3]) > sum(cmap(1.0)[:3])
    mappable.set_cmap(ListedColormap(cmap(np.linspace(0.25, 1.0, 256) if light_first else np.linspace(0.0, 0.75, 256))))
    if mappable.colorbar is not None:
        mappable.colorbar.update_normal(mappable)


class style:
    """Context for drawing and saving one search figure: Agg, the report's style, rcParams restored on exit."""

    def __enter__(self):
        import matplotlib

        matplotlib.use("Agg", force=False)
        self._ctx = matplotlib.rc_context(STYLE)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def save(fig, path: str) -> None:
    """Write the PNG with the report's fixed metadata and dpi, cropped to what was drawn (Optuna's layouts
    push rotated tick labels past the figure's edge), and close the pyplot figure."""
    import matplotlib.pyplot as plt

    try:
        save_png(fig, path, bbox_inches="tight", pad_inches=0.1)
    finally:
        plt.close(fig)
