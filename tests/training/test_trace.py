"""``uwbench trace`` (``uwbench/training/trace.py``): the replay is the run's own updates, the interface fields
partition the interface projection in the order the memory parses it, a spike is found at its update and
named by the view that led it, and the reference paths agree with the run's path."""
from __future__ import annotations

import glob
import math
import os

import pytest
import torch

from uwbench.cli import main
from uwbench.report.rendering import falls
from uwbench.training import trace as tr
from uwbench.training.loop import train

from tests.helpers import ROOT

TINY = {"task": {"name": "copy", "seq_len": 6}, "model": {"name": "dnc", "hidden_size": 12, "memory_size": 3,
                                                          "word_size": 6},
        "train": {"steps": 40, "batch_size": 4, "eval_every": 10, "eval_batches": 2, "lr": 1e-2, "seed": 3}}


def _curve(config):
    result = train(config, progress=False)
    return dict(zip(result.history["step"], result.history["eval_accuracy"]))


def test_the_replay_is_the_run_and_a_changed_curve_is_caught():
    recorded = _curve(TINY)
    result = tr.trace(TINY, 15, 35, compare_every=10, recorded_curve=recorded, progress=False)
    assert [c["step"] for c in result.curve] == [10, 20, 30]
    assert result.replay_departs() is None
    # a curve that is not this run's: the replay says where they part
    other = dict(recorded)
    other[20] = recorded[20] + 0.05
    result = tr.trace(TINY, 15, 35, compare_every=10, recorded_curve=other, progress=False)
    assert result.replay_departs() == 20
    assert "departs from the recorded curve at the evaluation of update 20" in tr.summary(result)


@pytest.mark.parametrize("model", ["dnc", "ntm"])
def test_interface_fields_are_the_columns_parse_reads(model):
    from uwbench.models.base import build_model
    from uwbench.registry import MODELS
    from uwbench.tasks import build_task

    task = build_task("copy", {"seq_len": 4})
    cfg = MODELS.build_config(model, {"hidden_size": 8, "memory_size": 3, "word_size": 5})
    m = build_model(model, task.input_size, task.output_size, cfg, task=task)
    fields = m.memory.interface_fields()
    assert sum(w for _, w in fields) == m.memory.interface_size == m.w_xi.shape[1]

    def parsed(xi):
        iface = m.memory.parse(xi)
        out = {}
        for name, value in iface._asdict().items():
            if hasattr(value, "_asdict"):  # the NTM's heads
                out.update({f"{name}_{k}": v for k, v in value._asdict().items()})
            else:
                out[name] = value
        return out

    base = parsed(torch.zeros(2, m.memory.interface_size))
    start = 0
    for name, width in fields:
        xi = torch.zeros(2, m.memory.interface_size)
        xi[:, start:start + width] = 0.2 + 0.3 * torch.arange(width)  # unequal: a softmax's inputs too
        changed = {k for k, v in parsed(xi).items() if not torch.equal(v, base[k])}
        assert changed == {name}, (name, changed)
        start += width


def test_views_split_w_xi_without_losing_any_of_its_gradient():
    result = tr.trace(TINY, 5, 12, compare_every=100, paths=[], progress=False)
    by_step = {}
    for r in result.rows:
        by_step.setdefault(r["step"], {})[r["view"]] = r
    for step, rows in by_step.items():
        fields = [r["grad_norm"] for n, r in rows.items() if r["kind"] == "field"]
        assert math.isclose(math.sqrt(sum(g * g for g in fields)), rows["w_xi"]["grad_norm"], rel_tol=1e-5)
        if step < 12:  # the window's last update is not applied: it has no update size
            assert rows["w_xi"]["update_norm"] > 0
    assert math.isnan(by_step[12]["w_xi"]["update_norm"])


def test_a_spike_is_found_at_its_update_and_named_by_its_field(monkeypatch, tmp_path):
    original = tr._Observer.__call__

    def inject(self, step, batch, loss):
        if step == 30:  # the write gate's rows of the interface projection get a 1000x gradient
            cols = next(v.columns for v in self.views if v.name == "w_xi[write_gate]")
            self.model.w_xi.grad[:, cols] *= 1000.0
        return original(self, step, batch, loss)

    monkeypatch.setattr(tr._Observer, "__call__", inject)
    result = tr.trace(TINY, 5, 34, compare_every=100, progress=False)
    assert result.onset == 30
    assert tr.leading_views(result, 30, "field")[0][0] == "w_xi[write_gate]"
    assert tr.leading_views(result, 30, "tensor")[0][0] == "w_xi"
    # the spike was compared (every spike is): the run's gradient there is the injected one, so it is far
    # from the reference, while the reference paths agree with each other
    at = tr.path_agreement(result, [30])
    assert at["run"] > 1.0 and at["native64"] < 1e-9 and at["torch32"] < 1e-3
    assert "onset: update 30" in tr.summary(result)
    # written and read back, it says the same
    falls.write_outputs(result, str(tmp_path), "x")
    assert tr.summary(falls.load(str(tmp_path)), "x") == tr.summary(result, "x")


def test_the_loss_rise_is_the_first_update_well_above_the_window_median():
    result = tr.TraceResult(path="eager", start=1, stop=40)
    losses = [0.5] * 25 + [0.6, 0.74, 0.76, 2.0]
    result.steps = [{"step": i + 1, "loss": v, "max_grad_norm": 1.0, "global_grad_norm": 1.0, "spike": False}
                    for i, v in enumerate(losses)]
    assert tr.loss_rise(result) == 28  # 0.76 > 1.5 x 0.5; 0.74 is not
    result.steps = result.steps[:27]
    assert tr.loss_rise(result) is None
    assert "loss rise: none" in tr.summary(result)


def test_reference_paths_agree_with_the_native_run_off_the_spikes():
    result = tr.trace(TINY, 10, 30, compare_every=5, progress=False)
    assert result.path == "native"
    compared = sorted({c["step"] for c in result.compare})
    assert compared == [10, 15, 20, 25, 30]
    agree = tr.path_agreement(result)
    assert set(agree) == {"run", "torch32", "native64"}
    assert agree["native64"] < 1e-9  # the native kernels in float64 against torch in float64
    assert agree["run"] < 1e-3 and agree["torch32"] < 1e-3


def test_the_window_and_settings_are_checked():
    with pytest.raises(ValueError, match="1 <= from <= to <= 40"):
        tr.trace(TINY, 30, 50, progress=False)
    with pytest.raises(ValueError, match="spike_factor"):
        tr.trace(TINY, 5, 10, spike_factor=1.0, progress=False)
    with pytest.raises(ValueError, match="unknown reference path"):
        tr.trace(TINY, 5, 10, paths=["cuda16"], progress=False)


def test_the_command_traces_a_recorded_run(tracking_uri, tmp_path, capsys):
    flags = ["--task", "copy", "--model", "dnc", "--seq-len", "6", "--hidden-size", "12", "--memory-size", "3",
             "--set", "model.word_size=6", "--steps", "30", "--batch-size", "4", "--eval-every", "10",
             "--lr", "1e-2", "--no-progress", "--no-system-metrics", "--tracking-uri", tracking_uri]
    assert main(["train", *flags]) == 0
    run_id = capsys.readouterr().out.split("MLflow run id: ")[1].split()[0]
    out = tmp_path / "trace"
    assert main(["trace", run_id, "--from", "5", "--to", "25", "--tracking-uri", tracking_uri, "--out", str(out),
                 "--compare-every", "10", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "replay: the run's own updates (its 2 evaluations match the recorded curve)" in text
    for name in ("trace.csv", "steps.csv", "compare.csv", "curve.csv", "meta.json", "summary.md", "trace.png"):
        assert os.path.getsize(out / name) > 0, name
    assert main(["trace", "0123456789abcdef", "--from", "1", "--to", "2", "--tracking-uri", tracking_uri]) == 2
    assert "no run 0123456789abcdef" in capsys.readouterr().err


COMMITTED_TRACES = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(ROOT, "reports", "traces", "*", "meta.json")))


@pytest.mark.parametrize("folder", COMMITTED_TRACES, ids=[os.path.basename(f) for f in COMMITTED_TRACES])
def test_a_committed_trace_says_what_its_files_say(folder, tmp_path):
    """A committed trace's summary and figure are what its CSV files give (docs/findings.md quotes them)."""
    import json

    from uwbench.report.rendering import compare

    with open(os.path.join(folder, "meta.json")) as f:
        source = json.load(f)["source"]
    result = falls.load(folder)
    with open(os.path.join(folder, "summary.md")) as f:
        assert tr.summary(result, source) == f.read()
    falls.plot(result, str(tmp_path / "trace.png"), source)
    with open(os.path.join(folder, "trace.png"), "rb") as a, open(tmp_path / "trace.png", "rb") as b:
        assert compare.figure_difference(a.read(), b.read()) is None


def test_a_branch_from_a_saved_state_continues_the_run_and_a_changed_setting_changes_it(tmp_path):
    state_path = str(tmp_path / "state.pt")
    straight = tr.trace(TINY, 21, 38, compare_every=100, paths=[], progress=False, save_state=state_path)
    state = torch.load(state_path, map_location="cpu", weights_only=True)
    assert state["step"] == 20  # the last evaluation before the window
    same = tr.trace(TINY, 21, 38, compare_every=100, paths=[], progress=False, state=state)
    assert same.branch_from == 20 and same.rows == straight.rows and same.steps == straight.steps
    state = torch.load(state_path, map_location="cpu", weights_only=True)
    slower = tr.trace(TINY, 21, 38, compare_every=100, paths=[], progress=False, state=state,
                      changes={"lr": "1e-4"}, recorded_curve={c["step"]: c["replay"] for c in straight.curve})
    assert slower.changes == {"lr": "1e-4"}
    assert slower.replay_departs() is None  # checked only up to the branch point
    # the batches are the same (the loss of the first branched update, before any changed step, too)
    assert slower.steps[0]["loss"] == straight.steps[0]["loss"]
    ratio = [b["update_norm"] / a["update_norm"] for a, b in zip(straight.rows, slower.rows)
             if a["view"] == "w_xi" and math.isfinite(a["update_norm"]) and a["step"] >= 22]
    assert ratio and max(ratio) < 0.5  # lr 1e-4 against the run's 1e-2: much smaller steps
    assert "branch: from the saved state at update 20, continued with train.lr=1e-4" in tr.summary(slower)
    # side by side: one row per trace, named by what it changed, its evaluations in the window
    falls.write_outputs(straight, str(tmp_path / "run"), "the run")
    falls.write_outputs(slower, str(tmp_path / "slow"), "the run, lr 1e-4")
    assert main(["trace", "--branches", str(tmp_path / "run"), str(tmp_path / "slow"), "--out",
                 str(tmp_path / "side")]) == 0
    import pandas as pd

    side = pd.read_csv(tmp_path / "side" / "branches.csv")
    assert list(side["branch"]) == ["the run (replay)", "train.lr=1e-4"]
    assert list(side["from_state"].fillna(-1)) == [-1, 20]
    assert side["eval_30"].iloc[0] == pytest.approx([c["replay"] for c in straight.curve if c["step"] == 30][0])
    assert "# Branches of the run" in (tmp_path / "side" / "branches.md").read_text()
    assert main(["trace", "--branches", str(tmp_path), "--out", str(tmp_path / "x")]) == 2  # not a trace folder
    with pytest.raises(ValueError, match="train.lr, train.clip, train.clip_mode"):
        tr.trace(TINY, 21, 38, progress=False, state=state, changes={"steps": "5"})
    with pytest.raises(ValueError, match="need a state"):
        tr.trace(TINY, 21, 38, progress=False, changes={"lr": "1e-4"})
    with pytest.raises(ValueError, match="the window must start after it"):
        tr.trace(TINY, 15, 38, progress=False, state=state)


COMMITTED_BRANCHES = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(ROOT, "reports", "traces", "*", "branches.csv")))


@pytest.mark.parametrize("folder", COMMITTED_BRANCHES, ids=[os.path.basename(f) for f in COMMITTED_BRANCHES])
def test_committed_branches_say_what_their_traces_say(folder, tmp_path):
    """A committed side-by-side table and figure are what their trace folders give."""
    import pandas as pd

    from uwbench.report.rendering import compare

    names = list(pd.read_csv(os.path.join(folder, "branches.csv"))["trace"])
    assert main(["trace", "--branches", *[os.path.join(folder, n) for n in names], "--out", str(tmp_path)]) == 0
    for name in ("branches.csv", "branches.md"):
        with open(os.path.join(folder, name)) as a, open(tmp_path / name) as b:
            assert a.read() == b.read(), name
    with open(os.path.join(folder, "branches.png"), "rb") as a, open(tmp_path / "branches.png", "rb") as b:
        assert compare.figure_difference(a.read(), b.read()) is None
