"""What a sweep shows the person running it: the live progress line, the best so far, the end-of-sweep
summary per cell and the first failures."""
from __future__ import annotations

import statistics
import sys
from typing import Any, Dict, Iterable, List, Optional

from uwbench import env, selection
from uwbench.spec import Plan
from uwbench.sweeps.common import Record, cell_result
from uwbench.tabular import Table, to_text


class Progress:
    """A live line: runs done / total, then done, pruned, failed, running, the best so far, ETA."""

    def __init__(self, total: int, desc: str, enabled: bool = True, initial: int = 0):
        self.enabled = enabled
        self.total = total
        self.seen = initial
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=desc, unit="run", dynamic_ncols=True,
                            file=sys.stderr, mininterval=env.progress_interval(), smoothing=0.1)

    def update(self, done: int, pruned: int, failed: int, running: int, best: Optional[str] = None,
               total: Optional[int] = None) -> None:
        ended = done + pruned + failed
        if self.bar is None:
            return
        if total is not None and total != self.bar.total:
            self.bar.total = total
        text = f"done {done} pruned {pruned} failed {failed} running {running}"
        if best:
            text += f" | best {best}"
        self.bar.set_postfix_str(text, refresh=False)
        if ended > self.seen:
            self.bar.update(ended - self.seen)  # redraws, with the ETA from the pace so far
            self.seen = ended
        elif sys.stderr.isatty():  # the running count and the clock; in a log, only when a run ends
            self.bar.refresh()

    def write(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def describe_best(plan: Plan, records: Iterable[Record]) -> Optional[str]:
    """The best objective value so far and its cell, for the progress line."""
    best = selection.best_so_far(records, plan.objective.direction)
    if best is None:
        return None
    return f"{plan.objective.metric} {best.value:.4f} ({best.cell})"


SUMMARY_LAYOUT = "{0:<36} {1:>18}  {2:<30} {3:>26}  {4}"  # a line of the summary's table (``tabular.to_text``)


def summary(plan: Plan, records: List[Record]) -> str:
    """A plain-text table: per cell, the runs, the chosen params, the test mean +- std, the paper."""
    measure = plan.objective.as_metric.measure
    test = f"test {measure.name}"
    head = "best params" if plan.mode == "tuned" else "best grid point (by eval)"
    table = Table("summary", ["cell", "done/pruned/failed", head, test + " mean+-std (n)", "paper"], [])
    for cell in plan.cells:
        rows = [r for r in records if r.cell == cell.id]
        counts = f"{sum(r.status == 'finished' for r in rows)}/{sum(r.status == 'pruned' for r in rows)}/" \
                 f"{sum(r.status == 'failed' for r in rows)}"
        params, finals = cell_result(plan, rows)
        shown = ", ".join(f"{k.split('.', 1)[-1]}={_fmt(v)}" for k, v in (params or {}).items()) or "-"
        finals = [v * measure.scale for v in finals]
        if finals:
            std = statistics.stdev(finals) if len(finals) > 1 else 0.0
            result = f"{statistics.fmean(finals):.2f} +- {std:.2f} (n={len(finals)})"
        else:
            result = "-"
        paper = f"{cell.paper:g}" if cell.paper is not None else "-"
        table.rows.append([cell.id, counts, shown, result, paper])
    lines = to_text(table, SUMMARY_LAYOUT)
    if measure.unit == "%":
        lines.append(f"({test} in percent, as the paper reports it)")
    if plan.multi_objective:
        lines.append(f"(several objectives: {', '.join(f'{o.metric} ({o.direction})' for o in plan.objectives)}; "
                     "best params = the Pareto-optimal trial best in the first; the Pareto front over the cells is "
                     "in `uwbench report`)")
        for cell in plan.cells:
            front = selection.pareto_trials([r for r in records if r.cell == cell.id], plan.directions)
            if front:
                lines.append(f"  {cell.id}: Pareto-optimal trials " + ", ".join(
                    f"#{r.number} ({', '.join(_fmt(v) for v in r.values)})" for r in front))
    return "\n".join(lines)


def failures(records: List[Record], limit: int = 3) -> List[str]:
    """The first few distinct errors of failed runs (one line each), for the end of a sweep."""
    seen: Dict[str, str] = {}
    for r in records:
        if r.status == "failed" and r.error:
            first = r.error.strip().splitlines()[0][:300]
            seen.setdefault(first, f"{r.cell} ({r.role} {r.number})")
    return [f"failed: {where}: {err}" for err, where in list(seen.items())[:limit]]


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)
