"""Markdown tables of a benchmark result (printed by ``uwbench bench``; the headline goes in docs/speed.md)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from uwbench.bench.workloads import CUW_SCHEDULE, NO_ENCODER_MEMORY
from uwbench.tabular import Table, to_compact_markdown


def fmt(x: Optional[float], digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def fmt_measure(target: Dict[str, Any]) -> str:
    """A target's measured value by its unit (``x``: a ratio, ``fraction``: a signed percentage, ``text``)."""
    unit = target.get("unit", "x")
    if unit == "text":
        return target["text"]
    if unit == "fraction":
        return f"{target['measured']:+.1%}"
    return f"{target['measured']:.2f}x"


def _headline(h: Dict[str, Any]) -> List[str]:
    c = h["config"]
    lines = ["", f"Headline: copy T={c['seq_len']} ({c['steps']} steps), batch {c['batch']}, H={c['hidden']}, "
                 f"D={c['memory_size']}, W={c['word_size']}, R={c['read_heads']}, forward+backward, 1 thread. "
                 "ms per iteration (median).", ""]
    table = Table("headline", ["model", "params", "CPU ms", "wall ms", "x nn.LSTM", "x our DNC (eager)", "first call s"],
                  [[r["label"], f"{r['parameters']:,}", fmt(r["median_cpu_ms"]), fmt(r["median_wall_ms"]),
                    f"{r['x_nn_lstm']:.2f}", f"{r['x_dnc_regular']:.2f}", fmt(r["first_call_s"], 2)] for r in h["rows"]])
    lines += to_compact_markdown(table, "lrrrrrr")
    for n in h["notes"]:
        lines.append(f"\nNote: {n}")
    return lines


def _writers(w: Dict[str, Any]) -> List[str]:
    lines = ["", "Writers: time cut against regular writing (CPU-time medians). The encoder's memory share "
                 "(regular vs an encoder that never touches the memory) bounds what skipping memory work can "
                 "save; a writer holding a fraction h of the encoder steps can save about share x h "
                 "(expected). CUW's schedule without its attention shows what its skipped memory work saves; "
                 "the attention (CUW less that) is work the method adds.", ""]

    def cell(r, k):
        if k not in r["reduction"]:
            return "-"
        return f"{fmt(r['ms'][k])}: {r['reduction'][k]:.0%} ({r['expected_reduction'][k]:.0%})"

    def attention(r):
        return f"{fmt(r['attention_ms'])} ({r['attention_share']:.1%})" if "attention_ms" in r else "-"

    rows = []
    for r in w["rows"]:
        model = r["model"] + (" (compiled)" if r.get("compiled") else " (native)" if r.get("native") else "")
        rows.append([model, r["task"], f"{r['encoder_steps']}+{r['decoder_steps']}", fmt(r["ms"]["regular"]),
                     cell(r, "uniform"), cell(r, "cached_uniform"), cell(r, CUW_SCHEDULE), attention(r),
                     f"{fmt(r['ms'][NO_ENCODER_MEMORY])}: {r['encoder_memory_share']:.0%}"])
    table = Table("writers", ["model", "task", "steps enc+dec", "regular ms", "uniform ms: cut (expected)",
                              "cached_uniform ms: cut (expected)", "CUW schedule without attention ms: cut (expected)",
                              "CUW attention ms (share)", "no encoder memory ms: share"], rows)
    return lines + to_compact_markdown(table, "llrrrrrrr")


def _trainer(t: Dict[str, Any]) -> List[str]:
    return ["", f"Trainer overhead ({t['config']['model']}, {t['config']['runs']} runs of {t['config']['updates_per_run']} "
                f"timed updates, CPU medians): {t['trainer_ms_per_update']} ms per update, of which "
                f"{t['model_ms_in_trainer']} ms are the model's forward+loss+backward: the trainer adds "
                f"{t['overhead']:+.1%}. The same model at its initial weights on a fixed batch: "
                f"{t['model_ms_initial_weights']} ms ({t['overhead_vs_initial_weights']:+.1%} against it)."]


def _end_to_end(e: Dict[str, Any]) -> List[str]:
    c, w = e["config"], e["wall_s"]
    return ["", f"End to end: `uwbench train` of {c['steps']} DNC updates on copy T={c['seq_len']} (batch "
                f"{c['batch']}), two subprocesses started together, cold caches: default settings "
                f"{w['default']} s wall, eager (train.native=false, train.compile=false) {w['eager']} s: "
                f"{e['speedup']:.2f}x." + (f" Errors: {e['errors']}" if e.get("errors") else "")]


def _scaling(s: Dict[str, Any]) -> List[str]:
    lines: List[str] = []
    for axis, key, label in (("D", "memory_size", "D (slots)"), ("T", "seq_len", "T (tokens)")):
        rows = [r for r in s["rows"] if r.get("axis") == axis]
        if not rows:
            continue
        lines += ["", f"Scaling against {label}: CPU ms per iteration / peak memory growth MB "
                      f"(batch {s['config']['batch']}, {s['method']}).", ""]

        def impl(r):
            return r["impl"] + (f" {r['writer']}" if r.get("writer") else "")

        impls: List[str] = []
        for r in rows:
            if impl(r) not in impls:
                impls.append(impl(r))
        body = []
        for v in sorted({r[key] for r in rows}):
            cells = []
            for name in impls:
                r = next((r for r in rows if r[key] == v and impl(r) == name), None)
                if r is None:
                    cells.append("-")
                elif "error" in r:
                    cells.append("error")
                else:
                    cells.append(f"{fmt(r['median_cpu_ms'], 0)} / {fmt(r['peak_rss_growth_mb'], 0)}")
            body.append([str(v)] + cells)
        lines += to_compact_markdown(Table(f"scaling against {axis}", [label] + impls, body), "r" * (len(impls) + 1))
    return lines


def _gpu(g: Dict[str, Any]) -> List[str]:
    if "skipped" in g:
        return ["", f"GPU: skipped, {g['skipped']}."]
    c, d = g["config"], g["device"]
    lines = ["", f"GPU ({d['name']}, {d['memory_gb']} GB): regular DNC on copy T={c['seq_len']}, training updates per "
                 f"second over {c['updates']} updates (the first apart).", ""]
    paths = []
    for r in g["paths"]:
        ups = fmt(r["updates_per_s"]) if r["status"] == "finished" else f"{r['status']}: {r['error']}"
        paths.append([r["batch"], r["path"], ups, fmt(r["first_update_s"], 2), fmt(r["peak_memory_mb"])])
    lines += to_compact_markdown(Table("GPU paths", ["batch", "path", "updates/s", "first update s",
                                                     "peak GPU memory MB"], paths), "rlrrr")
    lines += ["", "Trials sharing the GPU (separate processes started together, batch 64, default path):", ""]
    sharing = []
    for r in g["sharing"]:
        each = ", ".join(fmt(u) for u in r["updates_per_s_each"]) or "-"
        errors = f" ({len(r['errors'])} failed: {r['errors'][0]})" if r.get("errors") else ""
        sharing.append([r["trials"], fmt(r["updates_per_s_total"]), f"{each}{errors}", fmt(r["wall_s"])])
    lines += to_compact_markdown(Table("GPU sharing", ["trials", "updates/s in total", "each", "wall s"], sharing),
                                 "rrlr")
    return lines


def _population(p: Dict[str, Any]) -> List[str]:
    c = p["config"]
    lines = ["", f"Populations on {c['device']} (copy T={c['seq_len']}, H={c['hidden']}, D={c['memory_size']}, "
                 f"W={c['word_size']}, batch {c['batch']}; {c['updates_per_run']} timed updates per run, medians of "
                 f"{c['rounds']} rounds): a member's time per update against the solo run's of the same round",
             ""]
    shares = any("min_core_share" in row for w in p["writers"].values() for row in w["populations"])
    rows = []
    for writer, w in p["writers"].items():
        solo = w["solo"]
        rows.append([writer, "solo", 1, f"{solo['member_s_per_update'] * 1e3:.1f}", f"{solo['updates_per_s']:g}", 1]
                    + ([""] if shares else []))
        for row in w["populations"]:
            rows.append([writer, w["path"], row["k"], f"{row['member_s_per_update'] * 1e3:.1f}",
                         f"{row['member_updates_per_s']:g}", f"{row['ratio']:g}"]
                        + ([f"{row['min_core_share']:g}" if "min_core_share" in row else ""] if shares else []))
    columns = ["writer", "path", "K", "member ms/update", "member-updates/s", "x solo"]
    if shares:  # below 0.9 the bench shared a core, which costs CPU time (docs/speed.md)
        columns.append("least core share")
    table = Table("populations", columns, rows)
    return lines + to_compact_markdown(table, "llrrrr" + ("r" if shares else ""))


RENDERERS = {"headline": _headline, "writers": _writers, "trainer": _trainer, "endtoend": _end_to_end,
             "scaling": _scaling, "population": _population, "gpu": _gpu}


def flags_text(machine: Dict[str, Any]) -> str:
    """The CPU flags a result recorded, e.g. ``avx2 fma, no avx512f``; older results recorded none."""
    flags = machine.get("cpu_flags")
    if not flags:
        return "CPU flags not recorded"
    have = [f for f, on in flags.items() if on]
    lack = [f for f, on in flags.items() if not on]
    return " ".join(have or ["none of " + ", ".join(flags)]) + (f"; no {', '.join(lack)}" if lack and have else "")


def isa_text(machine: Dict[str, Any]) -> str:
    """The instruction-set caps a result ran under (``machine.isa_settings``), e.g. ``; run with
    UWBENCH_NATIVE_VECTOR=avx2``; empty where none (or none recorded)."""
    caps = machine.get("isa_settings") or {}
    return "; run with " + " ".join(f"{k}={v}" for k, v in caps.items()) if caps else ""


TARGETS_ALIGN = "lrcl"


def targets_table(targets) -> Table:
    """The benchmark's targets: each measured value and whether it met its target."""
    return Table("targets", ["target", "measured", "met", "how"],
                 [[t["target"], fmt_measure(t), {True: "yes", False: "no"}.get(t["met"], "not judged"), t["using"]]
                  for t in targets])


def format_tables(result: Dict[str, Any]) -> str:
    """Markdown tables of a result dict, one block per section that ran, then the targets."""
    m = result.get("machine", {})
    lines: List[str] = [
        f"Machine: {m.get('cpu')} ({flags_text(m)}{isa_text(m)}), {m.get('logical_cores')} logical cores, torch {m.get('torch')}, "
        "1 thread; "
        f"load average {result.get('load_average_start')} -> {result.get('load_average_end')}; "
        f"mode {result.get('mode')}."]
    for name, section in result["sections"].items():
        lines += RENDERERS[name](section)
    if result.get("targets"):
        lines += ["", "Targets:", ""] + to_compact_markdown(targets_table(result["targets"]), TARGETS_ALIGN)
    lines.append(f"\nTotal benchmark time: {result.get('seconds')} s.")
    return "\n".join(lines)
