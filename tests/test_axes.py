"""Run axes (``uwbench.axes``): one registration makes an axis a run tag, a runs.csv column, a label part
and a cell-id token; the cache-size rule and the compression ratio have one home."""
from __future__ import annotations

import textwrap

import pytest

from uwbench import axes

STUDY = """
id: axis_probe
mode: faithful
task: {name: copy, seq_len: 6}
title: a throwaway axis
question: q
artifact: "Table 0"
fixed:
  train: {steps: 4}
cells:
  - {model: dnc, label: "DNC W={model.word_size}", set: {model: {hidden_size: 8, memory_size: 2}},
     grid: {model.word_size: [16, 32]}}
seeds: [0]
profiles:
  cpu: {}
  smoke: {}
"""

WORD_SIZE = axes.Axis("word_size", "model.word_size", int, short="W", id_rank=8, label_rank=4,
                      description="memory word size (a test axis)")


def _plan(tmp_path):
    from uwbench.spec import load_plan

    path = tmp_path / "axis_probe.yaml"
    path.write_text(textwrap.dedent(STUDY))
    return load_plan(str(path), "cpu"), str(path)


def test_a_registered_axis_reaches_tags_csv_labels_and_cell_ids(tmp_path, tracking_uri, capsys):
    from uwbench.config import flatten
    from uwbench import snapshot
    from uwbench.report.data import study
    from uwbench.report.analysis.labels import label_flags
    from uwbench.report.analysis.summary import summarize
    from uwbench.report.rendering.tables import cells_table, paper_tables
    from uwbench.sweeps import common
    from uwbench.tracking.mlflow import Run, ensure_experiment
    from uwbench.training.config import resolve_run

    plan, path = _plan(tmp_path)
    assert [c.id for c in plan.cells] == ["dnc-word_size16", "dnc-word_size32"]  # unregistered: the key's name
    with axes.registered(WORD_SIZE):
        plan, path = _plan(tmp_path)
        assert [c.id for c in plan.cells] == ["dnc-W16", "dnc-W32"]  # cell ids
        assert "word_size" in common.child_tag_names()
        from uwbench.cli import main

        assert main(["ls", "axes"]) == 0 and "word_size          model.word_size" in capsys.readouterr().out

        experiment_id = ensure_experiment(plan.id, tracking_uri)
        for i, cell in enumerate(plan.cells):
            job = common.Job(study=plan.id, profile=plan.profile, mode=plan.mode, spec_hash=plan.spec_hash,
                             backend="optuna", cell=cell, role="final", params={}, seed=0, trial_number=i,
                             objective_metric="eval_accuracy", experiment_id=experiment_id, parent_run_id="",
                             uri=tracking_uri)
            resolved = resolve_run(job.config()).as_dict()
            tags = common.child_tags(job, resolved)
            assert tags["word_size"] == (16, 32)[i]  # run tags
            run = Run(plan.id, run_name=cell.id, tags={**tags, "status": "finished"}, uri=tracking_uri,
                      experiment_id=experiment_id)
            run.log_params(flatten(resolved))
            run.log_metrics({"test_accuracy": 0.5 + 0.1 * i, "best_eval_accuracy": 0.5}, 0)
            run.end()

        snap = snapshot.from_mlflow(plan.id, tracking_uri, with_curves=False)
        header = snap.runs_csv.splitlines()[0].split(",")
        assert "word_size" in header  # runs.csv column
        assert sorted(snap.runs["word_size"]) == [16.0, 32.0]

        view = study.load(path, snap.runs)
        assert [c.axes["word_size"] for c in view.cells] == [16, 32]
        assert [c.label for c in view.cells] == ["DNC W=16", "DNC W=32"]
        summary = summarize(view, snap.runs)
        assert label_flags(summary)["mention"] == {"word_size"}
        labels = cells_table(summary, view).rows
        assert [r[1] for r in labels] == ["DNC (W=16)", "DNC (W=32)"]  # report labels
        assert [b.rows[0][0] for b in paper_tables(summary, view)] == ["DNC (W=16)"]
    assert "word_size" not in axes.names() and "word_size" not in snapshot.columns()


def test_registration_rejects_duplicates_and_bad_paths():
    with pytest.raises(ValueError, match="already registered"):
        axes.register(axes.Axis("memory_size", "model.slots", int))
    with pytest.raises(ValueError, match="already the axis 'memory_size'"):
        axes.register(axes.Axis("slots", "model.memory_size", int))
    with pytest.raises(ValueError, match="section.key"):
        axes.Axis("slots", "memory_size", int)
    with pytest.raises(ValueError, match="built in"):
        axes.unregister("seq_len")


def test_cache_size_applies_only_to_the_cached_uniform_writer():
    config = {"task": {"name": "copy", "seq_len": 50},
              "model": {"name": "dnc", "writer": "uniform", "memory_size": 4, "cache_size": 5},
              "train": {"lr": 1e-3, "clip": 10.0, "seed": 0}}
    assert axes.run_tags(config)["cache_size"] == axes.NONE
    assert not axes.applies("cache_size", {"writer": "uniform", "cache_size": 5})
    config["model"]["writer"] = "cached_uniform"
    assert axes.run_tags(config)["cache_size"] == 5
    assert axes.applies("cache_size", {"writer": "cached_uniform", "cache_size": 5})


def test_compression_ratio_comes_from_theory_and_is_absent_without_memory():
    from uwbench.theory import compression_ratio

    config = {"task": {"name": "copy", "seq_len": 50}, "model": {"name": "dnc", "memory_size": 4},
              "train": {"lr": 1e-3, "clip": 10.0, "seed": 0}}
    assert axes.run_tags(config)["compression_ratio"] == round(compression_ratio(50, 4), 6)
    assert axes.compression_ratio({"seq_len": 8, "memory_size": 2}) == compression_ratio(8, 2)
    lstm = {"task": {"name": "copy", "seq_len": 50}, "model": {"name": "lstm", "hidden_size": 8},
            "train": {"lr": 1e-3, "clip": 10.0, "seed": 0}}
    tags = axes.run_tags(lstm)
    assert tags["compression_ratio"] == tags["memory_size"] == tags["writer"] == axes.NONE
    assert axes.compression_ratio({"seq_len": None, "memory_size": 4}) is None


def test_labels_and_id_tokens():
    assert axes.label("seq_len", 50) == "T=50" and axes.label("memory_size", 4.0) == "D=4"
    assert axes.label("controller", "ln_lstm") == "LN-LSTM"
    assert axes.id_token("task.seq_len", 50) == "T50" and axes.id_token("model.writer", "uniform") == "uniform"
    assert axes.id_token("model.decoder_write", False) == "no_decoder_write"
    assert axes.id_token("train.batch_size", 16) == "batch_size16"
    order = sorted(["model.memory_size", "task.seq_len", "dataset", "model.writer", "task.name"], key=axes.id_rank)
    assert order == ["model.writer", "task.name", "dataset", "task.seq_len", "model.memory_size"]
