"""The pass/fail targets, as data, evaluated from a result's sections (keyed by workload ids).

    dnc_vs_nn_lstm    regular DNC at most 1.5x torch.nn.LSTM(125) per iteration (its faster path)
    lstm_vs_nn_lstm   the LN-LSTM baseline (H = 125) at most 1.15x torch.nn.LSTM(125) per iteration (its
                      fastest path: native where the kernels build)
    dnc_vs_pypi       regular DNC at least 4x faster than PyPI dnc
    ntm_vs_dnc        NTM within 1.2x of the regular DNC (each at its faster path)
    writer_cuts       UW and CUW cut the time by the share of memory work they skip (within 3 points);
                      for CUW, its schedule alone (``cuw_schedule``) where the row has it: the attention
                      CUW adds is work of the method's own, no memory work, and is reported beside it
    end_to_end        the default `uwbench train` (2,000 DNC updates, copy T = 50) at least 1.8x faster,
                      wall with compilation included, than the eager path (the default before
                      train.compile=auto)
    trainer_overhead  the trainer adds less than 10% to the model's forward + backward
    peak_memory       at N = 256 slots, peak memory at most half of PyPI dnc's
    population_cpu    on a CPU, a member of a population of 8 costs at most 1.0x the solo native run per
                      update (``bench/population.py``)

Each evaluated target is a dict: id, target (text), measured, unit (``x``, ``fraction`` or ``text``),
met, using (what was compared).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from uwbench.bench.workloads import CUW_SCHEDULE, NN_LSTM, PYPI_DNC, workload_id

DNC_VS_NN_LSTM = 1.5
LSTM_VS_NN_LSTM = 1.15
DNC_VS_PYPI = 4.0
NTM_VS_DNC = 1.2
WRITER_CUT_TOLERANCE = 0.03  # a writer's cut may fall this far below the share it skips
END_TO_END_SPEEDUP = 1.8
TRAINER_OVERHEAD = 0.10
PEAK_MEMORY_VS_PYPI = 0.5


def _fastest(rows: Dict[str, Dict[str, Any]], model: str, writer: Optional[str]) -> Optional[Dict[str, Any]]:
    """The fastest of a model's eager, compiled and native rows (CPU-time medians)."""
    ids = (workload_id(model, writer), workload_id(model, writer, True), workload_id(model, writer, native=True))
    found = [rows[i] for i in ids if i in rows]
    return min(found, key=lambda r: r["median_cpu_ms"]) if found else None


def headline_targets(headline: Dict[str, Any]) -> List[Dict[str, Any]]:
    rows = {r["id"]: r for r in headline["rows"]}
    dnc, ntm, lstm = _fastest(rows, "dnc", "regular"), _fastest(rows, "ntm", "regular"), rows.get(NN_LSTM)
    baseline = _fastest(rows, "lstm", None)
    out = []
    if baseline and lstm:
        ratio = baseline["median_cpu_ms"] / lstm["median_cpu_ms"]
        out.append({"id": "lstm_vs_nn_lstm", "target": f"LN-LSTM baseline <= {LSTM_VS_NN_LSTM}x torch.nn.LSTM(125)",
                    "measured": round(ratio, 2), "unit": "x", "met": ratio <= LSTM_VS_NN_LSTM,
                    "using": f"{baseline['label']} vs {lstm['label']}"})
    if dnc and lstm:
        ratio = dnc["median_cpu_ms"] / lstm["median_cpu_ms"]
        out.append({"id": "dnc_vs_nn_lstm", "target": f"regular DNC <= {DNC_VS_NN_LSTM}x torch.nn.LSTM(125)",
                    "measured": round(ratio, 2), "unit": "x", "met": ratio <= DNC_VS_NN_LSTM,
                    "using": f"{dnc['label']} vs {lstm['label']}"})
    if dnc and PYPI_DNC in rows:
        ratio = rows[PYPI_DNC]["median_cpu_ms"] / dnc["median_cpu_ms"]
        out.append({"id": "dnc_vs_pypi", "target": f"regular DNC >= {DNC_VS_PYPI}x faster than PyPI dnc",
                    "measured": round(ratio, 2), "unit": "x", "met": ratio >= DNC_VS_PYPI, "using": dnc["label"]})
    if dnc and ntm:
        ratio = ntm["median_cpu_ms"] / dnc["median_cpu_ms"]
        out.append({"id": "ntm_vs_dnc", "target": f"NTM within {NTM_VS_DNC}x of the regular DNC",
                    "measured": round(ratio, 2), "unit": "x", "met": ratio <= NTM_VS_DNC,
                    "using": f"{ntm['label']} vs {dnc['label']}"})
    return out


def writer_target(writers: Dict[str, Any]) -> Dict[str, Any]:
    """Each sparse writer's cut against the share of memory work it skips. CUW's attention is work the
    method adds, not memory work skipped: where a row times CUW's schedule without it (``cuw_schedule``),
    that candidate is held to CUW's expected cut, and CUW's own cut and the attention's cost are
    reported beside it (``raw_met``: whether CUW itself is within the tolerance)."""
    parts, met, raw_met = [], True, True
    for r in writers["rows"]:
        split = CUW_SCHEDULE in r["reduction"]
        for k, cut in r["reduction"].items():
            if k == CUW_SCHEDULE:
                continue
            expected = r["expected_reduction"][k]
            ok = cut >= expected - WRITER_CUT_TOLERANCE
            raw_met = raw_met and ok
            if k == "cached_uniform" and split:
                sched = r["reduction"][CUW_SCHEDULE]
                met = met and sched >= r["expected_reduction"][CUW_SCHEDULE] - WRITER_CUT_TOLERANCE
                parts.append(f"{r['model']}/{r['task']} {k} {cut:.0%} of {expected:.0%} (its schedule {sched:.0%}, "
                             f"its attention {r['attention_share']:.1%} of regular)")
            else:
                met = met and ok
                parts.append(f"{r['model']}/{r['task']} {k} {cut:.0%} of {expected:.0%}")
    return {"id": "writer_cuts", "target": "UW/CUW cut equal to the memory share they skip",
            "measured": None, "unit": "text", "text": "; ".join(parts), "met": met, "raw_met": raw_met,
            "using": f"writers table, CPU-time medians, tolerance {WRITER_CUT_TOLERANCE:.0%}; CUW's memory work "
                     f"by its schedule without the attention"}


def summarize(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every target whose section ran, met or not, with the measured number."""
    sec = result["sections"]
    out: List[Dict[str, Any]] = []
    if "headline" in sec:
        out += headline_targets(sec["headline"])
    if "writers" in sec:
        out.append(writer_target(sec["writers"]))
    if "endtoend" in sec:
        e = sec["endtoend"]
        out.append({"id": "end_to_end", "target": f"default `uwbench train` >= {END_TO_END_SPEEDUP}x faster end "
                                                  "to end than the eager path",
                    "measured": e["speedup"], "unit": "x", "met": e["speedup"] >= END_TO_END_SPEEDUP,
                    "using": f"{e['config']['steps']} updates, wall incl. compilation"})
    if "trainer" in sec:
        t = sec["trainer"]
        out.append({"id": "trainer_overhead", "target": f"trainer adds < {TRAINER_OVERHEAD:.0%} to forward+backward",
                    "measured": t["overhead"], "unit": "fraction", "met": t["overhead"] < TRAINER_OVERHEAD,
                    "using": "dnc regular, CPU time"})
    if "scaling" in sec:
        rows = [r for r in sec["scaling"]["rows"] if r.get("axis") == "D" and r.get("peak_rss_growth_mb")]
        ours = {r["memory_size"]: r for r in rows if r["impl"] == "ours"}
        pypi = {r["memory_size"]: r for r in rows if r["impl"] == PYPI_DNC}
        both = sorted(set(ours) & set(pypi))
        if both:
            d = both[-1]
            ratio = ours[d]["peak_rss_growth_mb"] / pypi[d]["peak_rss_growth_mb"]
            out.append({"id": "peak_memory",
                        "target": f"peak memory at N={d} <= half of PyPI dnc's"
                                  + ("" if d == 256 else " (the target is at N=256: --full)"),
                        "measured": round(ratio, 2), "unit": "x", "met": ratio <= PEAK_MEMORY_VS_PYPI,
                        "using": f"{ours[d]['peak_rss_growth_mb']:.0f} MB vs {pypi[d]['peak_rss_growth_mb']:.0f} MB"})
    if "population" in sec:
        from uwbench.bench.population import population_targets

        out += population_targets(sec["population"])
    return out
