"""Parameter counts pinned against the paper's Table 1 (docs/reference.md §9.2) and the `uwbench params` command."""
from __future__ import annotations

import pytest
import torch

from uwbench.cli import main
from uwbench.models.base import build_model
from uwbench.models.params import PAPER_TOTALS, param_report
from uwbench.registry import MODELS
from uwbench.tasks import build_task

torch.set_num_threads(1)


def report(model_name, **values):
    task = build_task("copy")
    cfg = MODELS.build_config(model_name, values)
    model = build_model(model_name, 10, 10, cfg, task=task)
    return param_report(model_name, model, cfg, 10, 10)


@pytest.mark.parametrize("writer", ["regular", "uniform", "random"])
def test_dnc_matches_the_paper(writer):
    r = report("dnc", hidden_size=100, memory_size=4, writer=writer)
    assert r.ours == 98_640  # LN-LSTM 70,600 + interface 26,400 + W_y 1,000 + W_r 640
    assert dict(r.parts) == {"controller": 70_600, "w_xi": 26_400, "w_y": 1_000, "w_r": 640}
    assert [n for _, n in r.unused] == [200]  # the TF code's two unused 10x10 embeddings
    assert r.tf_total == 98_840 == PAPER_TOTALS["dnc"] and r.paper[1] == 98_840


def test_cuw_matches_the_paper():
    r = report("dnc", hidden_size=95, memory_size=4, writer="cached_uniform", attention_size=16)
    assert r.ours == 95_920 and dict(r.parts)["cache_attention"] == 16 * (95 + 95 + 64 + 1)
    assert r.tf_total == 96_120 == PAPER_TOTALS["dnc_cuw"] and r.paper[1] == 96_120


def test_lstm_matches_the_paper():
    r = report("lstm", hidden_size=125)
    assert r.ours == 70_000  # LN-LSTM 68,750 + W_y 1,250
    assert [n for _, n in r.unused] == [200, 33_000, 640]  # embeddings, unused interface, unused W_r
    assert r.tf_total == 103_840 == PAPER_TOTALS["lstm"] and r.paper[1] == 103_840


def test_other_configurations_have_no_paper_row():
    r = report("dnc", hidden_size=64, memory_size=4)
    assert r.paper is None and r.tf_total == r.ours + 200
    assert report("dnc", hidden_size=100, memory_size=4, controller="lstm").paper is None
    assert report("dnc", hidden_size=100, memory_size=4, writer="cached_uniform").paper is None


def test_params_command_prints_the_reconciliation(capsys):
    assert main(["params", "--model", "dnc", "--hidden-size", "100", "--memory-size", "4"]) == 0
    out = capsys.readouterr().out
    assert "98,640" in out and "200" in out and "98,840  matches" in out
    assert main(["params", "--model", "dnc", "--hidden-size", "95", "--writer", "cached_uniform",
                 "--set", "model.attention_size=16"]) == 0
    assert "96,120  matches" in capsys.readouterr().out
    assert main(["params", "--model", "lstm", "--hidden-size", "125"]) == 0
    out = capsys.readouterr().out
    assert "70,000" in out and "33,000" in out and "103,840  matches" in out


def test_params_command_rejects_keys_the_model_lacks(capsys):
    assert main(["params", "--model", "lstm", "--memory-size", "4"]) == 2
    assert "unknown key 'memory_size'" in capsys.readouterr().err
