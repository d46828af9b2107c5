"""Contract tests: every registered task, model, controller and writer gets the same battery, so a new
component is tested by registering it. The battery: the component builds from its name; one forward and
backward gives every trainable parameter a finite gradient; `train` runs two updates and records the
run in a real MLflow store (status, the whole resolved config as params, the parameter count).

Sizes are tiny and generic: a setting below is applied wherever a component has it. Real-data tasks read
small fixture files written once per module (the writers of tests/helpers/data.py); a task whose data
no fixture provides is skipped with the reason.

This file also registers a toy writer (on every k-th encoder step, with its own setting ``every``) the
way a writer plugin would: it goes through the battery like the built-in writers, and through
`uwbench train`, a smoke sweep and a report.
"""
from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from typing import List

import numpy as np
import pytest
import torch

from tests.helpers.data import write_csv, write_imdb, write_mnist
from tests.helpers.learning import _one_thread  # noqa: F401  (autouse: one torch thread on shared 2-core machines)

from uwbench.config import flatten, section_keys
from uwbench.errors import DataNotFoundError
from uwbench.models.base import build_model
from uwbench.registry import CONTROLLERS, MODELS, TASKS, WRITERS
from uwbench.tasks import build_task
from uwbench.training.config import resolve_run
from uwbench.leaderboard import contract
from uwbench.writing.base import Writer

# ---- the toy writer: one file's worth of code, registered from this test file alone ----


@dataclass
class EveryKthConfig:
    every: int = 3  # write on encoder steps k-1, 2k-1, ... (every k-th step)

    def __post_init__(self):
        if self.every < 1:
            raise ValueError(f"`every >= 1` must hold, got {self.every}")


if "every_kth" not in WRITERS:  # registered once per process
    @WRITERS.register("every_kth", config=EveryKthConfig, help="test only: write on every k-th encoder step")
    class EveryKthWriter(Writer):
        def schedule(self, n_steps: int) -> List[bool]:
            return [(t + 1) % self.options.every == 0 for t in range(n_steps)]


# ---- tiny settings, applied wherever a component has the key ----

TINY_TASK = {"seq_len": 4, "out_len": 3, "test_size": 4, "val_size": 4, "embedding": "trainable",
             "embedding_dim": 4, "max_len": 6, "val_fraction": 0.25}
TINY_MODEL = {"hidden_size": 6, "memory_size": 2, "word_size": 4, "cache_size": 2, "attention_size": 3,
              "writer_seed": 0}
TINY_TRAIN = {"steps": 2, "batch_size": 4, "eval_every": 2, "eval_batches": 1}
BATTERY_TASK, BATTERY_MODEL = "copy", "lstm"  # the partners of the component under test


memory_models = contract.memory_models  # the models that take a writer (the memory frame's models)


def model_section(name: str, **values) -> dict:
    cfg = MODELS.entry(name).config
    keys = section_keys(cfg, values) if cfg else set()
    return {"name": name, **{k: v for k, v in TINY_MODEL.items() if k in keys}, **values}


def task_section(name: str, data_dir: str) -> dict:
    cfg = TASKS.entry(name).config
    keys = section_keys(cfg) if cfg else set()
    tiny = dict(TINY_TASK, data_dir=data_dir)
    return {"name": name, **{k: v for k, v in tiny.items() if k in keys}}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    """Small files for every real dataset a fixture writer knows: MNIST, the CSV document sets, IMDB."""
    from uwbench.tasks.documents import DATASETS

    root = str(tmp_path_factory.mktemp("data"))
    write_mnist(os.path.join(root, "mnist"), n_train=24, n_test=8)
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "news", "review"]
    for ds in DATASETS.values():
        if ds.layout == "csv":
            for split, n in (("train", 12), ("test", 6)):
                rows = [(1 + i % ds.num_classes, f"title {i}", " ".join(rng.choice(words, 1 + i % 5)))
                        for i in range(n)]
                write_csv(os.path.join(root, ds.folder, f"{split}.csv"), rows)
    write_imdb(root, n=3)
    return root


def battery(config: dict, uri: str) -> None:
    """Build from names, a gradient for every parameter, two recorded updates."""
    from uwbench.tracking.mlflow import Run, get_run
    from uwbench.training.loop import train

    try:
        resolved = resolve_run(config)
        torch.manual_seed(0)
        task = build_task(resolved.task_name, resolved.task_cfg)
    except DataNotFoundError as exc:
        pytest.skip(f"task {config['task']['name']} needs data files no fixture writes: {exc}")
    model = build_model(resolved.model_name, task.input_size, task.output_size, resolved.model_cfg, task=task)
    assert model.num_parameters() > 0
    batch = task.sample(4, torch.Generator().manual_seed(0))
    task.loss(model(batch.inputs, batch.decoder_inputs, batch.lengths), batch).backward()
    assert contract.gradient_problems(model) == []  # the check `uwbench leaderboard` runs on a plugin

    run = Run("contracts", run_name=f"{resolved.task_name}-{resolved.model_name}", uri=uri)
    result = train(config, run=run, progress=False)
    assert result.status == "finished" and result.steps_done == TINY_TRAIN["steps"], result.error
    assert result.num_parameters == model.num_parameters()
    record = get_run(result.run_id, uri)
    assert record["status"] == "FINISHED"
    expected = {k: str(v) for k, v in flatten(resolved.as_dict()).items()}
    assert {k: record["params"].get(k) for k in expected} == expected  # the whole resolved config
    assert record["tags"]["num_parameters"] == str(model.num_parameters())
    assert f"test_{task.metric}" in record["metrics"]


@pytest.mark.parametrize("task", TASKS.names())
def test_task_contract(task, data_dir, tracking_uri):
    battery({"task": task_section(task, data_dir), "model": model_section(BATTERY_MODEL), "train": TINY_TRAIN},
            tracking_uri)


@pytest.mark.parametrize("model", MODELS.names())
def test_model_contract(model, data_dir, tracking_uri):
    battery({"task": task_section(BATTERY_TASK, data_dir), "model": model_section(model), "train": TINY_TRAIN},
            tracking_uri)


@pytest.mark.parametrize("model", [BATTERY_MODEL] + memory_models()[:1])
@pytest.mark.parametrize("controller", CONTROLLERS.names())
def test_controller_contract(controller, model, data_dir, tracking_uri):
    battery({"task": task_section(BATTERY_TASK, data_dir), "model": model_section(model, controller=controller),
             "train": TINY_TRAIN}, tracking_uri)


@pytest.mark.parametrize("model", memory_models())
@pytest.mark.parametrize("writer", WRITERS.names())
def test_writer_contract(writer, model, data_dir, tracking_uri):
    battery({"task": task_section(BATTERY_TASK, data_dir), "model": model_section(model, writer=writer),
             "train": TINY_TRAIN}, tracking_uri)
    # the user-facing check (`uwbench leaderboard`): schedule lengths, the cached attention's shapes, the output
    assert contract.writer_problems(writer, model, train=False) == []


def test_every_kind_is_covered():
    """The battery's partners exist, and the memory models take writers (else the writer tests run on none)."""
    assert BATTERY_TASK in TASKS and BATTERY_MODEL in MODELS and memory_models()
    assert "every_kth" in WRITERS.names()


# ---- the toy writer end to end: its own setting, `uwbench train`, a smoke sweep, a report ----


def test_a_writer_registered_from_a_test_file_owns_its_setting():
    cfg = resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc", "writer": "every_kth", "every": 2}})
    assert cfg.model_cfg.writer_config == EveryKthConfig(every=2)
    assert flatten(cfg.as_dict())["model.every"] == 2  # recorded flat, like the built-in writers' settings
    values = {k: v for k, v in model_section("dnc", writer="every_kth").items() if k != "name"}
    model = build_model("dnc", 10, 10, values)
    assert model.writer.schedule(7) == [False, False, True, False, False, True, False]  # the default k = 3
    from uwbench.config import ConfigError

    with pytest.raises(ConfigError, match="every is a setting of writer 'every_kth', not of writer 'uniform'"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc", "writer": "uniform", "every": 2}})
    with pytest.raises(ConfigError, match="cache_size is a setting of writer 'cached_uniform'"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc", "writer": "every_kth", "cache_size": 2}})
    with pytest.raises(ConfigError, match="`every >= 1` must hold, got 0"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc", "writer": "every_kth", "every": 0}})


def test_toy_writer_through_train_sweep_and_report(tracking_uri, tmp_path, capsys):
    from uwbench.cli import main
    from uwbench.tracking.mlflow import search_runs

    args = ["train", "--task", "copy", "--model", "dnc", "--seq-len", "5", "--writer", "every_kth",
            "--set", "model.every=2", "--set", "model.hidden_size=6", "--set", "model.word_size=4",
            "--memory-size", "2", "--steps", "2", "--batch-size", "4", "--eval-every", "2",
            "--set", "task.test_size=4", "--set", "train.eval_batches=1",
            "--tracking-uri", tracking_uri, "--experiment", "toy", "--no-progress"]
    assert main(args) == 0
    row = search_runs(["toy"], uri=tracking_uri).iloc[0]
    assert row["params.model.writer"] == "every_kth" and row["params.model.every"] == "2"
    assert row["status"] == "FINISHED"

    study = tmp_path / "studies" / "toywriter.yaml"
    study.parent.mkdir()
    study.write_text(textwrap.dedent("""\
        id: toywriter
        title: "A toy writer from a test file"
        question: "Does a writer registered from a test file sweep and report like a built-in one?"
        artifact: none
        mode: tuned
        default_profile: smoke
        task: {name: copy, seq_len: 4, test_size: 4}
        fixed:
          model: {memory_size: 2, hidden_size: 6, word_size: 4, every: 2, cache_size: 2}
          train: {steps: 2, batch_size: 4, eval_every: 2, eval_batches: 1}
        cells:
          - model: dnc
            label: "DNC ({model.writer})"
            grid:
              model.writer: [regular, every_kth]
        search:
          train.lr: {type: float, low: 1.0e-3, high: 1.0e-2, log: true}
        objective: {metric: eval_accuracy, direction: maximize}
        seeds: [0]
        final_seeds: [1]
        budget: {n_trials: 1}
        pruning: {type: none}
        profiles:
          cpu: {}
          smoke: {}
        """))
    from uwbench import spec

    plan = spec.load_plan(str(study), "smoke")
    configs = {c.id: c.config["model"] for c in plan.cells}
    assert configs["dnc-every_kth"]["every"] == 2 and "every" not in configs["dnc-regular"]  # shared: where it applies
    assert "cache_size" not in configs["dnc-every_kth"]
    assert main(["sweep", str(study), "--backend", "optuna", "--workers", "0", "--tracking-uri", tracking_uri,
                 "--no-progress"]) == 0
    out = tmp_path / "reports"
    assert main(["report", str(study), "--tracking-uri", tracking_uri, "--out", str(out),
                 "--studies-dir", str(study.parent), "--no-traces"]) == 0
    assert "toywriter: 2/2 cells run" in capsys.readouterr().out
    runs_csv = (out / "toywriter" / "runs.csv").read_text()
    assert "dnc-every_kth" in runs_csv and ",every_kth," in runs_csv
    assert "DNC+every_kth" in (out / "toywriter" / "accuracy.md").read_text()  # a row of its own


def test_the_battery_catches_a_parameter_without_a_gradient(data_dir, tracking_uri):
    """A model with a parameter its forward never uses fails the battery (registered after collection, so
    the parametrised tests above never see it)."""
    from uwbench.models.lstm import LSTMBaseline, LSTMBaselineConfig

    class Unused(LSTMBaseline):
        def __init__(self, cfg, input_size, output_size):
            super().__init__(cfg, input_size, output_size)
            self.unused = torch.nn.Parameter(torch.zeros(3))

    if "test_unused_param" not in MODELS:
        MODELS.register("test_unused_param", config=LSTMBaselineConfig)(
            lambda cfg, input_size, output_size, task=None: Unused(cfg, input_size, output_size))
    config = {"task": task_section(BATTERY_TASK, data_dir), "model": model_section("test_unused_param"),
              "train": TINY_TRAIN}
    with pytest.raises(AssertionError, match="parameters without a gradient"):
        battery(config, tracking_uri)
