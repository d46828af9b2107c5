"""Report verdicts: Kendall's tau-b (scipy, with its p-value), the paper's claims under the one rule (the
regime gate, Welch's t-test, Holm's correction: a clear yes, a clear no, within the noise, too few seeds,
not testable at this budget, claims that do not apply), the ablation's ratio-window claim, the regime rule
on curve fixtures, compute, and the section in a built report."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import yaml

from uwbench import snapshot
from uwbench.report.verdicts import regime, stats
from uwbench.report.rendering import render
from uwbench.report.data import study
from uwbench.report.rendering import verdict_tables
from uwbench.report.verdicts import judge as verdicts
from uwbench.report.analysis.summary import NOT_RUN, OK, summarize
from uwbench.report.rendering.tables import paper_tables
from uwbench.report.verdicts.regime import Regime
from uwbench.report.analysis.compute import compute
from uwbench.report.verdicts.judge import INCONCLUSIVE, NO, NOT_TESTABLE, YES, Claim, Side

from tests.helpers import FIXTURES

FIXTURE = os.path.join(FIXTURES, "report")


def spread(mean, std, n):
    """n values with exactly this mean and sample std (evenly spaced)."""
    if mean is None or n == 0:
        return ()
    if n == 1 or std is None:
        return (float(mean),) * n
    z = np.linspace(-1.0, 1.0, n)
    z = z / z.std(ddof=1)
    return tuple(float(mean + std * v) for v in z)


def cell(cell_id, model="dnc", writer="regular", task="copy", seq_len=50, memory_size=4, mean=None, std=None, n=3,
         sec100=None, sec100_std=None, controller="ln_lstm", device="cpu", state=OK, cpu100=None):
    """One row of the report's cell table (``summarize``) with the columns the verdicts read."""
    cpu = spread(cpu100 if cpu100 is not None else sec100, sec100_std, n) if sec100 is not None else ()
    row = {}
    row.update(cell=cell_id, cache_size=None, hidden_size=None, paper=None, in_spec=True, task=task, model=model,
               controller=controller, writer=writer,
               seq_len=seq_len, memory_size=memory_size if model != "lstm" else None,
               compression_ratio=((memory_size + 1) / seq_len) if model != "lstm" else None,
               n=n, n_failed=0, n_trials=0, grid_points=1, mean=mean, std=std, state=state,
               sec100_mean=sec100, sec100_std=sec100_std, device=device, verdict="",
               samples=spread(mean, std, n), run_ids=tuple(f"{cell_id}-{i}" for i in range(n)),
               cpu_samples=cpu, wall_samples=spread(sec100, sec100_std, n) if sec100 is not None else ())
    return row


def frame(*rows):
    return pd.DataFrame(list(rows))


CONVERGED = Regime(regime.CONVERGED, 10000, 0.1)


def result(claim_id, summary, metric="accuracy", regimes=None):
    """A claim's result, every cell converged unless ``regimes`` says otherwise."""
    claim = next(c for c in verdicts.CLAIMS if c.id == claim_id)
    regs = {c: CONVERGED for c in summary["cell"]} if regimes is None else regimes
    return verdicts.evaluate(claim, summary, metric, regs)


# --------------------------------------------------------------------------------------------------
# Kendall's tau-b
# --------------------------------------------------------------------------------------------------


def test_kendall_tau_b_from_scipy_with_its_p_value():
    from scipy import stats as sp

    tau = stats.kendall
    assert tau([1, 2, 3, 4], [10, 20, 30, 40]).tau == pytest.approx(1.0)
    assert tau([1, 2, 3, 4], [4, 3, 2, 1]).tau == pytest.approx(-1.0)
    assert tau([1, 2, 3], [1, 3, 2]).tau == pytest.approx(1 / 3)  # 2 concordant, 1 discordant of 3 pairs
    # ties: x has one tied pair; 5 pairs untied in x, all 6 untied in y; C=5, D=0 -> 5 / sqrt(5 * 6)
    assert tau([1, 2, 2, 3], [1, 2, 3, 4]).tau == pytest.approx(5 / (5 * 6) ** 0.5)
    x, y = [97.7, 69.3, 68.0, 44.2, 44.2, 15.6, 12.7, 83.8], [90.1, 71.0, 71.0, 50.2, 40.0, 20.0, 20.0, 80.0]
    got, want = tau(x, y), sp.kendalltau(x, y)
    assert (got.tau, got.p) == (pytest.approx(want.statistic), pytest.approx(want.pvalue)) and 0 < got.p < 0.05
    assert tau([5.0], [1.0]).tau is None  # n < 2
    assert tau([2, 2, 2], [1, 2, 3]).tau is None  # one side all tied: undefined
    with pytest.raises(ValueError, match="paired"):
        tau([1, 2], [1])


def test_welch_and_holm_against_hand_computed_values():
    # a = 1, 2, 3 (mean 2, var 1); b = 4, 5, 6.5 (mean 31/6, var 19/12): se = sqrt(1/3 + 19/36), t = (2 - 31/6) / se
    t = stats.welch([1, 2, 3], [4, 5, 6.5])
    se = (1 / 3 + 19 / 36) ** 0.5
    assert t.t == pytest.approx((2 - 31 / 6) / se)
    df = (1 / 3 + 19 / 36) ** 2 / ((1 / 3) ** 2 / 2 + (19 / 36) ** 2 / 2)  # Welch-Satterthwaite
    from scipy.stats import t as student

    assert t.p == pytest.approx(2 * student.sf(abs(t.t), df))
    assert stats.welch([1.0], [2.0, 3.0]).p is None  # one seed: no spread
    assert stats.welch([1.0, 1.0], [1.0, 1.0]).p == 1.0
    # Holm: sorted 0.01 <= 0.05/3, then 0.03 > 0.05/2 stops
    assert stats.holm([0.01, 0.04, 0.03]) == [True, False, False]
    assert stats.holm([0.01, 0.02, 0.03]) == [True, True, True]  # 0.01<=.0167, 0.02<=.025, 0.03<=.05
    assert stats.holm([0.04, None]) == [True, False]  # an untested comparison is not in the family
    assert stats.holm_adjusted([0.01, 0.04, 0.03]) == [pytest.approx(0.03), pytest.approx(0.06), pytest.approx(0.06)]


def test_orderings_per_paper_table_column():
    with open(os.path.join(FIXTURE, "study.yaml"), encoding="utf-8") as f:
        view = study.from_mapping(yaml.safe_load(f), "studies/fixture_copy.yaml")
    snap = snapshot.Snapshot.from_dir(FIXTURE)
    summary = summarize(view, snap.runs)
    found = {o.column: o for o in verdicts.orderings(paper_tables(summary, view))}
    assert set(found) == {"T=50", "T=100"}
    for column, seq_len in (("T=50", 50), ("T=100", 100)):
        done = summary[(summary["seq_len"] == seq_len) & (summary["state"] == OK) & summary["paper"].notna()]
        assert found[column].n == len(done)
        want = stats.kendall(list(done["mean"]), list(done["paper"]))
        assert found[column].tau == pytest.approx(want.tau, abs=1e-6) if want.tau is not None else found[column].tau is None
        assert found[column].p == (pytest.approx(want.p) if want.p is not None else None)


def test_ordering_text_says_why_it_is_undefined():
    assert verdicts.Ordering("t", "c", 1, None).text() == "n/a (fewer than 2 cells)"
    assert verdicts.Ordering("t", "c", 3, None).text() == "n/a (all tied)"
    assert verdicts.Ordering("t", "c", 3, -0.333).text() == "-0.33"


# --------------------------------------------------------------------------------------------------
# Claims
# --------------------------------------------------------------------------------------------------


def test_the_one_rule_gate():
    from uwbench.report.verdicts.judge import Value

    rising = Regime(regime.RISING, 2000, 5.8, detail="still improving by +5.8 points per 1,000 updates")
    ok = verdicts.gate(Value(95, 1, 3, "UW", regime=CONVERGED), Value(70, 2, 3, "DNC", regime=CONVERGED), True)
    assert ok == (None, "")
    verdict, why = verdicts.gate(Value(95, 1, 3, "UW", regime=rising), Value(70, 2, 3, "DNC", regime=CONVERGED), True)
    assert verdict == NOT_TESTABLE and why.startswith("UW: rising, still improving by +5.8 points")
    verdict, why = verdicts.gate(Value(95, 1, 3, "UW"), Value(70, 2, 3, "DNC", regime=CONVERGED), True)
    assert verdict == NOT_TESTABLE and "unknown" in why  # no regime: never assumed converged
    assert verdicts.gate(Value(95, 1, 3, "UW"), Value(70, 2, 3), needs_regime=False) == (None, "")  # time claims
    assert verdicts.gate(Value(95, None, 1, "UW", regime=CONVERGED), Value(70, 2, 3, "DNC", regime=CONVERGED),
                         True) == (verdicts.FEW_SEEDS, "UW: 1 seed")
    assert verdicts.gate(Value(1.0, 0.1, 3), Value(2.0, 0.1, 3), False, same_device=False)[0] == INCONCLUSIVE


def test_rising_sides_make_a_claim_not_testable_never_yes_or_no():
    s = frame(cell("reg", mean=70, std=2), cell("uw", writer="uniform", mean=95, std=1))
    rising = Regime(regime.RISING, 2000, 7.4, detail="still improving")
    r = result("uw-beats-regular", s, regimes={"reg": CONVERGED, "uw": rising})
    assert r.verdict == NOT_TESTABLE and r.comparisons[0].p is None and "DNC+UW: rising" in r.comparisons[0].reason
    at_guess = Regime(regime.AT_GUESS, 2000, 0.0, 2.2, 2.25)
    assert result("uw-beats-regular", s, regimes={"reg": at_guess, "uw": CONVERGED}).verdict == NOT_TESTABLE


def test_at_the_papers_budget_an_unsettled_side_is_tested_and_named():
    """The paper's claims are claims at its budget: runs that made it are tested even while still rising,
    and the verdict names the side that had not settled; the same curves at a smaller budget are not testable."""
    s = frame(cell("reg", mean=70, std=2), cell("uw", writer="uniform", mean=95, std=1))
    rising_paper = Regime(regime.RISING, 10000, 2.6, detail="still improving by +2.6 points", paper_budget=True,
                          brief="+2.6 points per 1,000 updates")
    r = result("uw-beats-regular", s, regimes={"reg": CONVERGED, "uw": rising_paper})
    c = r.comparisons[0]
    assert r.verdict == verdicts.YES_UNSETTLED and c.verdict == verdicts.YES_UNSETTLED and c.p is not None
    assert "at the paper's budget, where DNC+UW is rising (+2.6 points per 1,000 updates)" in c.reason
    settled = result("uw-beats-regular", s, regimes={"reg": CONVERGED, "uw": CONVERGED})
    assert settled.verdict == YES and settled.comparisons[0].reason == ""  # a plain yes only when both converged
    behind = frame(cell("reg", mean=95, std=1), cell("uw", writer="uniform", mean=70, std=2))
    assert result("uw-beats-regular", behind, regimes={"reg": rising_paper, "uw": CONVERGED}).verdict == \
        verdicts.NO_UNSETTLED
    rising_short = Regime(regime.RISING, 2000, 2.6, detail="still improving", paper_budget=False)
    assert result("uw-beats-regular", s, regimes={"reg": CONVERGED, "uw": rising_short}).verdict == NOT_TESTABLE


def test_the_paper_budget_flag_comes_from_the_runs_steps():
    rows = [{"run_id": "a", "metric": "eval_accuracy", "step": (i + 1) * 250, "value": 0.2 + 0.0001 * i * 250}
            for i in range(40)]
    frame_ = pd.DataFrame(rows)
    kw = dict(curve_metric="eval_accuracy", measure="accuracy", scale=100.0, higher_better=True)
    assert regime.regime(frame_, ["a"], paper_steps=10000, **kw).testable
    assert not regime.regime(frame_, ["a"], paper_steps=20000, **kw).testable
    assert not regime.regime(frame_, ["a"], **kw).testable


def test_clear_yes_clear_no_and_overlap():
    yes = result("uw-beats-regular", frame(cell("reg", mean=70, std=2), cell("uw", writer="uniform", mean=95, std=1)))
    assert yes.verdict == YES and len(yes.comparisons) == 1
    c = yes.comparisons[0]
    assert (c.winner.label, c.winner.mean, c.loser.label, c.loser.mean) == ("DNC+UW", 95, "DNC", 70)
    assert c.what == "Copy T=50 D=4"
    no = result("uw-beats-regular", frame(cell("reg", mean=80, std=1), cell("uw", writer="uniform", mean=60, std=1)))
    assert no.verdict == NO
    overlap = result("uw-beats-regular",
                     frame(cell("reg", mean=78, std=5), cell("uw", writer="uniform", mean=80, std=5)))
    assert overlap.verdict == INCONCLUSIVE and "within the noise" in overlap.comparisons[0].reason
    assert overlap.comparisons[0].p > 0.05
    one_seed = result("uw-beats-regular", frame(cell("reg", mean=70, std=None, n=1),
                                                cell("uw", writer="uniform", mean=95, std=None, n=1)))
    assert one_seed.verdict == verdicts.FEW_SEEDS == "not testable with fewer than 2 seeds"
    assert one_seed.comparisons[0].reason == "DNC+UW: 1 seed; DNC: 1 seed"


def test_a_claim_is_no_when_any_comparison_is_no_and_yes_only_when_all_are():
    both = frame(cell("reg50", mean=70, std=1), cell("uw50", writer="uniform", mean=95, std=1),
                 cell("reg100", seq_len=100, mean=50, std=1), cell("uw100", seq_len=100, writer="uniform", mean=30, std=1))
    r = result("uw-beats-regular", both)
    assert [c.verdict for c in r.comparisons] == [YES, NO] and r.verdict == NO
    mixed = frame(cell("reg50", mean=70, std=1), cell("uw50", writer="uniform", mean=95, std=1),
                  cell("reg100", seq_len=100, mean=50, std=9), cell("uw100", seq_len=100, writer="uniform", mean=52, std=9))
    assert result("uw-beats-regular", mixed).verdict == INCONCLUSIVE
    assert verdicts.combine([]) == INCONCLUSIVE
    ys, ns = verdicts.YES_UNSETTLED, verdicts.NO_UNSETTLED
    assert verdicts.combine([YES, ys]) == ys and verdicts.combine([YES, YES]) == YES
    assert verdicts.combine([ys, ns]) == ns and verdicts.combine([ns, NO]) == NO
    assert verdicts.combine([ys, INCONCLUSIVE]) == INCONCLUSIVE and verdicts.combine([ys, NOT_TESTABLE]) == NOT_TESTABLE
    few = verdicts.FEW_SEEDS
    assert verdicts.combine([INCONCLUSIVE, few]) == few and verdicts.combine([few, NOT_TESTABLE]) == NOT_TESTABLE
    assert verdicts.combine([YES, few]) == few  # a yes beside an untested comparison is not the claim's yes


def test_pairs_hold_the_other_axes_fixed_and_absent_claims_are_skipped():
    s = frame(cell("reg-d4", mean=70, std=1), cell("uw-d2", writer="uniform", memory_size=2, mean=95, std=1),
              cell("lstm", model="lstm", writer="none", controller="lstm", mean=20, std=1),
              cell("cuw-add", task="add", writer="cached_uniform", mean=90, std=1))
    assert result("uw-beats-regular", s) is None  # UW at D=2 has no regular twin at D=2
    r = result("dnc-beats-lstm", s)
    assert r.verdict == YES and r.comparisons[0].what == "Copy T=50"
    assert result("cuw-beats-uw", s) is None  # no UW cell on add
    ids = [x.claim.id for x in verdicts.claim_results(s)]
    assert ids == ["dnc-beats-lstm"]
    # cells not run are not compared
    s2 = frame(cell("reg", mean=None, std=None, n=0, state=NOT_RUN), cell("uw", writer="uniform", mean=95, std=1))
    assert result("uw-beats-regular", s2) is None


def test_claims_restricted_to_their_tasks():
    s = frame(cell("reg", task="double", mean=70, std=1), cell("uw", task="double", writer="uniform", mean=95, std=1))
    assert result("uw-beats-regular", s) is None  # the paper makes it for copy and reverse
    s = frame(cell("uw", task="max", writer="uniform", mean=70, std=1),
              cell("cuw", task="max", writer="cached_uniform", mean=82, std=2))
    assert result("cuw-beats-uw", s).verdict == YES


def test_time_claim_lower_wins_and_needs_one_device():
    s = frame(cell("reg", sec100=4.0, sec100_std=0.1, mean=70, std=1),
              cell("uw", writer="uniform", sec100=2.5, sec100_std=0.1, mean=95, std=1),
              cell("cuw", writer="cached_uniform", sec100=4.6, sec100_std=0.1, mean=90, std=1))
    r = result("uw-cuw-cut-time", s, regimes={})  # time claims need no convergence
    assert [c.verdict for c in r.comparisons] == [YES, NO] and r.verdict == NO
    assert r.measure_name == "CPU s / 100 updates"
    s = frame(cell("reg", sec100=4.0, sec100_std=0.1, cpu100=2.5),  # wall: UW 2.5 < 4.0; CPU: UW 3.0 > 2.5, so no
              cell("uw", writer="uniform", sec100=2.5, sec100_std=0.1, cpu100=3.0))
    r = result("uw-cuw-cut-time", s, regimes={})
    assert r.verdict == NO and r.comparisons[0].winner.wall == pytest.approx(2.5)  # judged on CPU, wall beside
    s = frame(cell("reg", sec100=4.0, sec100_std=0.1), cell("uw", writer="uniform", sec100=2.5, sec100_std=0.1,
                                                             device="cuda:0"))
    r = result("uw-cuw-cut-time", s)
    assert r.verdict == INCONCLUSIVE and r.comparisons[0].reason == "timed on different devices"


def test_mse_claims_prefer_lower_values():
    claim = Claim("uw-mse", "UW beats regular on the sinusoid", "test", winner=Side(None, ("uniform",)),
                  loser=Side(None, ("regular",)))
    s = frame(cell("reg", task="sinusoid", mean=1.05, std=0.05), cell("uw", task="sinusoid", writer="uniform",
                                                                      mean=0.44, std=0.05))
    regs = {"reg": CONVERGED, "uw": CONVERGED}
    assert verdicts.evaluate(claim, s, "mse", regs).verdict == YES
    assert verdicts.evaluate(claim, s, "accuracy", regs).verdict == NO


def test_the_figure_and_table_3_claims_apply_to_their_own_tasks():
    # sinusoid: an MSE, lower wins; UW and CUW each against regular writing and against the LSTM
    s = frame(cell("lstm", model="lstm", task="sinusoid", mean=1.05, std=0.05),
              cell("reg", task="sinusoid", mean=1.00, std=0.05),
              cell("uw", task="sinusoid", writer="uniform", mean=0.44, std=0.05),
              cell("cuw", task="sinusoid", writer="cached_uniform", mean=1.30, std=0.05))
    r = result("uw-cuw-beat-regular-sinusoid", s, "mse")
    assert [c.verdict for c in r.comparisons] == [YES, NO] and r.verdict == NO  # CUW is worse: the claim fails
    assert result("uw-cuw-beat-lstm-sinusoid", s, "mse").verdict == NO
    assert result("cuw-beats-uw-noisy", s, "mse") is None  # no noisy cells: not checked
    assert result("uw-beats-regular-ablation", s, "mse") is None  # not the ablation's task
    # Table 3: UW and CUW with 4 slots against the regular DNC at each of its memory sizes
    px = frame(cell("reg4", task="digits", memory_size=4, mean=80, std=1),
               cell("reg8", task="digits", memory_size=8, mean=90, std=1),
               cell("uw4", task="digits", writer="uniform", memory_size=4, mean=85, std=1))
    r = result("uw-cuw-beat-dnc-pixels", px)
    assert sorted(c.loser.mean for c in r.comparisons) == [80, 90] and r.verdict == NO  # loses to 8 slots
    assert result("uw-beats-regular", px) is None


def ablation(gains, stds=(1.0, 2.0), memory=(2, 4, 9, 24), seq_len=50, n=3):
    """Regular at 50 %, UW at 50 % + gain, per D (ratios 6, 10, 20, 50 % at T=50)."""
    rows = []
    for d, g in zip(memory, gains):
        rows.append(cell(f"reg-{d}", task="double", memory_size=d, seq_len=seq_len, mean=50.0, std=stds[0], n=n))
        rows.append(cell(f"uw-{d}", task="double", writer="uniform", memory_size=d, seq_len=seq_len,
                         mean=50.0 + g, std=stds[1], n=n))
    return frame(*rows)


def test_ablation_window_claim():
    r = result("uw-gain-peaks", ablation([1, 20, 15, 2]))  # peak at 10 %, inside 10-40 %
    assert r.verdict == YES
    c = r.comparisons[0]
    assert c.winner.mean == pytest.approx(20) and c.loser.mean == pytest.approx(2)  # per-seed gains
    assert "10%" in c.winner.label and "50%" in c.loser.label
    assert result("uw-gain-peaks", ablation([25, 5, 3, 1])).verdict == NO  # peak at 6 %, outside
    assert result("uw-gain-peaks", ablation([1, 6, 5, 4], stds=(1.5, 4.0))).verdict == INCONCLUSIVE
    assert result("uw-gain-peaks", ablation([1, 20], memory=(9, 14))) is None  # 20 %, 30 %: nothing outside
    assert result("uw-gain-peaks", ablation([1, 20, 15, 2], n=1)).verdict == verdicts.FEW_SEEDS
    panels = pd.concat([ablation([1, 20, 15, 2]).assign(controller="lstm"),
                        ablation([1, 20, 15, 2]).assign(controller="rnn",
                                                        cell=lambda f: f["cell"] + "-rnn")], ignore_index=True)
    r = result("uw-gain-peaks", panels)  # one series per controller (the ablation's two panels)
    assert len(r.comparisons) == 2 and r.verdict == YES
    first, second = (c.what.split(" vs ")[0] for c in r.comparisons)  # the labels name the controller
    assert "LSTM" in first and "RNN" in second
    assert r.comparisons[0].what.endswith("vs regular writing, Double T=50")


# --------------------------------------------------------------------------------------------------
# Compute, and the section in a report
# --------------------------------------------------------------------------------------------------


def test_compute_from_runs_and_curves():
    """CPU core-hours are the runs' own CPU seconds (CPU s per 100 updates × updates / 100; a trial's updates
    from its timings); wall time × threads is shown beside them under that name."""
    r = pd.DataFrame([
        {"cell": "a", "role": "trial", "status": "finished", "seed": 0, "run_id": "t1", "device": "cpu",
         "steps": None, "train_seconds": 3000.0, "eval_seconds": 600.0, "mean_seconds_per_100": 300.0,
         "mean_cpu_seconds_per_100": 180.0},
        {"cell": "a", "role": "trial", "status": "pruned", "seed": 0, "run_id": "t2", "device": "cpu",
         "steps": None, "train_seconds": None, "eval_seconds": None, "mean_seconds_per_100": None,
         "mean_cpu_seconds_per_100": None},
        {"cell": "a", "role": "final", "status": "finished", "seed": 1, "run_id": "f1", "device": "cpu",
         "steps": 500, "train_seconds": 1800.0, "eval_seconds": 0.0, "mean_seconds_per_100": 360.0,
         "mean_cpu_seconds_per_100": 360.0},
        {"cell": "a", "role": "final", "status": "finished", "seed": 2, "run_id": "f2", "device": "cuda:0",
         "steps": 800, "train_seconds": 3600.0, "eval_seconds": 0.0, "mean_seconds_per_100": 450.0,
         "mean_cpu_seconds_per_100": 450.0},
    ])
    curves = pd.DataFrame([{"run_id": "f1", "metric": "train_loss", "step": s, "value": 0.1} for s in (100, 500)]
                          + [{"run_id": "f2", "metric": "train_loss", "step": 800, "value": 0.1},
                             {"run_id": "t1", "metric": "train_loss", "step": 9999, "value": 0.1}])
    c = compute(r, curves)
    # t1: 1,000 updates (3000 s / 300 s per 100) at 180 CPU s per 100 = 1,800 s; f1: 500 × 3.6 = 1,800 s
    assert c.core_hours == pytest.approx(1.0) and c.n_cpu == 2 and c.gpu_hours == pytest.approx(1.0)
    assert c.wall_core_hours == pytest.approx(1.5)  # (3,000 + 600 + 1,800) s of wall time × 1 thread
    assert (c.n_runs, c.n_timed, c.n_trials, c.n_finals) == (4, 3, 2, 2)
    assert c.updates == [500, 800] and c.seeds == [1, 2] and c.seeds_per_cell == 2
    text = c.text()
    assert text.startswith("1.00 CPU core-hours: the runs' own CPU seconds") and "1.00 GPU-hours" in text
    assert "wall time × 1 thread per CPU run" in text and "1.50 core-hours" in text and "500-800 updates" in text
    c2 = compute(r.assign(threads=2.0), curves)
    assert c2.core_hours == pytest.approx(1.0) and c2.wall_core_hours == pytest.approx(3.0)
    assert "wall time × each run's threads" in c2.text()
    old = compute(r.drop(columns=["mean_cpu_seconds_per_100"]), curves)  # a snapshot from before the column
    assert old.n_cpu == 0 and old.text().startswith("CPU core-hours not recorded")
    assert compute(r.iloc[0:0], curves).core_hours == 0.0


def test_report_has_the_verdicts_section(tmp_path):
    with open(os.path.join(FIXTURE, "study.yaml"), encoding="utf-8") as f:
        view = study.from_mapping(yaml.safe_load(f), "studies/fixture_copy.yaml")
    rep = render.build_report(view, snapshot.Snapshot.from_dir(FIXTURE), str(tmp_path / "fixture_copy"))
    readme = (tmp_path / "fixture_copy" / "README.md").read_text()
    assert "## Verdicts" in readme and "Kendall's τ-b" in readme and "**Compute.**" in readme
    assert readme.index("## Verdicts") < readme.index("## Figures")
    assert "## Search analysis" not in readme  # a faithful study searches nothing
    claims = pd.read_csv(tmp_path / "fixture_copy" / "verdicts.csv")
    assert set(claims["claim"]) <= {c.id for c in verdicts.CLAIMS} and len(claims)
    assert set(claims["verdict"]) <= {YES, NO, INCONCLUSIVE, NOT_TESTABLE, verdicts.FEW_SEEDS}
    assert os.path.exists(tmp_path / "fixture_copy" / "regimes.csv")
    order = pd.read_csv(tmp_path / "fixture_copy" / "orderings.csv")
    assert list(order["column"]) == ["T=50", "T=100"]
    page = (tmp_path / "fixture_copy" / "report.html").read_text()
    assert "<h2>Verdicts</h2>" in page
    assert os.path.join(rep.folder, "verdicts.csv") in rep.files


def test_the_headline_figure_takes_both_sides_of_the_claim_with_the_same_model_and_memory():
    s = frame(cell("reg", mean=70, std=1), cell("uw", writer="uniform", mean=80, std=1),
              cell("uw2", writer="uniform", memory_size=2, mean=80, std=1),  # no regular twin at D=2
              cell("rw", writer="random", mean=60, std=1), cell("add", task="add", writer="uniform", mean=1, std=1))
    assert list(render.claim_cells(s, render.HEADLINE_CLAIM)["cell"]) == ["reg", "uw"]
    assert len(render.claim_cells(s.iloc[[0, 3]], render.HEADLINE_CLAIM)) == 0  # one side only: no figure


def test_a_claim_is_stated_for_the_tasks_its_study_has():
    """A copy-only study tests "UW beats regular writing" on copy: its verdicts.csv and the index say so,
    not "on copy and reverse"."""
    copy_only = frame(cell("reg", mean=70, std=1), cell("uw", writer="uniform", mean=80, std=1))
    r = result("uw-beats-regular", copy_only)
    assert r.tasks == ("copy",) and r.text == "UW beats regular writing on copy"
    both = frame(cell("reg", mean=70, std=1), cell("uw", writer="uniform", mean=80, std=1),
                 cell("reg-r", task="reverse", mean=70, std=1),
                 cell("uw-r", task="reverse", writer="uniform", mean=80, std=1))
    assert result("uw-beats-regular", both).text == "UW beats regular writing on copy and reverse"
    claim = next(c for c in verdicts.CLAIMS if c.id == "uw-cuw-cut-time")  # a claim for every task
    assert claim.text_for(["copy"]) == claim.text
    table = verdict_tables.claim_table(verdicts.Verdicts([], [r], compute(copy_only.iloc[0:0], pd.DataFrame())))
    assert table.rows[0][0] == "UW beats regular writing on copy"
    assert table.csv_columns[:2] == ["claim", "claim_text"] and table.csv_rows[0][1] == r.text
