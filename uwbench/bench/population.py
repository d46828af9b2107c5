"""The population section of ``uwbench bench``: member-updates per second against the population size K,
with the solo run beside each, at Table 1's size (copy T = 50, H = 100, D = 4, W = 64, batch 64), for the
regular DNC and DNC+UW, on the device the run is on (CPU: the native path; CUDA: the stacked forward,
captured as CUDA graphs where ``train.cuda_graph`` allows).

Every figure comes from the trainers themselves: the solo run is ``loop.train`` and a population is
``population.train_population`` over K seeds, each for the same number of updates with no evaluation
before the last; the steady-state seconds per 100 updates they record (the first update timed apart) are
a solo run's own and a member's share of the population's (docs/speed.md, "Populations"). The solo run
and the populations of one writer alternate, round by round, so a busy machine slows them alike. The
``ratio`` of a row is a member's time per update over the solo run's of the same round (below 1: the
population is cheaper per run); ``member_updates_per_s`` is K updates over the population's time.
"""
from __future__ import annotations

import statistics
from typing import Any, Callable, Dict, List, Optional, Sequence

SIZES = {"cpu": (1, 2, 4, 8, 16, 64), "cuda": (1, 2, 4, 8, 16, 64, 128, 256)}
QUICK_SIZES = (1, 2, 4)
WRITERS = ("regular", "uniform")
UPDATES = {"quick": 3, "default": 6, "full": 20}  # timed updates per run (after the warm-up update)
CPU_TARGET = 1.0  # at K = 8 a member costs at most this times the solo native run per update
CPU_TARGET_K = 8


def run_config(cfg: Dict[str, Any], writer: str, seed: int, updates: int, device: str) -> Dict[str, Any]:
    return {"task": {"name": "copy", "seq_len": cfg["seq_len"], "test_size": cfg["batch"]},
            "model": {"name": "dnc", "hidden_size": cfg["hidden"], "memory_size": cfg["memory_size"],
                      "word_size": cfg["word_size"], "read_heads": cfg["read_heads"], "writer": writer},
            "train": {"steps": updates + 1, "batch_size": cfg["batch"], "eval_every": 10 ** 6, "eval_batches": 1,
                      "seed": seed, "device": device, "checkpoint_every": 0}}


def _share(result) -> float:
    """A run's core share: CPU time over wall time of its timed updates (``report.analysis.cores``)."""
    cpu = result.cpu_seconds_per_100
    return (cpu / result.seconds_per_100) if cpu and result.seconds_per_100 else float("nan")


def population(cfg: Dict[str, Any], mode: str, repeats: int, log: Callable = print,
               sizes: Optional[Sequence[int]] = None) -> Dict[str, Any]:
    """The section's result: per writer, the solo run and a row per K (medians over ``repeats`` rounds).
    Each population is timed right after a solo run of its own round, and its ratio is taken against that
    solo run, so a change of load between sizes does not enter a ratio. ``sizes``: the K to measure (default
    by device). Each row keeps the least core share its two sides had: below ``training.timing.CORE_SHARE_FLOOR`` the
    bench shared a core, whose cost is in its CPU times, and the CPU target is not judged on it."""
    import torch

    from uwbench.training.loop import train
    from uwbench.training.population import train_population

    device = "cuda" if torch.cuda.is_available() else "cpu"
    sizes = tuple(sizes) if sizes else (QUICK_SIZES if mode == "quick" else SIZES[device])
    updates = UPDATES[mode]
    out: Dict[str, Any] = {"config": {**cfg, "device": device, "updates_per_run": updates, "rounds": repeats,
                                      "sizes": list(sizes)}, "writers": {}}
    for writer in WRITERS:
        solo_wall: List[float] = []
        solo_cpu: List[float] = []
        rows: Dict[int, Dict[str, List[float]]] = {k: {"wall": [], "cpu": [], "ratio": [], "share": []} for k in sizes}
        path = None
        for r in range(repeats):
            for k in sizes:
                log(f"population {writer}: round {r + 1}/{repeats}, K = {k}")
                solo = train(run_config(cfg, writer, 0, updates, device), progress=False)
                solo_wall.append(solo.seconds_per_100 / 100.0)
                solo_cpu.append((solo.cpu_seconds_per_100 or solo.seconds_per_100) / 100.0)
                results = train_population([run_config(cfg, writer, s, updates, device) for s in range(k)],
                                           progress=False)
                path = results[0].path
                wall = statistics.mean(x.seconds_per_100 for x in results) / 100.0
                cpu = statistics.mean((x.cpu_seconds_per_100 or x.seconds_per_100) for x in results) / 100.0
                rows[k]["wall"].append(wall)
                rows[k]["cpu"].append(cpu)
                rows[k]["share"].append(min([_share(solo)] + [_share(x) for x in results]))
                own = cpu if device == "cpu" else wall
                rows[k]["ratio"].append(own / (solo_cpu[-1] if device == "cpu" else solo_wall[-1]))
        med = statistics.median
        out["writers"][writer] = {
            "path": path,
            "solo": {"member_s_per_update": round(med(solo_wall), 5), "member_cpu_s_per_update": round(med(solo_cpu), 5),
                     "updates_per_s": round(1.0 / med(solo_wall), 2)},
            "populations": [{"k": k, "member_s_per_update": round(med(v["wall"]), 5),
                             "member_cpu_s_per_update": round(med(v["cpu"]), 5),
                             "member_updates_per_s": round(1.0 / med(v["wall"]), 2),
                             "ratio": round(med(v["ratio"]), 3),
                             "ratios": [round(x, 4) for x in v["ratio"]],
                             "min_core_share": round(min(v["share"]), 3)} for k, v in rows.items()],
        }
    return out


def population_targets(section: Dict[str, Any]) -> List[Dict[str, Any]]:
    """CPU: at K = 8 a member costs at most ``CPU_TARGET`` x the solo run per update (every writer), judged
    only where every timed side had a core to itself (``min_core_share``; older results have none)."""
    from uwbench.training.timing import CORE_SHARE_FLOOR

    if section.get("config", {}).get("device") != "cpu":
        return []
    ratios, shares = {}, []
    for writer, w in section.get("writers", {}).items():
        for row in w["populations"]:
            if row["k"] == CPU_TARGET_K:
                ratios[writer] = row["ratio"]
                shares.append(row.get("min_core_share"))
    if not ratios:
        return []
    worst = max(ratios.values())
    shared = [x for x in shares if x is not None and x < CORE_SHARE_FLOOR]
    using = ", ".join(f"{w} {r:g}x" for w, r in ratios.items())
    if shared:
        using += (f"; not judged: the bench shared a core (least core share {min(shared):g} < {CORE_SHARE_FLOOR:g}), "
                  "which costs CPU time")
    return [{"id": "population_cpu", "target": f"at K = {CPU_TARGET_K} a member costs at most {CPU_TARGET:g}x the solo "
             "native run per update (CPU time, side by side)", "measured": worst, "unit": "x",
             "met": None if shared else worst <= CPU_TARGET, "using": using}]


def figure(section: Dict[str, Any], path: str) -> str:
    """Member-updates per second against K, a line per writer, each writer's solo run dashed (log axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (writer, w) in enumerate(section["writers"].items()):
        ks = [row["k"] for row in w["populations"]]
        color = f"C{i}"
        ax.plot(ks, [row["member_updates_per_s"] for row in w["populations"]], "o-", color=color,
                label=f"DNC {writer}: population")
        ax.axhline(w["solo"]["updates_per_s"], color=color, ls="--", lw=1, label=f"DNC {writer}: solo run")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("members K")
    ax.set_ylabel("member-updates per second")
    cfg = section["config"]
    ax.set_title(f"populations on {cfg['device']} (copy T={cfg['seq_len']}, batch {cfg['batch']})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    from uwbench.png import save_png

    save_png(fig, path, dpi=110)
    plt.close(fig)
    return path
