"""Report verdicts: Kendall's tau-b, the paper's claims under the one overlap rule (a clear yes, a clear no,
overlapping spreads, too few seeds, claims that do not apply), the ablation's ratio-window claim, compute,
and the section in a built report."""
from __future__ import annotations

import os

import pandas as pd
import pytest
import yaml

from uwbench.report import render, runs, study, tables, verdicts
from uwbench.report.verdicts import INCONCLUSIVE, NO, YES, Claim, Side, Value

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "report")


def cell(cell_id, model="dnc", writer="regular", task="copy", seq_len=50, memory_size=4, mean=None, std=None, n=3,
         sec100=None, sec100_std=None, controller="ln_lstm", device="cpu", state=tables.OK):
    """One row of the report's cell table (``tables.summarize``) with the columns the verdicts read."""
    row = {}
    row.update(cell=cell_id, cache_size=None, hidden_size=None, paper=None, in_spec=True, task=task, model=model, controller=controller, writer=writer,
               seq_len=seq_len, memory_size=memory_size if model != "lstm" else None,
               compression_ratio=((memory_size + 1) / seq_len) if model != "lstm" else None,
               n=n, n_failed=0, n_trials=0, grid_points=1, mean=mean, std=std, state=state,
               sec100_mean=sec100, sec100_std=sec100_std, device=device, verdict="")
    return row


def frame(*rows):
    return pd.DataFrame(list(rows))


def result(claim_id, summary, metric="accuracy"):
    claim = next(c for c in verdicts.CLAIMS if c.id == claim_id)
    return verdicts.evaluate(claim, summary, metric)


# --------------------------------------------------------------------------------------------------
# Kendall's tau-b
# --------------------------------------------------------------------------------------------------


def test_kendall_tau_b_known_values():
    tau = verdicts.kendall_tau_b
    assert tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)  # 2 concordant, 1 discordant of 3 pairs
    # ties: x has one tied pair; 5 pairs untied in x, all 6 untied in y; C=5, D=0 -> 5 / sqrt(5 * 6)
    assert tau([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(5 / (5 * 6) ** 0.5)
    assert tau([5.0], [1.0]) is None  # n < 2
    assert tau([], []) is None
    assert tau([2, 2, 2], [1, 2, 3]) is None  # one side all tied: undefined
    with pytest.raises(ValueError, match="paired"):
        tau([1, 2], [1])


def test_kendall_tau_b_agrees_with_scipy_on_ties():
    stats = pytest.importorskip("scipy.stats")
    x = [97.7, 69.3, 68.0, 44.2, 44.2, 15.6, 12.7, 83.8]
    y = [90.1, 71.0, 71.0, 50.2, 40.0, 20.0, 20.0, 80.0]
    assert verdicts.kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic)


def test_orderings_per_paper_table_column():
    with open(os.path.join(FIXTURE, "study.yaml"), encoding="utf-8") as f:
        view = study.from_mapping(yaml.safe_load(f), "studies/fixture_copy.yaml")
    snap = runs.Snapshot.from_dir(FIXTURE)
    summary = tables.summarize(view, snap.runs)
    found = {o.column: o for o in verdicts.orderings(tables.paper_tables(summary, view))}
    assert set(found) == {"T=50", "T=100"}
    for column, seq_len in (("T=50", 50), ("T=100", 100)):
        done = summary[(summary["seq_len"] == seq_len) & (summary["state"] == tables.OK) & summary["paper"].notna()]
        assert found[column].n == len(done)
        want = verdicts.kendall_tau_b(list(done["mean"]), list(done["paper"]))
        assert found[column].tau == pytest.approx(want, abs=1e-6) if want is not None else found[column].tau is None


def test_ordering_text_says_why_it_is_undefined():
    assert verdicts.Ordering("t", "c", 1, None).text() == "n/a (fewer than 2 cells)"
    assert verdicts.Ordering("t", "c", 3, None).text() == "n/a (all tied)"
    assert verdicts.Ordering("t", "c", 3, -0.333).text() == "-0.33"


# --------------------------------------------------------------------------------------------------
# Claims
# --------------------------------------------------------------------------------------------------


def test_the_one_rule():
    hi = True
    assert verdicts.compare(Value(95, 1, 3), Value(70, 2, 3), hi) == (YES, "")
    assert verdicts.compare(Value(60, 1, 3), Value(80, 1, 3), hi) == (NO, "")
    assert verdicts.compare(Value(80, 5, 3), Value(78, 5, 3), hi)[0] == INCONCLUSIVE  # spreads overlap
    assert verdicts.compare(Value(80, 1, 3), Value(78, 1, 3), hi)[0] == INCONCLUSIVE  # 79-81 touches 77-79
    assert "seeds" in verdicts.compare(Value(95, None, 1), Value(70, 2, 3), hi)[1]  # n < 2: no spread
    assert verdicts.compare(Value(1.0, 0.1, 3), Value(2.0, 0.1, 3), higher_better=False) == (YES, "")
    assert verdicts.compare(Value(1.0, 0.1, 3), Value(2.0, 0.1, 3), False, same_device=False)[0] == INCONCLUSIVE


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
    assert overlap.verdict == INCONCLUSIVE and "overlap" in overlap.comparisons[0].reason
    one_seed = result("uw-beats-regular", frame(cell("reg", mean=70, std=None, n=1),
                                                cell("uw", writer="uniform", mean=95, std=None, n=1)))
    assert one_seed.verdict == INCONCLUSIVE


def test_a_claim_is_no_when_any_comparison_is_no_and_yes_only_when_all_are():
    both = frame(cell("reg50", mean=70, std=1), cell("uw50", writer="uniform", mean=95, std=1),
                 cell("reg100", seq_len=100, mean=50, std=1), cell("uw100", seq_len=100, writer="uniform", mean=30, std=1))
    r = result("uw-beats-regular", both)
    assert [c.verdict for c in r.comparisons] == [YES, NO] and r.verdict == NO
    mixed = frame(cell("reg50", mean=70, std=1), cell("uw50", writer="uniform", mean=95, std=1),
                  cell("reg100", seq_len=100, mean=50, std=9), cell("uw100", seq_len=100, writer="uniform", mean=52, std=9))
    assert result("uw-beats-regular", mixed).verdict == INCONCLUSIVE
    assert verdicts.combine([]) == INCONCLUSIVE


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
    s2 = frame(cell("reg", mean=None, std=None, n=0, state=tables.NOT_RUN), cell("uw", writer="uniform", mean=95, std=1))
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
              cell("cuw", writer="cached_uniform", sec100=4.2, sec100_std=0.1, mean=90, std=1))
    r = result("uw-cuw-cut-time", s)
    assert [c.verdict for c in r.comparisons] == [YES, NO] and r.verdict == NO
    assert r.measure_name == "s / 100 updates"
    s = frame(cell("reg", sec100=4.0, sec100_std=0.1), cell("uw", writer="uniform", sec100=2.5, sec100_std=0.1,
                                                             device="cuda:0"))
    r = result("uw-cuw-cut-time", s)
    assert r.verdict == INCONCLUSIVE and r.comparisons[0].reason == "timed on different devices"


def test_mse_claims_prefer_lower_values():
    claim = Claim("uw-mse", "UW beats regular on the sinusoid", "test", winner=Side(None, ("uniform",)),
                  loser=Side(None, ("regular",)))
    s = frame(cell("reg", task="sinusoid", mean=1.05, std=0.05), cell("uw", task="sinusoid", writer="uniform",
                                                                      mean=0.44, std=0.05))
    assert verdicts.evaluate(claim, s, "mse").verdict == YES
    assert verdicts.evaluate(claim, s, "accuracy").verdict == NO


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


def ablation(gains, stds=(1.0, 1.0), memory=(2, 4, 9, 24), seq_len=50, n=3):
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
    assert c.winner.mean == 20 and c.loser.mean == 2 and c.winner.std == 2.0  # spread std_UW + std_regular
    assert "10%" in c.winner.label and "50%" in c.loser.label
    assert result("uw-gain-peaks", ablation([25, 5, 3, 1])).verdict == NO  # peak at 6 %, outside
    assert result("uw-gain-peaks", ablation([1, 6, 5, 4], stds=(1.5, 1.5))).verdict == INCONCLUSIVE
    assert result("uw-gain-peaks", ablation([1, 20], memory=(9, 14))) is None  # 20 %, 30 %: nothing outside
    assert result("uw-gain-peaks", ablation([1, 20, 15, 2], n=1)).verdict == INCONCLUSIVE
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
    r = pd.DataFrame([
        {"cell": "a", "role": "trial", "status": "finished", "seed": 0, "run_id": "t1", "device": "cpu",
         "train_seconds": 3000.0, "eval_seconds": 600.0},
        {"cell": "a", "role": "trial", "status": "pruned", "seed": 0, "run_id": "t2", "device": "cpu",
         "train_seconds": None, "eval_seconds": None},
        {"cell": "a", "role": "final", "status": "finished", "seed": 1, "run_id": "f1", "device": "cpu",
         "train_seconds": 1800.0, "eval_seconds": 0.0},
        {"cell": "a", "role": "final", "status": "finished", "seed": 2, "run_id": "f2", "device": "cuda:0",
         "train_seconds": 3600.0, "eval_seconds": 0.0},
    ])
    curves = pd.DataFrame([{"run_id": "f1", "metric": "train_loss", "step": s, "value": 0.1} for s in (100, 500)]
                          + [{"run_id": "f2", "metric": "train_loss", "step": 800, "value": 0.1},
                             {"run_id": "t1", "metric": "train_loss", "step": 9999, "value": 0.1}])
    c = verdicts.compute(r, curves)
    assert c.core_hours == pytest.approx(1.5) and c.gpu_hours == pytest.approx(1.0)
    assert (c.n_runs, c.n_timed, c.n_trials, c.n_finals) == (4, 3, 2, 2)
    assert c.updates == [500, 800] and c.seeds == [1, 2] and c.seeds_per_cell == 2
    text = c.text()
    assert "1.50 CPU core-hours and 1.00 GPU-hours" in text and "500-800 updates" in text and "1 thread" in text
    c2 = verdicts.compute(r.assign(threads=2.0), curves)
    assert c2.core_hours == pytest.approx(3.0) and "each run's threads" in c2.text()
    assert verdicts.compute(r.iloc[0:0], curves).core_hours == 0.0


def test_report_has_the_verdicts_section(tmp_path):
    with open(os.path.join(FIXTURE, "study.yaml"), encoding="utf-8") as f:
        view = study.from_mapping(yaml.safe_load(f), "studies/fixture_copy.yaml")
    rep = render.build_report(view, runs.Snapshot.from_dir(FIXTURE), str(tmp_path / "fixture_copy"))
    readme = (tmp_path / "fixture_copy" / "README.md").read_text()
    assert "## Verdicts" in readme and "Kendall's τ-b" in readme and "**Compute.**" in readme
    assert readme.index("## Verdicts") < readme.index("## Figures")
    assert "## Search analysis" not in readme  # a faithful study searches nothing
    claims = pd.read_csv(tmp_path / "fixture_copy" / "verdicts.csv")
    assert set(claims["claim"]) <= {c.id for c in verdicts.CLAIMS} and len(claims)
    assert set(claims["verdict"]) <= {YES, NO, INCONCLUSIVE}
    order = pd.read_csv(tmp_path / "fixture_copy" / "orderings.csv")
    assert list(order["column"]) == ["T=50", "T=100"]
    page = (tmp_path / "fixture_copy" / "report.html").read_text()
    assert "<h2>Verdicts</h2>" in page
    assert os.path.join(rep.folder, "verdicts.csv") in rep.files
