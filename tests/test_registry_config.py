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
