import pytest

from uwbench.config import ConfigError, build, flatten, merge, parse_assignments
from uwbench.registry import MODELS, TASKS, Registry, UnknownNameError
from uwbench.tasks.synthetic import SyntheticConfig
from uwbench.training.config import resolve_run


def test_unknown_name_suggests_the_close_one():
    with pytest.raises(UnknownNameError) as info:
        TASKS.entry("cpy")
    message = str(info.value)
    assert "Did you mean 'copy'" in message
    assert "reverse" in message  # the known names are listed


def test_registering_a_name_twice_is_an_error():
    r = Registry("thing")
    r.register("a")(lambda: 1)
    with pytest.raises(ValueError, match="registered twice"):
        r.register("a")(lambda: 2)


def test_build_rejects_unknown_keys_with_a_suggestion():
    with pytest.raises(ConfigError) as info:
        build(SyntheticConfig, {"seq_lenn": 5}, "task (copy)")
    assert "Did you mean 'seq_len'" in str(info.value)
    assert "task (copy)" in str(info.value)


def test_build_converts_cli_strings_and_checks_types():
    cfg = build(SyntheticConfig, {"seq_len": "12", "seq_len_min": "none"}, "task")
    assert cfg.seq_len == 12 and cfg.seq_len_min is None
    with pytest.raises(ConfigError, match="must be an integer"):
        build(SyntheticConfig, {"seq_len": "twelve"}, "task")


def test_invalid_values_name_the_rule():
    with pytest.raises(ConfigError, match="`seq_len >= 2` must hold, got 1"):
        build(SyntheticConfig, {"seq_len": 1}, "task")
    with pytest.raises(ConfigError, match="`lr > 0` must hold"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "lstm"}, "train": {"lr": 0}})


def test_train_settings_are_checked_by_their_annotations_one_message_per_rule():
    """Each rule of TrainConfig is its field's annotation, checked by pydantic: the message says the rule, the
    value given (converted) and, where the rule has one, its reason; the same when TrainConfig is made directly."""
    from uwbench.training.config import TrainConfig

    cases = [
        ({"steps": "0"}, "train: `steps >= 1` must hold, got 0"),
        ({"checkpoint_every": -1}, "train: `checkpoint_every >= 0` must hold, got -1"),
        ({"lr": "1e300"}, "train: `lr <= 3.403e+38` must hold, got 1e+300; the largest step a float32 parameter"),
        ({"clip": "inf"}, "train: `clip` must be finite, got inf; for no clipping set train.clip_mode=none"),
        ({"device": "tpu"}, "train: `device` must be cpu, cuda, cuda:N or auto, got 'tpu'"),
        ({"steps": True}, "train.steps must be an integer, got True"),  # a bool is not a number
        ({"lr": "nan"}, "train.lr must be a number, got NaN"),
        ({"optimizer": "sgd"}, "train.optimizer must be one of 'adam', 'rmsprop', got 'sgd'"),
        ({"compile": "maybe"}, "train.compile must be one of 'auto', true, false, got 'maybe'"),
    ]
    for values, message in cases:
        with pytest.raises(ConfigError) as info:
            build(TrainConfig, values, "train")
        assert str(info.value).startswith(message), (values, str(info.value))
    cfg = build(TrainConfig, {"threads": "null", "compile": "off", "batch_size": "8.0", "seed": "3"}, "train")
    assert (cfg.threads, cfg.compile, cfg.batch_size, cfg.seed) == (None, False, 8, 3)
    with pytest.raises(ConfigError, match=r"^`eval_every >= 1` must hold, got 0$"):
        TrainConfig(eval_every=0)
    assert TrainConfig(steps="12").steps == 12


def test_resolve_run_fills_every_default_and_flattens():
    run = resolve_run({"task": {"name": "copy", "seq_len": 7}, "model": {"name": "lstm"}})
    flat = flatten(run.as_dict())
    assert flat["task.seq_len"] == 7
    assert flat["model.hidden_size"] == 125  # the model's own default
    assert flat["train.steps"] == 10000 and flat["train.clip"] == 10.0


def test_resolve_run_needs_names_and_rejects_unknown_models():
    with pytest.raises(ConfigError, match="task.name"):
        resolve_run({"model": {"name": "lstm"}})
    with pytest.raises(UnknownNameError, match="unknown model"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "transformer"}})


def test_set_assignments_parse_and_merge():
    layer = parse_assignments(["model.hidden_size=32", "train.lr=0.01"])
    assert layer == {"model": {"hidden_size": "32"}, "train": {"lr": "0.01"}}
    merged = merge({"model": {"name": "lstm", "hidden_size": 8}}, layer)
    assert merged["model"] == {"name": "lstm", "hidden_size": "32"}
    with pytest.raises(ConfigError, match="section"):
        parse_assignments(["hidden_size=3"])
    with pytest.raises(ConfigError, match="section must be one of"):
        parse_assignments(["optim.lr=3"])


def test_lstm_model_is_registered():
    assert "lstm" in MODELS.names()


# ---- a model's writer is a part: its settings sit flat in the model section, checked by that writer ----


def test_writer_settings_keep_their_flat_spelling_and_round_trip():
    from uwbench.config import as_dict
    from uwbench.writing.cached_uniform import CachedUniformConfig

    run = resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc", "writer": "cached_uniform",
                                                             "cache_size": "3"}})  # a --set string
    assert run.model_cfg.writer_config == CachedUniformConfig(cache_size=3)
    flat = flatten(run.as_dict())
    assert flat["model.cache_size"] == 3 and flat["model.attention_size"] == 16 and flat["model.schedule"] == "code"
    assert "model.writer_config" not in flat and "model.write_prob" not in flat  # only the chosen writer's
    again = resolve_run(run.as_dict())  # what MLflow records builds the same config back
    assert again.model_cfg == run.model_cfg and as_dict(again.model_cfg) == as_dict(run.model_cfg)
    regular = resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc"}})
    assert regular.model_cfg.writer_config is None and "model.cache_size" not in flatten(regular.as_dict())


def test_another_writers_setting_names_its_owner():
    with pytest.raises(ConfigError) as info:
        resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc", "writer": "uniform", "cache_size": 5}})
    assert "cache_size is a setting of writer 'cached_uniform', not of writer 'uniform'" in str(info.value)
    with pytest.raises(ConfigError, match="write_prob is a setting of writer 'random'"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "ntm", "write_prob": 0.5}})
    with pytest.raises(ConfigError, match="schedule is a setting of writer 'cached_uniform' / 'uniform'"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc", "schedule": "paper"}})
    with pytest.raises(ConfigError, match=r"model \(dnc\), writer cached_uniform: `cache_size >= 1` must hold"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc", "writer": "cached_uniform", "cache_size": 0}})
    with pytest.raises(ConfigError, match="writer: unknown writer 'unifrom'. Did you mean 'uniform'"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc", "writer": "unifrom"}})
    with pytest.raises(ConfigError, match="unknown key 'cache_sise'.*Did you mean 'cache_size'"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "dnc", "writer": "cached_uniform", "cache_sise": 2}})


def test_section_keys_follow_the_chosen_writer():
    from uwbench.config import section_keys
    from uwbench.models.memory_base import MANNConfig

    assert {"cache_size", "attention_size", "schedule"} <= section_keys(MANNConfig, {"writer": "cached_uniform"})
    assert "cache_size" not in section_keys(MANNConfig, {"writer": "uniform"})
    assert "schedule" not in section_keys(MANNConfig, {})  # the default writer, regular, has no settings
    assert {"cache_size", "write_prob"} <= section_keys(MANNConfig)  # any writer's
    assert "writer_config" not in section_keys(MANNConfig)


def test_train_flag_cache_size_still_works_for_cached_uniform(tracking_uri, capsys):
    from uwbench.cli import main

    base = ["train", "--task", "copy", "--model", "dnc", "--seq-len", "3", "--set", "model.hidden_size=4",
            "--set", "model.word_size=2", "--memory-size", "1", "--steps", "1", "--batch-size", "2",
            "--eval-every", "1", "--set", "task.test_size=2", "--set", "train.eval_batches=1",
            "--tracking-uri", tracking_uri, "--no-progress"]
    assert main(base + ["--writer", "cached_uniform", "--cache-size", "2"]) == 0
    assert main(base + ["--cache-size", "2"]) == 2  # the default writer (regular) has no cache
    assert "cache_size is a setting of writer 'cached_uniform'" in capsys.readouterr().err


def test_shared_writer_settings_apply_where_the_writer_has_them_and_hashes_stay():
    """pareto_copy.yaml gives cache_size to every DNC cell (fixed and profile): only the CUW cells take it,
    and the plan's hash still counts it everywhere; the committed quickstart report's runs stay current."""
    import csv
    import os

    from uwbench import spec

    from tests.helpers import ROOT as root
    shared = spec.load_plan(os.path.join(root, "studies", "pareto_copy.yaml"), "cpu")
    models = {c.id: c.config["model"] for c in shared.cells}
    assert models["dnc-cached_uniform-D2"]["cache_size"] == 2
    assert "cache_size" not in models["dnc-regular-D2"] and "cache_size" not in models["dnc-uniform-D2"]
    assert shared.cell("dnc-regular-D2").inert == {"model": {"cache_size": 2}}
    changed = spec.load(os.path.join(root, "studies", "pareto_copy.yaml"))
    changed.profiles["cpu"].model["cache_size"] = 3  # a shared setting no regular cell takes still counts
    assert spec.expand(changed, "cpu").spec_hash != shared.spec_hash
    plan = spec.load_plan(os.path.join(root, "studies", "quickstart.yaml"), "cpu")
    with open(os.path.join(root, "reports", "quickstart", "runs.csv"), newline="") as f:
        assert {row["spec_hash"] for row in csv.DictReader(f)} == {plan.spec_hash}


def test_one_list_of_config_sections():
    """`config.SECTIONS` is the list of run-config sections; the study schema, the resolved run and the
    axes' paths follow it."""
    from uwbench import axes, config
    from uwbench.spec import Sections
    from uwbench.training.config import resolve_run

    assert tuple(Sections.model_fields) == config.SECTIONS
    resolved = resolve_run({"task": {"name": "copy"}, "model": {"name": "lstm"}})
    assert tuple(resolved.as_dict()) == config.SECTIONS
    with pytest.raises(ConfigError, match="allowed: task, model, train"):
        resolve_run({"task": {"name": "copy"}, "model": {"name": "lstm"}, "trian": {}})
    with pytest.raises(ValueError, match="section one of task, model, train"):
        axes.Axis("bad_axis", "optim.lr", float)
    assert all(config.KEY_PATTERN.match(path) for path in axes.param_paths().values())


def test_task_and_writer_configs_check_the_bounds_in_their_annotations():
    """SyntheticConfig's and RandomConfig's rules are their fields' annotations, checked by pydantic on a
    config built from settings and on one made directly, with the one message form."""
    from uwbench.writing.random import RandomConfig

    with pytest.raises(ConfigError, match="`write_prob <= 1` must hold, got 2.0"):
        RandomConfig(write_prob=2)
    with pytest.raises(ConfigError, match="`write_prob > 0` must hold, got 0.0"):
        build(RandomConfig, {"write_prob": "0"}, "model")
    with pytest.raises(ConfigError, match="task: `vocab_size >= 3` must hold, got 2"):
        build(SyntheticConfig, {"vocab_size": "2"}, "task")
    with pytest.raises(ConfigError, match="`2 <= seq_len_min <= seq_len` must hold"):
        SyntheticConfig(seq_len=5, seq_len_min=9)
    assert RandomConfig(write_prob="0.5").write_prob == 0.5 and RandomConfig().write_prob is None
    assert SyntheticConfig(test_size="3").test_size == 3
