"""Write a study's report folder and the reports index.

``build_report(study, snapshot, folder)`` writes, from the snapshot alone (docs/design.md §1, §10):

    runs.csv curves.csv traces.csv      the snapshot (rebuild with `uwbench report --from-csv`)
    accuracy.md .tex (.csv)             the paper's layout: ours (mean ± std, n) | paper | Δ
    cells.csv                           every cell, numeric
    time.md .csv .tex                   seconds per 100 updates, reduction of UW / CUW vs regular
    verdicts.csv orderings.csv          the paper's claims and orderings checked (verdicts.judge, rendering.verdict_tables)
    importance.md .csv, search_*.png    tuned studies: search analysis per cell (analysis.search, rendering.search)
    *.png                               figures (see rendering.figures)
    README.md                           question, commands, spec hash, git sha, tables, figures, deviations
    report.html                         README.md rendered to one self-contained page (``rendering.page``:
                                        the figures embedded as base64), so it says what the README says

Nothing here depends on the time, the machine or where the data came from, so a rebuild of unchanged
data gives identical bytes. Files of an earlier build that this build no longer makes are removed (only
files named as a report names its own: a user's other files in the folder stay).
``write_index(root, studies_dir)`` writes ``<root>/README.md``: every study, its headline numbers
against the paper's and its status (matches / within tolerance / off / not run).
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pandas as pd

from uwbench import atomic
from uwbench.png import save_png
from uwbench.report.analysis import search as search_analysis
from uwbench.report.analysis.labels import cap, column_label, model_label, writer_rank
from uwbench.report.analysis.pareto import pareto_points
from uwbench.report.analysis.summary import (MATCHES, NO_PAPER, NOT_RUN, OFF, OK, REDUCED, WITHIN, metric_info,
                                             match_floor_text, missing_cells, missing_seeds, study_status,
                                             summarize)
from uwbench.report.analysis.timing import devices
from uwbench.report.data.guard import GENERATED_MARKER
from uwbench.report.data.protocols import RunSet, load_others
from uwbench.report.data.study import StudyView, runs_overrides, set_flags
from uwbench.report.rendering import figures, page, protocols, search, verdict_tables
from uwbench.report.data.columns import load_more_columns
from uwbench.report.rendering.tables import cells_table, paper_tables, pareto_table, time_table
from uwbench.report.rendering.text import int_text
from uwbench.report.verdicts import judge
from uwbench.report.verdicts.claims import CLAIMS
from uwbench.report.verdicts.protocols import points as protocol_points
from uwbench.snapshot import INTERRUPTED, Snapshot, to_csv_text
from uwbench.tracking.ui import study_hint
from uwbench.tabular import Table, fmt, slug, to_csv_rows, to_latex, to_markdown
from uwbench.values import is_number

GENERATED = ("*.png", "*.md", "*.csv", "*.tex", "*.html")  # the kinds of file a report folder holds
# The names ``build_report`` gives its files: only these (and the figures the folder's previous README showed)
# are removed when a build no longer makes them; any other file in the folder is the user's and stays.
MADE = ("runs.csv", "curves.csv", "traces.csv", "accuracy.md", "accuracy.tex", "accuracy.csv", "accuracy-*.csv",
        "cells.csv", "time.md", "time.csv", "time.tex", "verdicts.csv", "orderings.csv", "regimes.csv",
        "protocols.md", "protocols.csv", "importance.md", "importance.csv", "pareto.md", "pareto.csv",
        "search_*.png", "protocols.png", "accuracy_vs_ratio.png", "time_reduction.png", "learning_curves.png",
        "learning_curves_uw_vs_regular.png", "theory_bound.png", "pareto_front.png", "memory_*.png",
        "sequences_*.png", "README.md", "report.html")
MAX_HEADLINE = 3


@dataclass
class Report:
    study: StudyView
    folder: str
    summary: pd.DataFrame
    status: str
    files: List[str] = field(default_factory=list)
    figures: Dict[str, object] = field(default_factory=dict)  # name -> matplotlib Figure (for tests)


def display_path(path: str) -> str:
    """A study path as shown in commands: relative to the working directory when inside it."""
    if not path:
        return ""
    rel = os.path.relpath(os.path.abspath(path))
    return rel if not rel.startswith("..") else os.path.join("studies", os.path.basename(path))


def _write(path: str, text: str, files: List[str]) -> None:
    files.append(atomic.write_text(path, text))


def build_report(study: StudyView, snap: Snapshot, folder: str, keep_figures: bool = False,
                 search_storage: Optional[str] = None) -> Report:
    os.makedirs(folder, exist_ok=True)
    shown_before = _figures_shown(folder)
    files: List[str] = list(snap.write(folder))
    runs = snap.runs[snap.runs["study"].isin([study.id, ""])] if len(snap.runs) else snap.runs
    summary = summarize(study, runs)
    status = study_status(summary)
    report = Report(study=study, folder=folder, summary=summary, status=status)

    # tables
    blocks = paper_tables(summary, study)
    acc_md = "\n".join(f"**{t.title}**\n\n{to_markdown(t)}" for t in blocks)
    _write(os.path.join(folder, "accuracy.md"), acc_md, files)
    _write(os.path.join(folder, "accuracy.tex"), "\n".join(to_latex(t) for t in blocks), files)
    for i, t in enumerate(blocks):
        name = "accuracy.csv" if len(blocks) == 1 else f"accuracy-{i + 1}-{slug(t.title)}.csv"
        _write(os.path.join(folder, name), to_csv_text(*_csv_args(t)), files)
    more = load_more_columns(study, folder)
    whole = (paper_tables(pd.concat([summary] + [summarize(c.study, c.runs) for c in more], ignore_index=True), study)
             if more else [])
    if whole:
        _write(os.path.join(folder, "accuracy_whole.md"),
               "\n".join(f"**{t.title}**\n\n{to_markdown(t)}" for t in whole), files)
        for name, t in zip(whole_csv_names(whole), whole):
            _write(os.path.join(folder, name), to_csv_text(*_csv_args(t)), files)
    cells = cells_table(summary, study)
    _write(os.path.join(folder, "cells.csv"), to_csv_text(*_csv_args(cells)), files)
    ttable = time_table(summary, runs)
    if ttable is not None:
        _write(os.path.join(folder, "time.md"), to_markdown(ttable), files)
        _write(os.path.join(folder, "time.csv"), to_csv_text(*_csv_args(ttable)), files)
        _write(os.path.join(folder, "time.tex"), to_latex(ttable), files)
    verdict = judge.build(study, summary, runs, snap.curves, blocks)
    files += verdict_tables.write(verdict, folder)
    own_set, other_sets = RunSet(study.protocol_label, runs, snap.curves), load_others(study, folder)
    prot = protocols.table(study, own_set, other_sets)
    prot_points = protocol_points(study, own_set, other_sets) if prot is not None and prot.columns else None
    if prot is not None and prot.columns:
        _write(os.path.join(folder, "protocols.md"), to_markdown(prot), files)
        _write(os.path.join(folder, "protocols.csv"), to_csv_text(*_csv_args(prot)), files)
    searched = search_analysis.analyse(study, summary, runs, storage=search_storage)
    if searched is not None:
        files += search.write(searched, folder)
    points = pareto_points(study, runs)
    ptable = pareto_table(study, points) if points is not None else None
    if ptable is not None:
        _write(os.path.join(folder, "pareto.md"), to_markdown(ptable), files)
        _write(os.path.join(folder, "pareto.csv"), to_csv_text(*_csv_args(ptable)), files)

    # figures
    made = _figures(study, snap, runs, summary, prot_points)
    if points is not None:
        made = {**_pareto_figure(study, points), **made}
    pngs = []
    for name, (fig, caption) in made.items():
        path = os.path.join(folder, f"{name}.png")
        save_png(fig, path)
        files.append(path)
        pngs.append((name, caption))
        if keep_figures:
            report.figures[name] = fig
    missing = missing_cells(summary)
    readme = _readme(study, summary, status, blocks, cells, ttable, pngs, runs, verdict, searched, ptable, missing,
                     prot, folder, seeds_missing=missing_seeds(study, summary, runs), whole=(whole, more))
    _write(os.path.join(folder, "README.md"), readme, files)
    _write(os.path.join(folder, "report.html"),
           page.to_html(readme, title=f"{study.title or study.id}: uwbench report", folder=folder), files)
    _remove_stale(folder, files, shown_before)
    report.files = files
    return report


def whole_csv_names(tables) -> List[str]:
    """The CSV file of each block of the paper's whole table (``load_more_columns``)."""
    return (["accuracy_whole.csv"] if len(tables) == 1
            else [f"accuracy_whole-{i + 1}-{slug(t.title)}.csv" for i, t in enumerate(tables)])


def _csv_args(t: Table):
    cols, rows = to_csv_rows(t)
    return cols, [dict(zip(cols, r)) for r in rows]


HEADLINE_CLAIM = "uw-beats-regular"  # the claim whose two sides get their own learning-curve figure


def claim_cells(summary: pd.DataFrame, claim_id: str) -> pd.DataFrame:
    """The finished cells on either side of a claim, within the (model, controller, memory) groups that have
    both sides (so the figure compares like with like)."""
    claim = next(c for c in CLAIMS if c.id == claim_id)
    done = summary[summary["state"] == OK]
    if claim.tasks:
        done = done[done["task"].isin(claim.tasks)]
    keep = []
    for _, g in done.groupby(["model", "controller", "memory_size"], dropna=False, sort=False):
        wins = [i for i, r in g.iterrows() if claim.winner.holds(r)]
        loses = [i for i, r in g.iterrows() if claim.loser.holds(r)]
        if wins and loses:
            keep += wins + loses
    return done.loc[sorted(keep)] if keep else done.iloc[0:0]


def _figures(study: StudyView, snap: Snapshot, runs: pd.DataFrame, summary: pd.DataFrame,
             prot_points=None) -> Dict[str, tuple]:
    made: Dict[str, tuple] = {}
    info = metric_info(study.metric)
    fig = figures.protocols_dots(prot_points, study.metric)
    if fig is not None:
        made["protocols"] = (fig, f"{cap(info['name'])} of each cell under each protocol (the table "
                                  "\"Protocols side by side\"): a dot per seed, a bar at the mean, × = the paper's value.")
    dev = ", ".join(devices(summary))
    fig = figures.accuracy_vs_ratio(summary, study.metric)
    if fig is not None:
        made["accuracy_vs_ratio"] = (fig, f"{cap(info['name'])} against the compression ratio (D+1)/T "
                                          "(mean ± std over seeds; × = the paper's value).")
    fig = figures.time_reduction(summary, dev)
    if fig is not None:
        made["time_reduction"] = (fig, "Training-time reduction of uniform / cached-uniform writing against "
                                       f"regular writing, by memory slots D ({dev}).")
    fig = figures.learning_curves(snap.curves, runs, summary, study.metric)
    if fig is not None:
        made["learning_curves"] = (fig, "Learning curves: evaluation metric every evaluation step, mean over "
                                        "seeds with a ± std band.")
    pair = claim_cells(summary, HEADLINE_CLAIM)
    fig = figures.learning_curves(snap.curves, runs, pair, study.metric) if len(pair) else None
    if fig is not None:
        made["learning_curves_uw_vs_regular"] = (
            fig, "Learning curves of uniform against regular writing (the paper's headline comparison), the same "
                 "model and memory: mean over seeds with a ± std band.")
    if study.metric == "accuracy":
        fig = figures.theory_bound(summary)
        if fig is not None:
            made["theory_bound"] = (fig, "The bound g_λ at the optimal (uniform) intervals against (D+1)/T "
                                         "(C = 1), over the measured accuracy of the memory models.")
    traces = snap.traces()
    if traces:
        by_cell = {r["cell"]: r for _, r in summary.iterrows()}
        groups: Dict[tuple, List[str]] = {}
        for cell in [c for c in summary["cell"] if c in traces]:
            r = by_cell[cell]
            key = (r["task"], f"T{int_text(r['seq_len'])}", f"D{int_text(r['memory_size'])}", r["model"],
                   r["controller"])
            groups.setdefault(key, []).append(cell)
        kinds = (("memory", figures.memory_heatmaps, figures.trace_title,
                  "write weights while encoding, read weights while decoding (rows are steps, columns memory "
                  "slots), write gate."),
                 ("sequences", figures.generated_sequences, figures.sequence_title,
                  "input and true continuation (red), generated continuation (blue), write gate of every step "
                  "underneath."))
        for key, cells in groups.items():
            cells.sort(key=lambda c: writer_rank(by_cell[c]["writer"]))
            labels = {c: model_label(by_cell[c]) for c in cells}
            arrays = {c: traces[c]["arrays"] for c in cells}
            for prefix, draw, title_of, caption in kinds:
                title = title_of(by_cell[cells[0]])
                fig = draw(arrays, labels, title)
                if fig is not None:
                    name = prefix + "_" + "_".join(slug(k) for k in key if k and k not in ("T", "D"))
                    made[name] = (fig, f"{title}: {caption}")
    return made


def _pareto_figure(study: StudyView, points: pd.DataFrame) -> Dict[str, tuple]:
    """A multi-objective study's front: the measure against seconds per 100 updates (else its first cost)."""
    from uwbench import metrics

    costs = [m for m, _ in study.objectives[1:]]
    cost = metrics.COSTS["seconds_per_100" if "seconds_per_100" in costs else costs[0]]
    info = metric_info(study.metric)
    fig = figures.pareto_front(points, info["column"], cost.run_key, study.metric,
                               cost.title + (f" ({cost.unit})" if cost.unit else ""))
    if fig is None:
        return {}
    return {"pareto_front": (fig, f"{cap(info['name'])} against {cost.title}: one point per cell and "
                                  "configuration (mean over the final runs), colour = writer, label and size = "
                                  "(D+1)/T; filled and joined = Pareto-optimal, hollow = dominated.")}


def _missing_line(study: StudyView, missing: List[str], set_flag: str = "") -> str:
    path = display_path(study.path) or f"studies/{study.id}.yaml"
    profile = f"--profile {study.profiles[0]} " if len(study.profiles) == 1 else ""  # the runs' own profile
    return (f"**Cells not run ({len(missing)}):** {', '.join(missing)}; run them with "
            f"`uwbench sweep {path} {profile}" + (f"{set_flag.strip()} " if set_flag else "")
            + " ".join(f"--cells '{c}'" for c in missing) + "`.")


def _seeds_missing_line(study: StudyView, lacking: Dict[str, List[int]], set_flag: str = "") -> str:
    path = display_path(study.path) or f"studies/{study.id}.yaml"
    profile = f"--profile {study.profiles[0]}" if len(study.profiles) == 1 else ""
    n = sum(len(v) for v in lacking.values())
    each = "; ".join(f"{cell} seed{'s' if len(v) > 1 else ''} {', '.join(map(str, v))}" for cell, v in lacking.items())
    command = " ".join(x for x in ("uwbench sweep", path, profile, set_flag.strip()) if x)
    return (f"**Seeds not run yet ({n} run{'s' if n != 1 else ''}):** {each}. The cells' means are over the seeds that ran; `{command}` "
            "runs the rest (on a machine without the runs' store, `uwbench restore` with the same study and "
            "profile first).")


def set_flag(runs: pd.DataFrame) -> str:
    """The ``--set`` flags of the sweep the runs came from (' --set a.b=v ...'), '' for a plain sweep or a
    snapshot without the column (``study.runs_overrides``)."""
    return set_flags(runs_overrides(runs))


def _figures_shown(folder: str) -> List[str]:
    """The figures a report's README.md in ``folder`` shows (``![caption](name.png)``): an earlier build's,
    so removable when this build no longer draws them; none for a README uwbench did not write."""
    import re

    try:
        with open(os.path.join(folder, "README.md"), encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return []
    if GENERATED_MARKER not in text[:4096]:
        return []
    return sorted({name for name in re.findall(r"!\[[^\]]*\]\(([^)/\\]+\.png)\)", text)})


def _remove_stale(folder: str, keep: List[str], shown_before: List[str] = ()) -> None:
    """Remove the report files of an earlier build that this one did not make: files named as this module
    names its files (``MADE``), and the figures the earlier README showed; nothing else (a user's notes and
    data in the folder stay)."""
    keep_abs = {os.path.abspath(p) for p in keep}
    folder_glob = glob.escape(folder)
    ours = {p for pattern in MADE for p in glob.glob(os.path.join(folder_glob, pattern))}
    ours |= {os.path.join(folder, name) for name in shown_before if os.path.isfile(os.path.join(folder, name))}
    for path in sorted(ours):
        if os.path.abspath(path) not in keep_abs:
            os.remove(path)


# --------------------------------------------------------------------------------------------------
# README.md (report.html is its rendering: rendering/page.py)
# --------------------------------------------------------------------------------------------------


def _run_facts(runs: pd.DataFrame) -> Dict[str, str]:
    finals = runs[runs["role"] == "final"]
    trials = runs[runs["role"] == "trial"]

    def values(col):
        return ", ".join(sorted({str(v) for v in runs[col] if isinstance(v, str) and v})) or "—"

    going = int(finals["status"].isin(INTERRUPTED).sum())  # not over: they resume
    return {
        "finals": f"{len(finals)} final runs ({int((finals['status'] == 'finished').sum())} finished, "
                  f"{int((finals['status'] == 'failed').sum())} failed"
                  + (f", {going} interrupted or running" if going else "") + ")",
        "trials": f"{len(trials)} search trials" if len(trials) else "",
        "git_sha": values("git_sha"),
        "spec_hash": values("spec_hash"),
        "device": values("device"),
        "profile": values("profile") if "profile" in runs.columns else "—",
        "backend": values("backend") if "backend" in runs.columns else "—",
    }


def _backend_flag(backends: str) -> str:
    """The sweep command's --backend: nothing for Optuna (the default) or unknown."""
    return f" --backend {backends}" if backends not in ("—", "", "optuna") and "," not in backends else ""


def _snapshot_path(study: StudyView, folder: str) -> str:
    """The report's runs.csv as the rebuild command names it: ``reports/<id>/runs.csv``, or for a report in a
    folder of its own inside the study's (``reports/<id>/<name>/``, e.g. Table 1's T=100 columns) that folder's."""
    name = os.path.basename(os.path.normpath(folder)) if folder else study.id
    parent = os.path.basename(os.path.dirname(os.path.normpath(folder))) if folder else ""
    sub = f"{name}/" if name != study.id and parent == study.id else ""
    return f"reports/{study.id}/{sub}runs.csv"


def _profile_flag(profiles: str) -> str:
    if profiles in ("—", ""):
        return ""
    if "," in profiles:
        return f"   # profiles: {profiles}"
    return f" --profile {profiles}"


def headline(summary: pd.DataFrame, metric: str) -> str:
    """Our numbers against the paper's for the first few compared cells (spec order)."""
    info = metric_info(metric)
    dec = info["decimals"]
    unit = info["unit"]
    done = summary[summary["state"] == OK]
    compared = done[done["paper"].map(is_number)]
    pick = compared if len(compared) else done
    parts = []
    rows = [r for _, r in pick.head(MAX_HEADLINE).iterrows()]
    names = [f"{model_label(r)} {column_label(r, ['task', 'seq_len', 'memory_size'])}".strip() for r in rows]
    for r, name in zip(rows, names):
        if names.count(name) > 1:  # cells the label cannot tell apart (e.g. the same model under other clips)
            name = str(r["cell"])
        text = f"{name}: {fmt(r['mean'], dec)}{unit}"
        if is_number(r["paper"]):
            text += f" (paper {fmt(r['paper'], dec)}{unit})"
        parts.append(text)
    more = len(pick) - MAX_HEADLINE
    return "; ".join(parts) + (f"; +{more} more" if more > 0 else "")


def status_meaning(summary, status: str) -> str:
    """What the study's status says: it is its worst cell's, which cells set it, and that it compares numbers
    with the paper's, not the paper's claims (those are the verdicts)."""
    if status in (NOT_RUN, NO_PAPER):
        return ("The status is the worst verdict of the cells that have a paper value; none has one here."
                if status == NO_PAPER else "")
    cells = [str(c) for c, v in zip(summary["cell"], summary["verdict"]) if v == status]
    compared = int(summary["verdict"].isin([MATCHES, WITHIN, OFF, REDUCED]).sum())
    shown = ", ".join(cells[:6]) + (f" and {len(cells) - 6} more" if len(cells) > 6 else "")
    return (f"The study takes its worst cell's verdict: {len(cells)} of the {compared} cells with a paper value "
            f"are {status} ({shown}; the All cells table has each). It compares each cell's number with the paper's "
            "at one budget; whether the paper's claims hold is the Verdicts section's question.")


def _readme(study: StudyView, summary, status, blocks, cells, ttable, pngs, runs, verdict=None, searched=None,
            ptable=None, missing=(), prot=None, folder: str = "", seeds_missing=None, whole=((), ())) -> str:
    facts = _run_facts(runs)
    path = display_path(study.path) or f"studies/{study.id}.yaml"
    n_run = int((summary["state"] == OK).sum())
    lines = [f"# {study.title or study.id} (`{study.id}`)", "",
             "<!-- generated by `uwbench report`; do not edit -->", ""]
    if study.question:
        lines += [f"**Question.** {study.question}", ""]
    if study.paper_ref:
        lines += [f"**Paper.** {study.paper_ref}", ""]
    lines += [f"**Status:** {status} ({n_run}/{len(summary)} cells run; verdict per cell: the paper's value "
              f"within 2 std of ours or {match_floor_text(study.metric)}, whichever is wider, = matches, "
              f"within {study.tol:g}"
              f"{' pp' if study.metric == 'accuracy' else ' (relative)'} = within tolerance, else off; only at the "
              "paper's budget: a cell that made fewer updates than the paper's is marked reduced budget). "
              + status_meaning(summary, status), ""]
    flags = set_flag(runs)
    if missing:
        lines += [_missing_line(study, missing, flags), ""]
    if seeds_missing:
        lines += [_seeds_missing_line(study, seeds_missing, flags), ""]
    lines += ["## How it was made", "", "```bash",
              f"uwbench sweep {path}" + _backend_flag(facts["backend"]) + _profile_flag(facts["profile"]) + flags,
              f"uwbench report {path}" + (_profile_flag(facts["profile"]) + flags
                                          if flags or facts["profile"] not in ("—", "", study.default_profile)
                                          else ""),
              f"uwbench report --from-csv {_snapshot_path(study, folder)}   # rebuild without MLflow",
              "```", "",
              f"- MLflow experiment: `{study.id}`; {facts['finals']}" + (f", {facts['trials']}" if facts["trials"] else ""),
              f"- MLflow UI: {study_hint(study.id)}",
              f"- spec hash: `{study.spec_hash or '—'}` (runs: {facts['spec_hash']})",
              f"- git sha of the runs: {facts['git_sha']}",
              f"- device: {facts['device']}", ""]
    lines += ["## Results", ""]
    for t in blocks:
        lines += [f"**{t.title}**", "", to_markdown(t).rstrip("\n"), ""]
        lines += [f"_{n}_" for n in t.notes] + [""]
    tables, more = whole
    if study.whole_table_in and folder and os.path.basename(os.path.normpath(folder)) != study.id:
        lines += [f"_These are more columns of the paper's table: the report of profile {study.whole_table_in}, "
                  "[`../README.md`](../README.md), shows them beside its own, as the paper's whole table._", ""]
    if tables:
        own = facts["profile"]
        parts = ", ".join(f"[`{c.source}/`]({c.source}/README.md) (profile {c.profile})" for c in more)
        lines += [f"**The paper's whole table**: this report's cells (profile {own}) beside those of {parts}, each "
                  "cell from its own run set (CSV: " + ", ".join(f"[`{n}`]({n})" for n in whole_csv_names(tables)) + ")", ""]
        for t in tables:
            lines += [f"**{t.title}**", "", to_markdown(t).rstrip("\n"), ""]
    if study.paper_notes:
        lines += [f"_Paper values: {study.paper_notes}_", ""]
    if study.stand_ins():
        lines += [f"_Renamed cells: {study.stand_ins()}._", ""]
    if prot is not None and prot.columns:
        lines += [f"**{prot.title}**", "", to_markdown(prot).rstrip("\n"), ""]
        lines += [f"_{n}_" for n in prot.notes] + ["", "CSV: [`protocols.csv`](protocols.csv)", ""]
    elif prot is not None:
        lines += [f"**{prot.title}.** " + " ".join(prot.notes), ""]
    lines += ["**All cells** (lr and clip: the settings the final runs used; CSV: [`cells.csv`](cells.csv); "
              "LaTeX: [`accuracy.tex`](accuracy.tex))", "", to_markdown(cells).rstrip("\n"), ""]
    if ttable is not None:
        lines += ["## Time", "", to_markdown(ttable).rstrip("\n"), ""]
        lines += [f"_{n}_" for n in ttable.notes] + [""]
    if verdict is not None:
        lines += [verdict_tables.markdown(verdict)]
    if ptable is not None:
        lines += ["## Pareto front", "", to_markdown(ptable).rstrip("\n"), ""]
        lines += [f"_{n}_" for n in ptable.notes] + ["", "CSV: [`pareto.csv`](pareto.csv)", ""]
    if pngs:
        lines += ["## Figures", ""]
        for name, caption in pngs:
            lines += [f"![{caption}]({name}.png)", "", f"_{caption}_", ""]
    if searched is not None:
        lines += [search.markdown(searched)]
    lines += ["## Deviations", ""]
    devs = list(study.deviations) or ["none recorded in the study spec"]
    lines += [f"- {d}" for d in devs] + ["- repository-wide deviations from the authors' code: "
                                         "[`studies/README.md`](../../studies/README.md)", ""]
    lines += ["## Files", "",
              "`runs.csv` (the MLflow rows used), `curves.csv` (learning curves), `traces.csv` (memory traces), "
              "`accuracy.{md,csv,tex}`, `time.{md,csv,tex}`, `cells.csv`, `verdicts.csv` and `orderings.csv` (the "
              "verdicts), " + ("`importance.{md,csv}` (search analysis), " if searched is not None else "")
              + "`report.html` (open in a browser).", ""]
    return "\n".join(lines)
