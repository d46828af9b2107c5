"""The reports' index, ``reports/README.md``: one row per study (its headline numbers, cells run, status and
the paper's claims in our runs), then the claims no committed run could test yet and the budget that would
(``untested_section``). Writing it also rewrites the results block of the README beside the reports folder
(``readme_block``)."""
from __future__ import annotations

import glob
import os
from typing import Dict, List, Optional

import pandas as pd

from uwbench import atomic
from uwbench.errors import UserError
from uwbench.report.analysis.summary import NOT_RUN, OK, match_floor_text, study_status, summarize
from uwbench.report.data.guard import generated
from uwbench.report.data.study import StudyView, from_runs
from uwbench.report.data.study import load as load_study
from uwbench.report.rendering import readme_block
from uwbench.report.rendering.readme_block import as_timed, claim_text
from uwbench.report.rendering.render import headline
from uwbench.report.verdicts import regime as regime_mod
from uwbench.report.verdicts.judge import NOT_TESTABLE
from uwbench.snapshot import Snapshot
from uwbench.snapshot.folders import BOARD_PAGE, PROGRESS_FILE, is_board_folder
from uwbench.tabular import Table, to_markdown
from uwbench.values import is_number


def index_entries(root: str, studies_dir: str = "studies") -> List[Dict[str, str]]:
    """One entry per study file, and per report folder without one, from the committed snapshots."""
    entries = []
    seen = set()
    for path in sorted(glob.glob(os.path.join(studies_dir, "*.yaml"))):
        try:
            from uwbench import spec as spec_mod

            sid = spec_mod.load(path).id
            folder = os.path.join(root, sid)
            if is_board_folder(folder):  # a leaderboard's folder: its board, or its baselines being recorded
                seen.add(sid)
                entries.append(_board_entry(spec_mod.load(path), folder))
                continue
            snap = Snapshot.from_dir(folder) if os.path.exists(os.path.join(folder, "runs.csv")) else None
            view = load_study(path, snap.runs if snap is not None else None)
            budget_profiles = paper_budget_profiles(spec_mod.load(path), path)
        except Exception as exc:  # noqa: BLE001 - a broken study is listed as such, not fatal here
            entries.append({"id": os.path.splitext(os.path.basename(path))[0], "title": "", "headline": "",
                            "cells": "", "status": f"invalid spec ({type(exc).__name__})", "claims": "", "link": ""})
            continue
        seen.add(view.id)
        entry = {**_entry(view, root, snap), "path": path, "budget_profiles": budget_profiles}
        if snap is not None:  # the paper's updates as the README's results block names them (none: no artifact)
            entry["paper_steps"] = readme_block.paper_updates(spec_mod.load(path), path)
        entries.append(entry)
        for sub in readme_block.nested_reports(folder) if snap is not None else []:  # another profile's report
            rel = f"{sid}/{os.path.basename(sub)}"
            nested = Snapshot.from_dir(sub)
            entries.append({**_entry(load_study(path, nested.runs), root, nested, rel), "id": rel, "path": path,
                            "budget_profiles": budget_profiles,
                            "paper_steps": readme_block.paper_updates(spec_mod.load(path), path)})
    for runs_csv in sorted(glob.glob(os.path.join(root, "*", "runs.csv"))):
        sid = os.path.basename(os.path.dirname(runs_csv))
        if sid in seen or is_board_folder(os.path.dirname(runs_csv)):
            continue
        snap = Snapshot.from_dir(os.path.dirname(runs_csv))
        entries.append(_entry(from_runs(sid, snap.runs), root, snap))
    return entries


def _board_entry(spec, folder: str) -> Dict[str, str]:
    """The index's line for a leaderboard folder: a link to its board, or to its progress while the baselines
    are being recorded."""
    done = os.path.exists(os.path.join(folder, BOARD_PAGE))
    page = BOARD_PAGE if done else PROGRESS_FILE
    return {"id": spec.id, "title": spec.title, "headline": "", "cells": "",
            "status": "leaderboard" if done else "baselines being recorded", "claims": "",
            "link": f"{os.path.basename(folder)}/{page}"}


def _entry(view: StudyView, root: str, snap: Optional[Snapshot] = None, rel: Optional[str] = None) -> Dict[str, str]:
    """A report folder's line (``rel``: the folder under ``root``, the study's id by default)."""
    rel = rel or view.id
    if snap is None:
        return {"id": view.id, "title": view.title, "headline": "", "cells": f"0/{len(view.cells)}",
                "status": NOT_RUN, "claims": "", "link": ""}
    runs = snap.runs[snap.runs["study"].isin([view.id, ""])]
    summary = summarize(view, runs)
    n_run = int((summary["state"] == OK).sum())
    profiles = sorted({str(p) for p in runs.get("profile", pd.Series(dtype=object)).dropna() if str(p)})
    cells = f"{n_run}/{len(summary)}" + (f" ({', '.join(profiles)})" if profiles else "")
    steps = [int(v) for v in summary["steps"] if is_number(v)]
    paper = [int(v) for v in summary["paper_steps"] if is_number(v)]
    return {"id": view.id, "title": view.title, "headline": headline(summary, view.metric),
            "cells": cells, "status": study_status(summary), "claims": claim_summary(os.path.join(root, rel)),
            "link": f"{rel}/README.md", "untested": untested_claims(os.path.join(root, rel)),
            "regimes": regime_summary(os.path.join(root, rel)),
            "steps": min(steps) if steps else None, "paper_steps": max(paper) if paper else None}


def _report_table(folder: str, name: str, column: str) -> Optional[pd.DataFrame]:
    """A report folder's ``name`` CSV as strings, or None when it is absent, empty or lacks ``column``."""
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return frame if len(frame) and column in frame.columns else None


def untested_claims(folder: str) -> List[str]:
    """The claims a report folder's verdicts.csv calls not testable at its budget."""
    frame = _report_table(folder, "verdicts.csv", "claim_verdict")
    if frame is None:
        return []
    rows = frame[frame["claim_verdict"] == NOT_TESTABLE].drop_duplicates("claim")
    return [claim_text(r) for _, r in rows.iterrows()]


def paper_budget_profiles(spec, path: str) -> List[str]:
    """The profiles whose every cell makes as many updates as the paper's profile gives its cells."""
    from uwbench import spec as spec_mod

    def steps(plan):
        return [int(c.config.get("train", {}).get("steps", 0) or 0) for c in plan.cells]

    try:
        base = spec_mod.expand(spec, spec_mod.BASE_PROFILE, path)
    except Exception:  # noqa: BLE001 - a study whose paper profile does not expand has no budget to name
        return []
    want = max(steps(base), default=0)
    out = []
    for name in [spec_mod.BASE_PROFILE, *sorted(spec.profiles)]:
        try:
            plan = base if name == spec_mod.BASE_PROFILE else spec_mod.expand(spec, name, path)
        except Exception:  # noqa: BLE001 - a profile that does not expand runs nothing
            continue
        if plan.cells and min(steps(plan)) >= want:
            out.append(name)
    return out


REGIME_WORDS = {regime_mod.RISING: "rising (still improving over the last quarter)",
                regime_mod.FALLING: "falling (getting worse over the last quarter)",
                regime_mod.AT_GUESS: "at the guessing level (training loss)",
                regime_mod.UNKNOWN: "unknown"}


def regime_summary(folder: str) -> str:
    """How many of a report folder's cells are in each regime that is not converged (its ``regimes.csv``),
    with the reason where the regime is unknown; "" when the file is absent or every cell converged."""
    frame = _report_table(folder, "regimes.csv", "regime")
    if frame is None:
        return ""
    parts = []
    for state, words in REGIME_WORDS.items():
        cells = frame[frame["regime"] == state]
        if not len(cells):
            continue
        text = f"{len(cells)} {words}"
        if state == regime_mod.UNKNOWN and "detail" in frame.columns:
            details = sorted({d for d in cells["detail"] if d})
            text += "".join(f": {d}" for d in details[:1]) + (f" (and {len(details) - 1} other reasons)"
                                                             if len(details) > 1 else "")
        parts.append(text)
    if not parts:
        return ""
    return f"of its {len(frame)} cells, " + "; ".join(parts)


def untested_section(entries: List[Dict]) -> str:
    """The index's list of claims that no committed run could test yet, and the budget that would."""
    lines = []
    for e in entries:
        if not e.get("untested"):
            continue
        ran = f"its runs made {e['steps']:,} updates" if e.get("steps") else "its runs"
        paper = f", the paper's {e['paper_steps']:,}" if e.get("paper_steps") else ""
        names = e.get("budget_profiles") or []
        how = ((" A budget that can test them: the paper's, " if e.get("paper_steps") else " A longer budget: ")
               + "`uwbench sweep " + e.get("path", "")
               + " --profile " + " | ".join(names) + "` (its report then says whether each side converged)."
               if names else "")
        why = f" Why (`{e['id']}/regimes.csv`): {e['regimes']}." if e.get("regimes") else ""
        lines.append(f"- **{e['id']}** ({ran}{paper}): " + "; ".join(e["untested"]) + "." + why + how)
    if not lines:
        return ""
    return ("## Claims not tested yet\n\nNot testable at the committed budget: below the paper's budget a side "
            "had not converged. Each line says why from the report's `regimes.csv` (a cell's curve rising or "
            "falling over its last quarter, its training loss at the guessing level, or too few evaluations in "
            "its last quarter to read a slope: regime unknown), where every cell's figures are.\n\n"
            + "\n".join(lines) + "\n")


def claim_summary(folder: str) -> str:
    """The paper's claims checked in a report folder (its verdicts.csv), each with its verdict."""
    frame = _report_table(folder, "verdicts.csv", "claim_verdict")
    if frame is None:
        return ""
    rows = frame.drop_duplicates("claim")
    return "; ".join(f"{as_timed(claim_text(r), frame[frame['claim'] == r['claim']])}: **{r['claim_verdict']}**"
                     for _, r in rows.iterrows())


def check_index(root: str) -> str:
    """The path of ``<root>/README.md`` when the index may be written there: a README.md that is not a reports
    index (uwbench did not write it) is refused (ValueError), never replaced."""

    path = os.path.join(root, "README.md")
    if os.path.exists(path) and not generated(path):
        raise UserError(f"{path} is not a reports index (it lacks the line \"<!-- generated by `uwbench report`\"): "
                         "the index would replace it; give --out a folder of uwbench's own (new or empty), or move "
                         "that README.md out of it")
    return path


def write_index(root: str, studies_dir: str = "studies") -> str:
    """Write ``<root>/README.md`` (and the results block beside it), if ``check_index`` allows."""
    path = check_index(root)
    entries = index_entries(root, studies_dir)
    t = Table(title="Studies", columns=["Study", "Title", "Ours vs paper", "Cells run (profile)", "Status",
                                               "The paper's claims in our runs"],
                     rows=[[f"[{e['id']}]({e['link']})" if e["link"] else e["id"], e["title"], e["headline"],
                            e["cells"], e["status"], e["claims"]] for e in entries])
    text = ("# Reports\n\n<!-- generated by `uwbench report`; do not edit -->\n\n"
            "One folder per study: tables (ours: mean ± std over final seeds, beside the paper's value), figures, "
            "`runs.csv` (the MLflow rows used) and `report.html`. Rebuild all with `uwbench report --all`; "
            "one without MLflow with `uwbench report --from-csv reports/<study>/runs.csv`.\n\n"
            f"Status: **matches** (the paper's value within 2 std of ours, or within {match_floor_text('accuracy')} of "
            f"accuracy or {match_floor_text('mse')} of an MSE where that is wider), **within tolerance** (within the "
            "study's tolerance), **off**, **not run**, each only where the runs had the paper's budget; cells "
            "that made fewer updates are **reduced budget**, never held against the paper's value. A study takes "
            "its worst cell's verdict. The claims column says whether the paper's claims hold: **yes** / **no** "
            "(Welch's t-test, Holm-corrected across a claim's comparisons, α = 0.05; at the paper's own budget with a "
            "curve still moving, **yes / no at the paper's budget, not converged**), **inconclusive** (within "
            "the noise), **not testable with fewer than 2 seeds** (a side has one), or **not testable at this budget** (below the paper's budget a side had not converged: its "
            "curve rising or falling, its training loss at the guessing level, or too few evaluations in its last "
            "quarter to tell; the list below the table gives each report's reason). A time claim is tested on "
            "CPU seconds of the runs that had a core to themselves (**not testable on shared cores** where a side "
            "has fewer than two), or on wall seconds where the runs recorded no CPU time, and its text says "
            "which.\n\n"
            + to_markdown(t) + "\n" + untested_section(entries))
    atomic.write_text(path, text)
    readme_block.refresh(root, studies_dir)  # the README's results block, from the same files
    return path
