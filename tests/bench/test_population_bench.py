"""The population section of `uwbench bench` measures what it says: a row per asked K with each round's
ratio against the solo run timed just before it, the least core share of its sides, and a CPU target
that is judged only where the bench had a core to itself."""
from __future__ import annotations

import pytest

from uwbench.bench.population import population_targets


def _section(ratio: float, share):
    row = {"k": 8, "ratio": ratio, "member_updates_per_s": 1.0}
    if share is not None:
        row["min_core_share"] = share
    return {"config": {"device": "cpu"}, "writers": {"regular": {"populations": [row]},
                                                     "uniform": {"populations": [dict(row, ratio=0.9)]}}}


def test_the_cpu_target_is_judged_only_on_a_core_of_its_own():
    assert population_targets(_section(0.97, 0.99))[0]["met"] is True
    assert population_targets(_section(1.05, 0.99))[0]["met"] is False
    shared = population_targets(_section(0.97, 0.6))[0]
    assert shared["met"] is None and "shared a core" in shared["using"]
    assert population_targets(_section(0.97, None))[0]["met"] is True  # a result from before the share: as it was
    assert population_targets({"config": {"device": "cuda"}, "writers": {}}) == []


def test_the_section_measures_the_asked_sizes_side_by_side():
    from uwbench.bench.sections import run_benchmarks

    result = run_benchmarks("quick", sections=("population",), repeats=2, log=lambda msg: None,
                            population_sizes=(1, 3))
    sec = result["sections"]["population"]
    assert sec["config"]["sizes"] == [1, 3] and sec["config"]["rounds"] == 2
    for writer in ("regular", "uniform"):
        rows = sec["writers"][writer]["populations"]
        assert [r["k"] for r in rows] == [1, 3]
        for r in rows:
            assert len(r["ratios"]) == 2 and all(x > 0 for x in r["ratios"])
            assert 0 < r["min_core_share"] <= 1.05
            assert r["ratio"] == pytest.approx(sorted(r["ratios"])[0] / 2 + sorted(r["ratios"])[1] / 2, abs=1e-3)
