"""The index's headline: our numbers for a study's first cells, each named so a reader can tell them apart."""
from __future__ import annotations

import pandas as pd


def _summary(cells, clips):
    from uwbench.report.analysis.summary import OK

    return pd.DataFrame([{"cell": c, "state": OK, "paper": None, "mean": 99.0 + i / 10, "model": "dnc",
                          "writer": "regular", "controller": "ln_lstm", "task": "copy", "seq_len": 20,
                          "memory_size": 7, "cache_size": None, "clip": clip}
                         for i, (c, clip) in enumerate(zip(cells, clips))])


def test_cells_the_label_cannot_tell_apart_are_named_by_their_ids():
    from uwbench.report.rendering.render import headline

    text = headline(_summary(["per_tensor-regular", "global-regular"], [10, 1]), "accuracy")
    assert text == "per_tensor-regular: 99.0%; global-regular: 99.1%"


def test_distinct_cells_keep_their_labels():
    from uwbench.report.rendering.render import headline

    s = _summary(["a", "b"], [10, 10])
    s.loc[1, "seq_len"] = 50
    text = headline(s, "accuracy")
    assert "a:" not in text and "b:" not in text and text.count("T=20") == 1 and text.count("T=50") == 1
