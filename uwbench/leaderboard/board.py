"""The leaderboard's numbers: one row per writer, ranked, with significance and time.

A board is a pure function of a snapshot (``runs.csv`` and ``curves.csv``, ``uwbench.snapshot``)
holding the suite's baseline runs and any writer's runs made at the same profile. Its parts:

- **a row** is a cell group of the suite (``studies/leaderboard.yaml``: ``dnc``, ``dnc_uw``, ...; a new
  writer's group is made by `uwbench leaderboard`): the part of a cell id before its first '-'.
- **a position** is a task at one T and D (a compression ratio (D+1)/T): the board's columns.
- **a cell** is a row at a position: the test metric of its finished final runs as mean ± std over the
  seeds (``summarize``), its regime (``regime.regime``: has its learning curve converged?) and its
  CPU seconds per 100 updates.
- **tests**: each row against the uniform-writing row and the regular-writing row of its own model (of
  the DNC, ``REFERENCE_MODEL``, where its model has none but itself), at every counted position (below)
  both have: not testable when either cell has not converged, inconclusive with fewer than two seeds a
  side, else Welch's t-test, Holm-corrected across the row's comparisons with that reference at
  ``stats.ALPHA`` (the rule of the paper's claims, ``judge.gate`` and ``judge.decide``): better,
  worse, or n.s.
- **time**: the geometric mean over all positions (time needs no convergence) of the row's CPU seconds
  per 100 updates divided by those of its regular-writing reference (1.00 for the DNC's regular row, the
  reference of every other).
- **rank**: at each counted position the rows are ranked by mean (1 = best, ties share the mean rank); a
  row's mean rank is over the counted positions it has, and orders the board.

**The baselines and the counted positions.** The baseline rows are the runs of the suite's own study;
every other row is a study ``<suite id>_<row>`` made from it (``steps.writer_study``), so the
baseline study is the one whose id every other study's id extends (``baseline_study``). A baseline cell
converged when its regime is ``regime.CONVERGED``; one with any other state (rising, falling, at the
guessing level, unknown: too few evaluations in its last quarter) or with no finished run has not. A
position where any baseline cell has not converged is **not counted** (marked † on the board): at that
position a row's place against the baselines would rank how fast the writers learn, not where they end.
It is left out for every row alike: no row's cell there is ranked or tested (its comparisons read "not
testable"), and the mean rank, the mean value and the better / worse / n.s. / not testable tallies are
over the counted positions only. A baseline cell that converged with runs that collapsed late (their
training loss back at the guessing level after their best evaluation) counts as converged: the regime
rule reads those runs up to their best evaluation, which is the checkpoint their test value measures; the
board names them. A new row's own cell that has not converged at a counted position is marked † and its
comparisons are not testable, but it keeps its rank there: leaving it out would reward a writer for not
learning. A board is fit to commit when at least ``MIN_CONVERGED`` of its baseline cells converged
(``check_committable``, applied by `uwbench leaderboard --record-baselines`).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from uwbench import metrics, selection
from uwbench.errors import UserError
from uwbench.report.analysis.labels import model_label, task_label
from uwbench.report.analysis.summary import OK, metric_info, summarize
from uwbench.report.data.study import from_runs
from uwbench.report.verdicts import judge as verdicts
from uwbench.report.verdicts import regime as regime_mod
from uwbench.report.verdicts.regime import Regime
from uwbench.snapshot import Snapshot
from uwbench.values import is_number, number_or_none

REFERENCES = ("uniform", "regular")  # the writers every row is tested against, in the board's column order
REFERENCE_LABEL = {"uniform": "UW", "regular": "regular writing"}
TIME_REFERENCE = "regular"  # a row's time is a ratio to this writer's
REFERENCE_MODEL = "dnc"  # whose reference rows a model without its own is compared with
TASK_ORDER = ("copy", "reverse", "double", "add")  # the suite's column order; other tasks follow, sorted
BETTER, WORSE, NS = "better", "worse", "n.s."
OUTCOMES = (BETTER, WORSE, NS, verdicts.NOT_TESTABLE)
MIN_CONVERGED = 0.8  # the share of baseline cells that must have converged for a board to be committed
NO_RUN = "no finished run"  # the state of a baseline cell the board lacks (its runs failed or never ran)
OUTCOME_OF = {verdicts.YES: BETTER, verdicts.NO: WORSE, verdicts.INCONCLUSIVE: NS, verdicts.FEW_SEEDS: NS,
            verdicts.NOT_TESTABLE: verdicts.NOT_TESTABLE,
            # a board's cells never have the paper's budget; were one to, an unconverged side is not testable
            verdicts.YES_UNSETTLED: verdicts.NOT_TESTABLE, verdicts.NO_UNSETTLED: verdicts.NOT_TESTABLE}


def row_of(cell: str) -> str:
    """A cell's row: the part of its id before the first '-' (its group name)."""
    return str(cell).split("-", 1)[0]


@dataclass(frozen=True)
class Position:
    task: str
    seq_len: int
    memory_size: int

    @property
    def ratio(self) -> float:
        return (self.memory_size + 1) / self.seq_len

    @property
    def label(self) -> str:
        return f"{task_label(self.task)} {self.ratio:.0%}"

    def sort_key(self):
        order = TASK_ORDER.index(self.task) if self.task in TASK_ORDER else len(TASK_ORDER)
        return (order, self.task, self.ratio, self.seq_len)


@dataclass
class Cell:
    cell: str
    position: Position
    mean: Optional[float]
    std: Optional[float]
    n: int
    samples: Tuple[float, ...]
    cpu100: Optional[float]  # mean CPU seconds per 100 updates
    regime: Regime
    rank: Optional[float] = None


@dataclass
class Row:
    name: str
    label: str
    model: str
    writer: str
    cells: Dict[Position, Cell] = field(default_factory=dict)
    tests: Dict[str, Dict[Position, verdicts.Comparison]] = field(default_factory=dict)  # reference -> position
    references: Dict[str, str] = field(default_factory=dict)  # reference writer -> the row compared with
    time_ratio: Optional[float] = None
    mean_rank: Optional[float] = None
    code: Tuple[str, ...] = ()  # the git commits its finished runs were made at (CPU times compare within one)

    def counts(self, reference: str) -> Optional[Dict[str, int]]:
        """How many comparisons with ``reference`` came out each way; None when the row is the reference."""
        if reference not in self.tests:
            return None
        out = {o: 0 for o in OUTCOMES}
        for c in self.tests[reference].values():
            out[OUTCOME_OF[c.verdict]] += 1
        return out

    def mean_value(self) -> Optional[float]:
        """The mean over the row's ranked cells (the counted positions), like its mean rank."""
        vals = [c.mean for c in self.cells.values() if c.mean is not None and c.rank is not None]
        return float(np.mean(vals)) if vals else None

    def mean_cpu100(self) -> Optional[float]:
        """The mean over every cell of the row: time needs no convergence."""
        vals = [c.cpu100 for c in self.cells.values() if c.cpu100 is not None]
        return float(np.mean(vals)) if vals else None


@dataclass
class BaselineCell:
    """A baseline row at a position: its cell, or None when the board lacks it (no finished run)."""

    row: str  # the row's name
    label: str
    position: Position
    cell: Optional[Cell]

    @property
    def converged(self) -> bool:
        return self.cell is not None and self.cell.regime.converged

    @property
    def state(self) -> str:
        return self.cell.regime.state if self.cell is not None else NO_RUN

    @property
    def collapsed(self) -> int:
        """How many of its runs collapsed late (read up to their best evaluation by the regime rule)."""
        return len(self.cell.regime.collapsed) if self.cell is not None else 0

    def text(self) -> str:
        return f"{self.label} at {self.position.label}"


@dataclass
class Board:
    positions: List[Position]
    rows: List[Row]
    metric: metrics.Measure
    profile: str = ""
    steps: Optional[int] = None  # the updates of most columns' runs
    seeds: Optional[int] = None
    baseline_study: str = ""
    baseline_cells: List[BaselineCell] = field(default_factory=list)  # every baseline row at every position
    updates: Dict[Position, int] = field(default_factory=dict)  # per position, its finished runs' updates

    @property
    def unconverged(self) -> List[BaselineCell]:
        """The baseline cells that have not converged (or have no finished run), in the board's order."""
        return [b for b in self.baseline_cells if not b.converged]

    @property
    def excluded(self) -> List[Position]:
        """The positions left out of every row's rank and tallies: a baseline cell there has not converged."""
        return counted_positions(self.positions, self.baseline_cells)[1]

    @property
    def counted(self) -> List[Position]:
        """The positions where every baseline cell converged: the mean rank and the tallies are over these."""
        return counted_positions(self.positions, self.baseline_cells)[0]

    def converged_share(self) -> float:
        """The share of baseline cells that converged (1.0 for a board without baselines)."""
        n = len(self.baseline_cells)
        return (n - len(self.unconverged)) / n if n else 1.0

    def row(self, name: str) -> Row:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(f"no row {name!r} on the board; rows: {', '.join(r.name for r in self.rows)}")

    def pareto(self) -> List[str]:
        """The rows no other row beats in both mean value and mean CPU seconds per 100 updates."""
        points = [(r.mean_value(), r.mean_cpu100()) for r in self.rows]
        vectors = [p if None not in p else None for p in points]
        front = selection.pareto_front(vectors, [self.metric.direction, "minimize"])
        return [self.rows[i].name for i in front]


def build(snap: Snapshot) -> Board:
    """The board of a snapshot (module docstring)."""
    runs = snap.runs[snap.runs["role"] == "final"] if len(snap.runs) else snap.runs
    if len(runs) == 0:
        raise UserError("the snapshot holds no final run: nothing to put on the board")
    profiles = sorted({str(p) for p in runs["profile"] if str(p)})
    if len(profiles) > 1:
        raise UserError(f"the snapshot mixes the runs of profiles {', '.join(profiles)}: a board compares runs of "
                         "one profile; keep one (`uwbench leaderboard --profile`)")
    measure = selection.frame_measure(runs)
    summary = summarize(from_runs("leaderboard", runs), runs)
    summary = summary[summary["state"] == OK]
    rows = _rows(summary, snap.curves, measure)
    positions = sorted({p for r in rows.values() for p in r.cells}, key=Position.sort_key)
    base_study = baseline_study(runs)
    base_rows = sorted({row_of(c) for c, s in zip(runs["cell"], runs["study"]) if str(s) == base_study})
    cells = [BaselineCell(n, rows[n].label if n in rows else n, p, rows[n].cells.get(p) if n in rows else None)
             for p in positions for n in base_rows]
    counted = counted_positions(positions, cells)[0]
    _rank(rows, counted, measure)
    for r in rows.values():
        _test(r, rows, measure, counted)
        r.time_ratio = _time_ratio(r, rows)
    ordered = sorted(rows.values(), key=lambda r: (r.mean_rank if r.mean_rank is not None else math.inf, r.label))
    finished = runs[runs["status"] == "finished"]  # a run still going (a board previewed mid-sweep) has fewer updates
    codes = code_versions(finished)
    for r in rows.values():
        r.code = codes.get(r.name, ())
    updates = updates_by_position(finished)
    common = Counter(updates.values()).most_common()
    steps = min(v for v, n in common if n == common[0][1]) if common else None
    seeds = finished.groupby("cell")["run_id"].count()
    return Board(positions, ordered, measure, profiles[0] if profiles else "", steps,
                 int(seeds.max()) if len(seeds) else None, base_study, cells, updates)


def updates_by_position(runs: pd.DataFrame) -> Dict[Position, int]:
    """Per position (task, T, D), the updates its finished runs made (the most, should a run have stopped
    early): a profile's ``cell_set`` may give some columns a longer budget, for every row alike."""
    out: Dict[Position, int] = {}
    for task, t, d, steps in zip(runs["task"], runs["seq_len"], runs["memory_size"], runs["steps"]):
        if is_number(steps) and is_number(t) and is_number(d):
            p = Position(str(task), int(t), int(d))
            out[p] = max(out.get(p, 0), int(steps))
    return out


def code_versions(runs: pd.DataFrame) -> Dict[str, Tuple[str, ...]]:
    """Per row, the git commits (``git_sha``) its runs in ``runs`` were made at, sorted; rows without one
    recorded are absent."""
    if "git_sha" not in runs.columns or not len(runs):
        return {}
    known = runs[~runs["git_sha"].astype(str).isin(("", "nan", "unknown"))]  # "unknown": made outside a checkout
    return {str(row): tuple(sorted(set(g.astype(str)))) for row, g in known.groupby(known["cell"].map(row_of))["git_sha"]}


def counted_positions(positions: List[Position],
                      cells: List[BaselineCell]) -> Tuple[List[Position], List[Position]]:
    """The rule, in one place: (counted, not counted) positions, in order; a position is not counted when any
    baseline cell there has not converged (module docstring)."""
    stuck = {b.position for b in cells if not b.converged}
    return [p for p in positions if p not in stuck], [p for p in positions if p in stuck]


def baseline_study(runs: pd.DataFrame) -> str:
    """The study of the baseline rows: the one whose id every other study's id extends with '_<row>' (a
    new row's study is ``<suite id>_<row>``, ``steps.writer_study``); a snapshot of one study is all
    baselines. A ValueError when no study is such."""
    studies = sorted({str(s) for s in runs["study"] if str(s)})
    found = [s for s in studies if all(o == s or o.startswith(f"{s}_") for o in studies)]
    if not found:
        raise UserError(f"the snapshot holds the studies {', '.join(studies)}, none of which the others extend: a "
                         "board holds one suite's baseline runs (study <id>) and rows made from that suite "
                         "(studies <id>_<row>, by `uwbench leaderboard`); build it from one suite's runs")
    return found[0]


def check_committable(board: Board, minimum: float = MIN_CONVERGED) -> None:
    """A ValueError unless at least ``minimum`` of the board's baseline cells converged (the rule a
    committed board meets), naming the count and the cells that did not, and the fix."""
    n, stuck = len(board.baseline_cells), board.unconverged
    if n and board.converged_share() < minimum:
        names = "; ".join(f"{b.text()} ({b.state})" for b in stuck)
        raise UserError(f"{n - len(stuck)} of {n} baseline cells converged ({board.converged_share():.0%}): a board "
                         f"is committed when at least {minimum:.0%} did. Not converged: {names}. Run the baselines "
                         "at sizes or a budget where more converge (the suite's profile, studies/leaderboard.yaml) "
                         "and record them again")


def _rows(summary: pd.DataFrame, curves: pd.DataFrame, measure: metrics.Measure) -> Dict[str, Row]:
    rows: Dict[str, Row] = {}
    flags = {"cache_size"}  # CUW's L tells its rows apart
    for r in summary.to_dict("records"):
        name = row_of(r["cell"])
        if name not in rows:
            rows[name] = Row(name, model_label(r, flags), str(r["model"]), str(r["writer"]))
        pos = Position(str(r["task"]), int(r["seq_len"]), int(r["memory_size"]))
        if pos in rows[name].cells:
            raise UserError(f"row {name!r} has two cells at {pos.label} (T={pos.seq_len}, D={pos.memory_size}): "
                             f"{rows[name].cells[pos].cell} and {r['cell']}; give each group its own name")
        rows[name].cells[pos] = Cell(r["cell"], pos, number_or_none(r["mean"]), number_or_none(r["std"]), int(r["n"]),
                                     tuple(r["samples"]), number_or_none(r["cpu100_mean"]), cell_regime(r, curves, measure))
    labels = [r.label for r in rows.values()]
    for r in rows.values():  # two rows with one label (the same writer with other settings): say which
        if labels.count(r.label) > 1:
            r.label = f"{r.label} [{r.name}]"
    return rows


def cell_regime(r, curves: pd.DataFrame, measure: metrics.Measure) -> Regime:
    """``regime.regime`` of one summary row, with its task's guessing level at its T."""
    info = metric_info(measure.name)
    return regime_mod.regime(curves, r["run_ids"], info["curve"], measure.name, measure.scale,
                             measure.higher_is_better, "points" if measure.unit == "%" else measure.unit,
                             guess_loss=guess_loss(str(r["task"]), r["seq_len"]))


def guess_loss(task: str, seq_len) -> Optional[float]:
    """The guessing level's loss of ``task`` at T = ``seq_len`` (None for a task that cannot be built here)."""
    from uwbench.tasks.chance import chance_of

    try:
        return chance_of(task, {"seq_len": int(seq_len)} if is_number(seq_len) else {}).loss
    except Exception:  # noqa: BLE001 - a task whose data is not on this machine: no guessing level
        return None


def _rank(rows: Dict[str, Row], positions: List[Position], measure: metrics.Measure) -> None:
    """Rank the rows at each of ``positions`` (the counted ones); a row's mean rank is over those it has."""
    for pos in positions:
        here = [(r.cells[pos].mean, r) for r in rows.values() if pos in r.cells and r.cells[pos].mean is not None]
        ranks = pd.Series([m for m, _ in here]).rank(method="average", ascending=not measure.higher_is_better)
        for (_, r), rank in zip(here, ranks):
            r.cells[pos].rank = float(rank)
    for r in rows.values():
        ranked = [c.rank for c in r.cells.values() if c.rank is not None]
        r.mean_rank = float(np.mean(ranked)) if ranked else None


def reference_row(row: Row, writer: str, rows: Dict[str, Row]) -> Optional[Row]:
    """The row ``row`` is compared with for ``writer``: that writer on the row's own model, else on the DNC
    (of several such rows, the first by name); never the row itself, so the NTM's regular row is compared
    with the DNC's. None when the board has no such row (the DNC's own regular row for regular writing)."""
    for model in dict.fromkeys((row.model, REFERENCE_MODEL)):
        found = sorted((r for r in rows.values() if r.model == model and r.writer == writer and r is not row),
                       key=lambda r: r.name)
        if found:
            return found[0]
    return None


def _test(row: Row, rows: Dict[str, Row], measure: metrics.Measure, positions: List[Position]) -> None:
    """The row's comparisons with each reference at ``positions`` (the counted ones), one Holm family per
    reference."""
    counted = set(positions)
    for writer in REFERENCES:
        ref = reference_row(row, writer, rows)
        if ref is None:
            continue
        row.references[writer] = ref.name
        comps: Dict[Position, verdicts.Comparison] = {}
        for pos, mine in row.cells.items():
            theirs = ref.cells.get(pos)
            if theirs is None or pos not in counted:
                continue
            a, b = _value(mine, row.label), _value(theirs, ref.label)
            verdict, reason = verdicts.gate(a, b, needs_regime=True)
            comps[pos] = verdicts.Comparison(pos.label, a, b, verdict or "", reason)
        verdicts.decide(list(comps.values()), measure.higher_is_better)
        row.tests[writer] = comps


def _value(cell: Cell, label: str) -> verdicts.Value:
    return verdicts.Value(cell.mean, cell.std, cell.n, label, cell.samples, regime=cell.regime)


def _time_ratio(row: Row, rows: Dict[str, Row]) -> Optional[float]:
    ref = reference_row(row, TIME_REFERENCE, rows)
    if ref is None:
        return 1.0 if row.model == REFERENCE_MODEL and row.writer == TIME_REFERENCE else None
    ratios = [c.cpu100 / ref.cells[p].cpu100 for p, c in row.cells.items()
              if p in ref.cells and c.cpu100 and ref.cells[p].cpu100]
    return float(np.exp(np.mean(np.log(ratios)))) if ratios else None
