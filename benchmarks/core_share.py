"""What sharing a CPU core does to a run's CPU time, from the committed reports' own runs.

    PYTHONPATH=. python benchmarks/core_share.py --out benchmarks/results/<date>-core-share.json

A one-thread run's CPU time over its wall time, over the same timed updates, is the share of a core it
had (``uwbench.report.analysis.cores.core_share``). Per cell of every committed report snapshot
(reports/*/runs.csv and reports/*/*/runs.csv, finished runs), the runs that had a core to themselves
(share at least ``REFERENCE_SHARE``) give the cell's reference CPU time (their median); every run of a
cell that has such runs is then its CPU time over that reference, grouped by share. If sharing a core did
not cost CPU time, every group would sit at 1. The JSON holds the groups and the floor the reports use
(``cores.CORE_SHARE_FLOOR``); a figure beside it (``*-core-share.png``) plots every run.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Any, Dict, List

import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from uwbench.report.analysis import cores

REFERENCE_SHARE = 0.97  # a run this close to a whole core is the cell's reference
EDGES = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, REFERENCE_SHARE, 1.01)


def ratios(paths: List[str]) -> pd.DataFrame:
    """Per judged run of a cell with a reference: its report, cell, share and CPU time over the reference."""
    rows = []
    for path in paths:
        runs = pd.read_csv(path)
        if "mean_cpu_seconds_per_100" not in runs.columns:
            continue
        runs = runs[runs["status"] == "finished"].copy()
        runs["share"] = cores.core_share(runs)
        runs = runs[runs["share"].notna()]
        report = os.path.relpath(os.path.dirname(path), "reports")
        for cell, g in runs.groupby("cell"):
            ref = g.loc[g["share"] >= REFERENCE_SHARE, "mean_cpu_seconds_per_100"]
            if not len(ref):
                continue
            median = float(ref.median())
            for _, r in g.iterrows():
                rows.append({"report": report, "cell": cell, "share": float(r["share"]),
                             "ratio": float(r["mean_cpu_seconds_per_100"]) / median})
    return pd.DataFrame(rows, columns=["report", "cell", "share", "ratio"])


def groups(frame: pd.DataFrame) -> List[Dict[str, Any]]:
    out = []
    for lo, hi in zip(EDGES[:-1], EDGES[1:]):
        g = frame[(frame["share"] >= lo) & (frame["share"] < hi)]["ratio"]
        out.append({"share_from": lo, "share_below": hi, "runs": int(len(g)),
                    "mean_ratio": float(g.mean()) if len(g) else None,
                    "median_ratio": float(g.median()) if len(g) else None,
                    "max_ratio": float(g.max()) if len(g) else None,
                    "share_of_runs_above_1_1": float((g > 1.1).mean()) if len(g) else None})
    return out


def figure(frame: pd.DataFrame, path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from uwbench.png import save_png

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(frame["share"], frame["ratio"], s=10, alpha=0.5)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.axvline(cores.CORE_SHARE_FLOOR, color="C3", ls="--", lw=1,
               label=f"the reports' floor ({cores.CORE_SHARE_FLOOR:g})")
    ax.set_xlabel("core share: CPU time / wall time while training")
    ax.set_ylabel("CPU time / the cell's runs with a core to themselves")
    ax.set_title(f"Sharing a core costs CPU time ({len(frame)} committed runs)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON to write; the figure goes beside it (-core-share.png)")
    ap.add_argument("--reports", default="reports", help="the folder of committed reports")
    args = ap.parse_args(argv)
    paths = sorted(glob.glob(os.path.join(args.reports, "*", "runs.csv"))
                   + glob.glob(os.path.join(args.reports, "*", "*", "runs.csv")))
    frame = ratios(paths)
    if not len(frame):
        print(f"no judged runs under {args.reports}/: nothing to measure", file=sys.stderr)
        return 1
    result = {"floor": cores.CORE_SHARE_FLOOR, "reference_share": REFERENCE_SHARE, "runs": int(len(frame)),
              "snapshots": [os.path.relpath(p) for p in paths], "groups": groups(frame),
              "below_floor": int((frame["share"] < cores.CORE_SHARE_FLOOR).sum())}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    png = figure(frame, os.path.splitext(args.out)[0] + ".png")
    for g in result["groups"]:
        if g["runs"]:
            print(f"share {g['share_from']:.2f}-{g['share_below']:.2f}: {g['runs']:4d} runs, CPU time x "
                  f"{g['mean_ratio']:.3f} mean, {g['median_ratio']:.3f} median, {g['max_ratio']:.3f} max")
    print(f"wrote {args.out} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
