"""The regime rule on curve fixtures (rising, converged, at the guessing level, unknown; accuracy in points and
MSE relative), the guessing level of real tasks, and the reduced-budget label beside the paper's value."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from uwbench.report.verdicts import regime
from uwbench.report.analysis.summary import MATCHES, OFF, REDUCED, verdict
from uwbench.report.verdicts.regime import AT_GUESS, CONVERGED, RISING, UNKNOWN
from uwbench.tasks.chance import chance_level, chance_of
from uwbench.tasks.base import build_task


def curves(values_by_run, metric="eval_accuracy", every=250, loss=None):
    """curves.csv rows: each run's values at every ``every`` updates, and a train_loss curve (constant ``loss``)."""
    rows = []
    for run, values in values_by_run.items():
        for i, v in enumerate(values):
            rows.append({"run_id": run, "metric": metric, "step": (i + 1) * every, "value": v})
            if loss is not None:
                rows.append({"run_id": run, "metric": "train_loss", "step": (i + 1) * every, "value": loss})
    return pd.DataFrame(rows)


def acc(frame, **kw):
    args = dict(curve_metric="eval_accuracy", measure="accuracy", scale=100.0, higher_better=True, unit="points")
    return regime.regime(frame, frame["run_id"].unique(), **{**args, **kw})


def test_a_rising_curve_is_not_converged_and_says_its_slope():
    # 40 evaluations to 10,000 updates; the last quarter (7,500-10,000) gains 0.02 per 1,000 = 2 points
    up = [0.2 + 0.00002 * (i + 1) * 250 for i in range(40)]
    g = acc(curves({"a": up, "b": up}, loss=1.0), guess_loss=2.25)
    assert g.state == RISING and g.slope == pytest.approx(2.0) and g.steps == 10000
    assert "+2.0 points per 1,000 updates" in g.detail and "at most 1 point)" in g.detail


def test_a_flat_curve_away_from_guessing_is_converged():
    flat = [0.2 + 0.3 * (1 - math.exp(-i / 4)) for i in range(40)]  # saturated long before the last quarter
    g = acc(curves({"a": flat}, loss=0.4), guess_loss=2.25)
    assert g.state == CONVERGED and abs(g.slope) < 0.1 and g.loss == pytest.approx(0.4)
    falling = [0.9 - 0.00002 * (i + 1) * 250 for i in range(40)]  # steadily worse: not settled either
    g = acc(curves({"a": falling}, loss=0.4))
    assert g.state == regime.FALLING and "getting worse by -2.0 points" in g.detail


def test_flat_at_the_guessing_level_counts_only_at_the_papers_budget():
    plateau = [0.11] * 8  # 2,000 updates, training loss at the guessing level
    frame = curves({"a": plateau}, loss=2.24)
    g = acc(frame, guess_loss=2.25, paper_steps=10000)
    assert g.state == AT_GUESS and "2.240 against 2.250" in g.detail
    assert acc(frame, guess_loss=2.25, paper_steps=2000).state == CONVERGED  # the paper's end point too
    assert acc(frame, guess_loss=None).state == CONVERGED  # no guessing level known: the slope alone
    assert acc(curves({"a": plateau}, loss=1.5), guess_loss=2.25, paper_steps=10000).state == CONVERGED


def test_a_run_that_collapsed_after_its_best_is_read_up_to_it():
    # 40 evaluations: a plateau at 87% reached long before the end, then at 9,250 updates training loss and
    # accuracy fall back to the guessing level (a late divergence); its twin run does not collapse
    learned = [0.2 + 0.67 * (1 - math.exp(-i / 4)) for i in range(40)]
    dead = learned[:36] + [0.11] * 4  # best at 9,000 updates, guessing from 9,250 on
    rows = curves({"ok": learned, "dead": dead}).to_dict("records")
    for run, values in (("ok", learned), ("dead", dead)):
        for i, v in enumerate(values):
            rows.append({"run_id": run, "metric": "train_loss", "step": (i + 1) * 250,
                         "value": 2.25 if v < 0.12 and i > 30 else 0.4})
    frame = pd.DataFrame(rows)
    g = acc(frame, guess_loss=2.25)
    assert g.state == CONVERGED and g.collapsed == (9000,)
    assert "1 of 2 runs collapsed to the guessing level after their best evaluation (at 9,000 updates)" in g.detail
    assert g.brief.endswith("per 1,000 updates, 1 of 2 runs collapsed late")
    # read to the end instead, the cell would be falling: the collapse is what the rule reads past
    plain = curves({"ok": learned, "dead": dead}, loss=0.4)
    assert acc(plain, guess_loss=2.25).state == regime.FALLING and acc(plain, guess_loss=2.25).collapsed == ()
    # the regime table counts the collapsed runs of the cell
    from uwbench.report.rendering import verdict_tables
    from uwbench.report.verdicts import judge as verdicts

    t = verdict_tables.regime_table(verdicts.Verdicts([], [], None, {"c": g}))
    assert t.rows[0][t.columns.index("collapsed late")] == "1 of 2"
    assert t.csv_rows[0][t.csv_columns.index("collapsed")] == 1 and t.csv_rows[0][t.csv_columns.index("runs")] == 2
    # a run back at the guessing level after its best that then climbs part of the way back collapsed too
    partial = learned[:28] + [0.11] * 4 + [0.2, 0.22, 0.24, 0.26, 0.28, 0.3, 0.32, 0.34]  # best at 7,000
    rows = curves({"ok": learned, "partial": partial}).to_dict("records")
    for run, values in (("ok", learned), ("partial", partial)):
        for i, v in enumerate(values):
            rows.append({"run_id": run, "metric": "train_loss", "step": (i + 1) * 250,
                         "value": 2.25 if 28 <= i < 32 and run == "partial" else (1.9 if run == "partial" and i >= 32 else 0.4)})
    g = acc(pd.DataFrame(rows), guess_loss=2.25)
    assert g.collapsed == (7000,)
    # a run that never left the guessing level did not collapse: it never learned
    flat = curves({"a": [0.11] * 40}, loss=2.25)
    assert acc(flat, guess_loss=2.25, paper_steps=2000).collapsed == ()


def test_too_few_evaluations_or_no_curve_is_unknown():
    assert acc(curves({"a": [0.1, 0.2, 0.3]}, every=1000)).state == UNKNOWN  # one evaluation in the last quarter
    assert regime.regime(pd.DataFrame(columns=["run_id", "metric", "step", "value"]), ["x"], "eval_accuracy",
                         "accuracy", 100.0, True).state == UNKNOWN


def test_mse_is_judged_relative_to_its_level():
    # falling 0.5% of the level per 1,000 updates: converged; 20%: still learning
    slow = [1.0 - 0.000005 * (i + 1) * 100 for i in range(80)]
    fast = [1.0 / (1 + 0.0003 * (i + 1) * 100) for i in range(80)]
    kw = dict(curve_metric="eval_mse", measure="mse", scale=1.0, higher_better=False)
    for values, state in ((slow, CONVERGED), (fast, RISING)):
        frame = curves({"a": values}, metric="eval_mse", every=100)
        assert regime.regime(frame, ["a"], **kw).state == state
    g = regime.regime(curves({"a": fast}, metric="eval_mse", every=100), ["a"], **kw)
    assert "of its level" in g.detail and g.slope > regime.RISE["mse"].limit


def test_guessing_levels_of_real_tasks():
    copy = chance_of("copy", {"seq_len": 20, "test_size": 256})
    # copy's targets: uniform tokens plus one end marker per sequence: the likeliest class is a token
    assert copy.metric == "accuracy" and 0.05 < copy.score < 0.2 and 1.5 < copy.loss < math.log(10)
    sin = chance_level(build_task("sinusoid", {"test_size": 128}))
    targets = pd.Series(pd.concat([pd.Series(b.targets.reshape(-1).numpy()) for b in
                                   build_task("sinusoid", {"test_size": 128}).test_batches()]))
    assert sin.metric == "mse" and sin.loss == pytest.approx(float(targets.var(ddof=0)), rel=1e-3)


def test_matches_only_at_the_papers_budget():
    assert verdict(0.5, 1.0, 68.0, "accuracy", 5.0) == MATCHES
    assert verdict(0.5, 1.0, 68.0, "accuracy", 5.0, steps=2000, paper_steps=10000) == REDUCED
    assert verdict(0.5, 1.0, 68.0, "accuracy", 5.0, steps=10000, paper_steps=10000) == MATCHES
    assert verdict(20.0, 1.0, 68.0, "accuracy", 5.0, steps=10000, paper_steps=10000) == OFF


def test_the_largest_gradient_after_the_warmup_is_the_cells_grad_peak_and_a_regime_column():
    """grad_norm_max per window: the first WARMUP_PART of a run is left out (a fresh model's first windows are
    large and harmless), the peak is the largest later window over the cell's runs, and the regime table
    shows the column only when some run recorded it."""
    from uwbench import metrics
    from uwbench.report.rendering import verdict_tables
    from uwbench.report.verdicts import judge as verdicts

    flat = [0.5] * 40  # 10,000 updates, every 250
    frame = curves({"a": flat, "b": flat}, loss=0.4)
    sizes = {"a": [631.0] + [5.0] * 30 + [303.0, 1974.0] + [5.0] * 7, "b": [20.0] + [6.0] * 39}
    grads = pd.DataFrame([{"run_id": run, "metric": metrics.GRAD_NORM, "step": (i + 1) * 250, "value": v}
                          for run, vs in sizes.items() for i, v in enumerate(vs)])
    g = acc(pd.concat([frame, grads]), guess_loss=2.25)
    assert g.grad_peak == pytest.approx(1974.0) and g.state == CONVERGED  # the first window's 631 is not counted
    assert acc(frame, guess_loss=2.25).grad_peak is None  # runs that recorded none
    short = pd.concat([curves({"a": [0.5, 0.5]}), curves({"a": [3.0, 7.0]}, metric=metrics.GRAD_NORM)])
    assert acc(short).state == regime.UNKNOWN and acc(short).grad_peak == pytest.approx(7.0)  # shown all the same

    def table(regimes):
        return verdict_tables.regime_table(verdicts.Verdicts([], [], None, regimes))
    with_col = table({"c": g})
    assert with_col.csv_columns[-2] == "grad_norm_peak" and with_col.rows[0][-1] == "1974"
    assert "grad_norm_peak" not in table({"c": acc(frame, guess_loss=2.25)}).csv_columns
