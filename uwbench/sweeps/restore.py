"""Put a committed report's finished runs back into an MLflow store and the Optuna storage, so that a sweep on
a machine that never held them (or lost them) resumes where the report left off instead of training them again.

A report's snapshot (``runs.csv``, ``curves.csv``, ``traces.csv``) is the record of a study that outlives the
machine its sweep ran on. ``restore`` takes from it every finished final run of the run set being planned
(the same study, profile, spec hash and backend) and, for each one the stores do not hold yet:

- an MLflow child run under its cell's parent run, named and tagged as the sweep names and tags it, with the
  resolved config as params and ``config.json``, the snapshot's numbers as metrics, its learning curves
  (``curves.csv``) as metric histories, its memory trace (``traces.csv``, where the report kept one) as the
  artifact ``snapshot.RESTORED_TRACE``, and the tags ``restored_from`` (the snapshot folder) and
  ``restored_run_id`` (the run id the snapshot names);
- a COMPLETE trial in the cell's Optuna study, with its job key, seed and objective, pointing at that run.

The weights are not in a snapshot: a restored run is never trained again; its ``config.json`` is the cell's
config as this code resolves it (``uwbench trace`` replays from it and checks the replay against the curve).
Every restored run is read back through the snapshot's reader (a report's) and must give the snapshot's row (run id
aside) and curves; otherwise nothing more is written and the error names the column. Restoring the
same snapshot twice adds nothing. A restore stopped between writing a run and recording its trial (killed, or
refused by that check) leaves a half-restored run; the next restore deletes it, says so, and writes it again.
Only faithful studies are restored (a tuned study's final runs depend on its
search trials, which a snapshot holds only in part).

**A run set widened by seeds.** A profile given more seeds (``seeds``, ``cell_seeds``) plans another run set: its
spec hash covers the seeds. Its runs on the old seeds are still the same runs (a faithful run's config is its
cell's and its seed), so rows of a snapshot whose spec hash is this plan's with fewer seeds are restored into
this run set, tagged with this plan's spec hash and ``restored_spec_hash`` (the one they were swept under). The
narrower run set is recognised only by recomputing its hash (``narrower_run_sets``): the plan with the study's
seeds and no ``cell_seeds``, or with the seeds each cell of the snapshot holds; anything else stays "another
run set".
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Set, Tuple

from uwbench import axes
from uwbench.spec import Plan
from uwbench.snapshot import RESTORED_RUN_ID, RESTORED_TRACE
from uwbench.sweeps import common, locks, planning
from uwbench.sweeps.planning import Context
from uwbench.values import present

RESTORED_FROM = "restored_from"  # tag: the snapshot folder a restored run came from
RESTORED_SPEC_HASH = "restored_spec_hash"  # tag: the narrower run set a restored run was swept under
COMPARED_AWAY = ("run_id",)  # the one column a restored run may not keep


class RestoreError(common.SweepError):
    """A snapshot cannot be restored; the message names what is wrong and what to do."""


@dataclass
class Restored:
    """What ``restore`` did: runs written, runs the stores already held, rows of the snapshot it left out."""

    written: List[Tuple[str, int, str]] = field(default_factory=list)  # (cell, seed, new run id)
    present: List[Tuple[str, int]] = field(default_factory=list)
    left_out: Dict[str, int] = field(default_factory=dict)  # reason -> rows
    removed: List[str] = field(default_factory=list)  # half-restored runs an earlier, stopped restore left

    def lines(self) -> List[str]:
        """The summary line, then one line per reason rows were left out."""
        out = [f"restored {len(self.written)} run(s); {len(self.present)} already in the stores (planned or run)"
               + (f"; {len(self.removed)} half-restored run(s) of a stopped restore removed" if self.removed else "")]
        return out + [f"  left out: {n} row(s) {why}" for why, n in sorted(self.left_out.items())]


def narrower_run_sets(plan: Plan, runs) -> Set[str]:
    """The spec hashes of ``runs`` (a snapshot's rows) that are ``plan``'s run set with fewer seeds (module
    docstring). A hash is recognised by recomputing it: ``plan`` with the study's seeds or the seeds the
    snapshot holds, and no ``cell_seeds`` or the snapshot's own per cell; each cell's old seeds must be among
    the seeds ``plan`` gives it."""
    import dataclasses

    from uwbench.spec.hash import plan_hash

    if plan.mode != "faithful" or not len(runs):
        return set()
    mine = runs[(runs["profile"] == plan.profile) & (runs["spec_hash"] != plan.spec_hash)]
    out: Set[str] = set()
    for spec_hash, rows in mine.groupby("spec_hash"):
        held = {cell: sorted({int(s) for s in r["seed"]}) for cell, r in rows.groupby("cell")}
        union = sorted({s for seeds in held.values() for s in seeds})
        seed_lists = [list(plan.spec.seeds), list(plan.seeds), union]
        per_cell = [{}, {c: s for c, s in held.items() if c in {x.id for x in plan.cells}}]
        for seeds, cell_seeds in ((a, b) for a in seed_lists for b in per_cell):
            variant = dataclasses.replace(plan, seeds=seeds, cell_seeds={c: s for c, s in cell_seeds.items()
                                                                        if s != seeds})
            if plan_hash(variant) != spec_hash:
                continue
            if all(set(variant.seeds_of(c.id)) <= set(plan.seeds_of(c.id)) for c in plan.cells):
                out.add(str(spec_hash))
            break
    return out


def candidates(plan: Plan, runs, backend: str) -> Tuple[List[Mapping], Dict[str, int]]:
    """The snapshot rows that are finished final runs of ``plan``'s run set (or of a narrower one, with the
    spec hash made this plan's: ``narrower_run_sets``), and the others counted by why."""
    kept, left = [], {}

    def leave(why: str) -> None:
        left[why] = left.get(why, 0) + 1

    cells = {c.id for c in plan.cells}
    narrower = narrower_run_sets(plan, runs)
    wanted_overrides = json.dumps(plan.overrides, sort_keys=True) if plan.overrides else ""
    for row in runs.to_dict("records"):
        if row.get("role") != "final":
            leave("that are not final runs")
        elif row.get("status") != "finished":
            leave(f"with status {row.get('status')!r} (only finished runs are restored)")
        elif row.get("profile") != plan.profile or (row.get("spec_hash") != plan.spec_hash
                                                    and row.get("spec_hash") not in narrower):
            leave(f"of another run set (profile {row.get('profile')}, spec hash {row.get('spec_hash')})")
        elif (row["backend"] if present(row.get("backend")) else "optuna") != backend:
            leave(f"swept with the {row.get('backend')} backend")
        elif (row.get("overrides") if present(row.get("overrides")) else "") != wanted_overrides:
            leave("made with other --set values")
        elif row.get("cell") not in cells:
            leave("of cells not planned (--cells)")
        elif row.get("spec_hash") != plan.spec_hash:
            kept.append({**row, "spec_hash": plan.spec_hash, RESTORED_SPEC_HASH: row["spec_hash"]})
        else:
            kept.append(row)
    return kept, left


def _job_for(plan: Plan, row: Mapping) -> planning.FinalJob:
    """The planned final job the row is a run of (by seed and grid point)."""
    seed = int(row["seed"])
    grid = json.loads(row["search_params"]) if present(row.get("search_params")) else {}
    for job in planning.final_jobs(plan, row["cell"], []):
        if job.seed == seed and {k: v for k, v in job.params.items() if k != axes.SEED_PARAM} == grid:
            return job
    raise RestoreError(f"snapshot run {row['run_id']} ({row['cell']}, seed {seed}, params {grid}) is no run the "
                       f"study plans: restore it with the study file and --profile/--set it was swept with")


def _tags(ctx: Context, job: common.Job, row: Mapping, folder: str, resolved) -> Dict[str, object]:
    from uwbench import snapshot as snap_mod

    tags = common.child_tags(job, resolved)
    metric_cols = set(snap_mod.METRIC_COLUMNS)
    for col in snap_mod.all_columns():  # the snapshot's own values win: they are what the run recorded
        if col in metric_cols or col in COMPARED_AWAY or not present(row.get(col)):
            continue
        value = row[col]
        if col in snap_mod.int_columns() and isinstance(value, float):
            value = int(value)
        tags[col] = value
    tags.update({"status": "finished", RESTORED_FROM: folder, RESTORED_RUN_ID: row["run_id"]})
    if present(row.get(RESTORED_SPEC_HASH)):
        tags[RESTORED_SPEC_HASH] = row[RESTORED_SPEC_HASH]
    return tags


def _log_curves(run, curves) -> None:
    from mlflow.entities import Metric

    items = [Metric(str(r["metric"]), float(r["value"]), 0, int(r["step"])) for r in curves.to_dict("records")]
    for i in range(0, len(items), 1000):  # MLflow takes at most 1,000 metrics a batch
        run.client.log_batch(run.run_id, metrics=items[i : i + 1000])


def _write_run(ctx: Context, job: common.Job, row: Mapping, snap, folder: str) -> str:
    from uwbench.config import flatten
    from uwbench import snapshot as snap_mod
    from uwbench.tracking.mlflow import Run
    from uwbench.training.config import resolve_run

    resolved = resolve_run(job.config()).as_dict()
    run = Run(job.study, run_name=job.run_name, tags=_tags(ctx, job, row, folder, resolved),
              parent_run_id=job.parent_run_id, uri=job.uri, experiment_id=job.experiment_id)
    try:
        run.log_params(flatten(resolved))
        run.log_dict(resolved, "config.json")
        curves = snap.curves[snap.curves["run_id"] == row["run_id"]] if len(snap.curves) else snap.curves
        if len(curves):
            _log_curves(run, curves)
        last = int(row["steps"]) if present(row.get("steps")) else 0
        run.log_metrics({c: row[c] for c in snap_mod.METRIC_COLUMNS if present(row.get(c))}, last)
        t = snap.traces_frame
        trace = t[t["run_id"] == row["run_id"]].to_dict("records") if len(t) else []
        if trace:
            run.log_text(snap_mod.to_csv_text(snap_mod.TRACE_COLUMNS, trace), RESTORED_TRACE)
        run.end("FINISHED")
    except BaseException:
        run.end("FAILED")
        raise
    return run.run_id


def _remove_half_restored(plan: Plan, ctx: Context, studies, out) -> List[str]:
    """Delete the restored MLflow runs no Optuna trial points at: what a restore stopped (killed, or refused
    by the read-back check) between writing a run and recording its trial leaves, RUNNING or ended. The
    study lock is held, so no restore of this machine is writing one now; each is written again."""
    from uwbench.tracking.mlflow import delete_run, find_runs

    recorded = {t.user_attrs.get("mlflow_run_id") for cell in plan.cells for t in studies.trials(cell.id, "final")}
    removed = []
    for r in find_runs(ctx.experiment_id, common.children_filter(plan, ctx.backend), ctx.uri):
        if r["tags"].get(RESTORED_FROM) and r["run_id"] not in recorded:
            delete_run(r["run_id"], ctx.uri)
            removed.append(r["run_id"])
            out(f"  removed {r['run_id']} ({r['tags'].get('cell')}, seed {r['tags'].get('seed')}, {r['status']}): a "
                "restore stopped before recording it; it is restored again")
    return removed


def _curve_points(curves) -> set:
    from uwbench import snapshot as snap_mod

    return {(str(r["metric"]), int(r["step"]), snap_mod.format_value(float(r["value"])))
            for r in curves.to_dict("records")}


def _check_round_trip(plan: Plan, row: Mapping, snap, run_id: str, uri: str) -> None:
    """The restored run, read as a report reads MLflow, must give the snapshot's row and curves."""
    import pandas as pd

    from uwbench import snapshot as snap_mod
    from uwbench.tracking import mlflow as tracking

    frame = tracking.search_runs([plan.id], uri, filter_string=f"attributes.run_id = '{run_id}'")
    rows = snap_mod.normalise_mlflow(frame, plan.id)
    history = pd.DataFrame([{"run_id": r, "metric": m, "step": int(s), "value": v} for r, m, s, v in
                            tracking.metric_histories([run_id], snap_mod.CURVE_METRICS, uri)],
                           columns=list(snap_mod.CURVE_COLUMNS))
    text = snap_mod.runs_text(snap_mod.with_steps(rows, history))
    back = snap_mod.read_csv_text(text, snap_mod.numeric_columns()).to_dict("records")
    if len(back) != 1:
        raise RestoreError(f"restored run {run_id} cannot be read back from {uri} ({len(back)} rows)")
    got = back[0]
    differ = [c for c in snap_mod.all_columns() if c not in COMPARED_AWAY
              and snap_mod.format_value(_blank(got.get(c))) != snap_mod.format_value(_blank(row.get(c)))]
    if differ:
        raise RestoreError(f"restored run {run_id} (snapshot run {row['run_id']}) reads back with other values in "
                           f"{', '.join(differ)}: " + "; ".join(f"{c}: {row.get(c)!r} -> {got.get(c)!r}"
                                                              for c in differ[:4]))
    want = snap.curves[snap.curves["run_id"] == row["run_id"]] if len(snap.curves) else snap.curves
    if _curve_points(history) != _curve_points(want):
        raise RestoreError(f"restored run {run_id} (snapshot run {row['run_id']}) reads back with other learning "
                           "curves than the snapshot's")


def _blank(value):
    return None if not present(value) else value


def restore(plan: Plan, folder: str, backend: str = "optuna", uri: Optional[str] = None,
            experiment: Optional[str] = None, storage: Optional[str] = None, out=print) -> Restored:
    """Restore the snapshot in ``folder`` (a report folder) into the stores ``plan`` sweeps into (module
    docstring). Holds the study's lock: no sweep of it may run meanwhile on this machine."""
    from uwbench import snapshot as snap_mod
    from uwbench.sweeps.backends.optuna_studies import Settings, Studies, open_storage, phase_space
    from uwbench.sweeps.storage import storage_url

    if backend != "optuna":
        raise RestoreError(f"restore writes the optuna backend's storage; the {backend} backend keeps no trials "
                           "of its own to restore into (sweep with --backend optuna)")
    if plan.mode != "faithful":
        raise RestoreError(f"study {plan.id} is {plan.mode}: only faithful studies are restored (a tuned study's "
                           "final runs depend on search trials a snapshot holds only in part)")
    if not os.path.isfile(os.path.join(folder, "runs.csv")):
        raise RestoreError(f"no runs.csv in {folder}: give the report folder of the study "
                           f"(e.g. reports/{plan.id})")
    snap = snap_mod.Snapshot.from_dir(folder)
    rows, left = candidates(plan, snap.runs, backend)
    result = Restored(left_out=left)
    space = phase_space(plan, "final")
    kinds = sorted({type(p).__name__ for p in space.values()} - {"ChoiceParam"})
    if kinds:
        raise RestoreError(f"study {plan.id}'s final runs are drawn from {', '.join(kinds)} params: only grids of "
                           "choices are restored")
    jobs = [(row, _job_for(plan, row)) for row in rows]
    with locks.study_lock(plan) as lock_path:
        uri, experiment_id, cell_runs = common.setup_tracking(plan, uri, experiment, backend)
        ctx = Context(plan=plan, backend=backend, uri=uri, experiment_id=experiment_id, cell_runs=cell_runs,
                      lock_path=lock_path)
        settings = Settings(ctx=ctx, storage=storage_url(plan, storage), heartbeat_interval=10, grace_period=60,
                            max_retries=0, devices=[None])
        store, retry = open_storage(settings)
        studies = Studies(settings, store, retry, create=True)
        try:
            result.removed = _remove_half_restored(plan, ctx, studies, out)
            for row, final in jobs:
                key = final.key(row["cell"])
                if key in studies.by_key(row["cell"], "final"):
                    result.present.append((row["cell"], int(row["seed"])))
                    continue
                job = ctx.job(row["cell"], "final", final.params, final.seed, final.index, final.extra)
                run_id = _write_run(ctx, job, row, snap, folder)
                _check_round_trip(plan, row, snap, run_id, uri)
                studies.add_restored(row["cell"], final, space, *objective_of(plan, row), run_id,
                                     {RESTORED_RUN_ID: row["run_id"]})
                result.written.append((row["cell"], final.seed, run_id))
                widened = (f", swept in the narrower run set {row[RESTORED_SPEC_HASH]}"
                           if present(row.get(RESTORED_SPEC_HASH)) else "")
                out(f"  restored {row['cell']} seed {final.seed} (snapshot run {row['run_id']}{widened}) as {run_id}")
        finally:
            records, _ = studies.records()
            common.close_cell_runs(plan, experiment_id, cell_runs, records, uri,
                                   planning.finished_cells(plan, records))
    return result


def objective_of(plan: Plan, row: Mapping) -> Tuple[float, Optional[float], Optional[float]]:
    """(objective value, test value, best evaluation value) of a snapshot row, as a finished trial records them."""
    objective = plan.objective.as_metric
    value = row.get(plan.objective.run_metric)
    if not present(value):
        raise RestoreError(f"snapshot run {row['run_id']} has no {plan.objective.run_metric}: it cannot be told to "
                           "Optuna as finished")
    test, best = row.get(objective.at("test").key), row.get(objective.at("best_eval").key)
    return float(value), (float(test) if present(test) else None), (float(best) if present(best) else None)

