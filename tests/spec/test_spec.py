"""Study specs: every studies/*.yaml validates; invalid files give precise errors (file, key path, allowed
values); cells expand with stable ids; profiles overlay; the spec hash is stable; the search grammar
compiles to Optuna distributions."""
from __future__ import annotations

import glob
import os
import textwrap

import pytest

from uwbench import spec
from uwbench.spec import SpecError, check, expand, load, parse

from tests.helpers import ROOT

STUDIES = sorted(glob.glob(os.path.join(ROOT, "studies", "*.yaml")))

BASE = """
id: mini
title: t
question: q
artifact: "Table 0"
mode: faithful
task: {name: copy, seq_len: 6}
fixed:
  model: {memory_size: 2}
  train: {steps: 4}
cells:
  - {model: lstm, name: lstm, label: LSTM, set: {model: {hidden_size: 8}}, grid: {task.seq_len: [6, 8]}}
  - {model: dnc, label: "DNC+{model.writer}", set: {model: {hidden_size: 8}},
     grid: {model.writer: [regular, uniform], task.name: [copy, reverse]}}
seeds: [0, 1]
profiles:
  cpu: {train: {steps: 8}}
  smoke: {cells: ["lstm-*"], seeds: [0], model: {hidden_size: 4}}
"""


def write(tmp_path, text: str, name: str = "mini.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


def error_of(tmp_path, text: str, name: str = "mini.yaml") -> str:
    path = write(tmp_path, text, name)
    result = check(path)
    assert result.status == "error", result.message
    assert result.message.startswith(path)  # every message names the file
    return result.message


@pytest.mark.parametrize("path", STUDIES, ids=[os.path.basename(p) for p in STUDIES])
def test_every_study_validates(path):
    result = check(path)
    assert result.status in ("ok", "waits"), result.message
    plan = result.plan
    assert plan.cells and plan.n_runs() > 0
    for profile in ("paper", "cpu", "smoke"):
        assert expand(load(path), profile, path).n_runs() > 0


def test_the_paper_artifacts_have_their_study():
    names = {os.path.basename(p) for p in STUDIES}
    for name in ("quickstart.yaml", "ablation_figure.yaml", "table1_memorization.yaml", "table2_reasoning.yaml",
                 "sinusoid_figure.yaml", "table3_pixel_mnist.yaml", "table4_documents.yaml",
                 "appendix_bigger_memory.yaml"):
        assert name in names


def test_paper_values_match_the_tables():
    t1 = expand(load(os.path.join(ROOT, "studies", "table1_memorization.yaml")), "paper")
    values = {c.id: c.paper for c in t1.cells}
    assert values["dnc_uw-copy-T50"] == 97.7 and values["lstm-reverse-T100"] == 26.1
    assert values["dnc_cuw-reverse-T100"] == 55.4 and values["ntm-copy-T100"] == 11.8
    t2 = expand(load(os.path.join(ROOT, "studies", "table2_reasoning.yaml")), "paper")
    assert {c.id: c.paper for c in t2.cells}["dnc_cuw-add-T50"] == 94.4
    assert all(c.paper is not None for c in t1.cells + t2.cells)


def test_cells_expand_with_stable_ids_labels_and_configs(tmp_path):
    plan = expand(load(write(tmp_path, BASE)), "paper")
    ids = [c.id for c in plan.cells]
    assert ids == ["lstm-T6", "lstm-T8", "dnc-regular-copy", "dnc-regular-reverse", "dnc-uniform-copy",
                   "dnc-uniform-reverse"]
    cell = plan.cell("dnc-uniform-reverse")
    assert cell.label == "DNC+uniform" and cell.axes == {"model.writer": "uniform", "task.name": "reverse"}
    assert cell.config == {"task": {"name": "reverse", "seq_len": 6},
                           "model": {"name": "dnc", "hidden_size": 8, "writer": "uniform", "memory_size": 2},
                           "train": {"steps": 4}}
    # `fixed` applies where the component has the key: the LSTM has no memory
    assert "memory_size" not in plan.cell("lstm-T6").config["model"]
    assert plan.n_runs() == 6 * 2  # faithful, no search: one run per seed


def test_profiles_overlay_select_and_keep_grid_values(tmp_path):
    smoke = expand(load(write(tmp_path, BASE)), "smoke")
    assert [c.id for c in smoke.cells] == ["lstm-T6", "lstm-T8"] and smoke.seeds == [0]
    assert smoke.cell("lstm-T8").config["model"]["hidden_size"] == 4  # a profile beats the group's set
    text = edit(BASE, 'smoke: {cells: ["lstm-*"], seeds: [0], model: {hidden_size: 4}}',
                "smoke: {task: {seq_len: 5}, grid: {model.writer: [uniform]}}")
    smoke = expand(load(write(tmp_path, text)), "smoke")
    # the values that name a cell are kept (T6/T8); a profile changes them through `grid`
    assert smoke.cell("lstm-T8").config["task"]["seq_len"] == 8
    assert smoke.cell("dnc-uniform-copy").config["task"]["seq_len"] == 5
    assert not any("regular" in c.id for c in smoke.cells)


def test_a_profile_names_the_paper_cells_its_renamed_cells_stand_for(tmp_path):
    paper = "paper: {source: T, metric: test_accuracy, unit: percent, values: {lstm-T6: 40.0, lstm-T8: 30.0}}\n"
    text = edit(BASE + paper, "  cpu: {train: {steps: 8}}",
                "  cpu: {train: {steps: 8}, grid: {task.seq_len: [4, 5]}, paper_cells: {lstm-T4: lstm-T6}}")
    cpu = expand(load(write(tmp_path, text)), "cpu")
    assert cpu.cell("lstm-T4").paper == 40.0  # stands beside the paper's T6 value
    assert cpu.cell("lstm-T5").paper is None  # no mapping: no paper value, never a guess
    assert (cpu.cell("lstm-T4").paper_cell, cpu.cell("lstm-T5").paper_cell) == ("lstm-T6", None)
    import pandas as pd

    from uwbench.report.data import study as report_study

    view = report_study.from_spec(load(write(tmp_path, text)), "mini.yaml", pd.DataFrame({"spec_hash": [cpu.spec_hash]}))
    assert view.profiles == ["cpu"] and view.stand_ins().endswith("stands for: lstm-T4 → lstm-T6")  # the report says so
    assert cpu.spec_hash == expand(load(write(tmp_path, edit(text, "paper_cells: {lstm-T4: lstm-T6}",
                                                            "paper_cells: {}"))), "cpu").spec_hash
    msg = error_of(tmp_path, edit(text, "{lstm-T4: lstm-T6}", "{lstm-T7: lstm-T6}"))
    assert "profiles.cpu.paper_cells.lstm-T7: no such cell in this profile" in msg
    msg = error_of(tmp_path, edit(text, "{lstm-T4: lstm-T6}", "{lstm-T4: lstm-T9}"))
    assert "profiles.cpu.paper_cells.lstm-T4: 'lstm-T9' has no value in paper.values" in msg


def test_spec_hash_is_stable_and_ignores_descriptions(tmp_path):
    a = expand(load(write(tmp_path, BASE)), "paper").spec_hash
    assert a == expand(load(write(tmp_path, BASE)), "paper").spec_hash
    assert a == expand(load(write(tmp_path, edit(BASE, "title: t", "title: another title"))), "paper").spec_hash
    assert a != expand(load(write(tmp_path, edit(BASE, "steps: 4}", "steps: 5}"))), "paper").spec_hash
    assert a != expand(load(write(tmp_path, BASE)), "cpu").spec_hash


def test_unknown_top_level_key_names_the_allowed_keys(tmp_path):
    msg = error_of(tmp_path, BASE + "budjet: {n_trials: 3}\n")
    assert "(top level): unknown key 'budjet' (did you mean 'budget'?); allowed keys:" in msg
    assert "final_seeds" in msg and "search" in msg


def test_bad_search_type_lists_the_allowed_types(tmp_path):
    msg = error_of(tmp_path, BASE + "search: {train.lr: {type: floaty, low: 1, high: 2}}\n")
    assert "search.train.lr" in msg and "'float', 'int', 'choice'" in msg


def test_bad_mode_lists_the_allowed_modes(tmp_path):
    msg = error_of(tmp_path, edit(BASE, "mode: faithful", "mode: exhaustive"))
    assert "mode: Input should be 'faithful' or 'tuned'" in msg


def test_faithful_search_must_be_a_grid_of_choices(tmp_path):
    msg = error_of(tmp_path, BASE + "search: {train.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}}\n")
    assert "search.train.lr: mode: faithful runs the paper's grid" in msg and "type: float" in msg


def test_tuned_needs_budget_and_fresh_final_seeds(tmp_path):
    tuned = edit(BASE, "mode: faithful", "mode: tuned") + \
        "search: {train.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}}\n"
    assert "needs `budget: {n_trials: N}`" in error_of(tmp_path, tuned)
    msg = error_of(tmp_path, tuned + "budget: {n_trials: 2}\nfinal_seeds: [1, 2]\n")
    assert "final_seeds [1, 2] must be fresh: they overlap the search seeds [0, 1]" in msg


def test_unknown_model_key_is_precise(tmp_path):
    msg = error_of(tmp_path, edit(BASE, 'label: "DNC+{model.writer}", set: {model: {hidden_size: 8}}',
                                  'label: "DNC+{model.writer}", set: {model: {hidden_size: 8, memroy_size: 3}}'))
    assert "cell dnc-regular-copy" in msg and "unknown key 'memroy_size' in model (dnc)" in msg
    assert "Did you mean 'memory_size'?" in msg


def test_unknown_writer_name_is_precise(tmp_path):
    msg = error_of(tmp_path, edit(BASE, "[regular, uniform]", "[regular, unifrom]"))
    assert "model.writer: unknown writer 'unifrom'. Did you mean 'uniform'?" in msg


def test_bad_value_is_precise(tmp_path):
    msg = error_of(tmp_path, edit(BASE, "train: {steps: 4}", "train: {steps: 0}"))
    assert "`steps >= 1` must hold, got 0" in msg


def test_fixed_key_that_no_cell_has(tmp_path):
    msg = error_of(tmp_path, edit(BASE, "model: {memory_size: 2}", "model: {memory_sise: 2}"))
    assert "fixed.model.memory_sise: no cell's model has the key 'memory_sise' (did you mean 'memory_size'?)" in msg


def test_search_key_missing_for_a_cell(tmp_path):
    msg = error_of(tmp_path, BASE + "search: {model.cache_size: {type: choice, values: [2, 3]}}\n")
    assert "search.model.cache_size: model 'lstm' of cell lstm-T6 has no key 'cache_size'" in msg


def test_paper_value_for_an_unknown_cell(tmp_path):
    text = BASE + "paper: {source: T, metric: test_accuracy, unit: percent, values: {dnc-uniform-cpy: 1.0}}\n"
    msg = error_of(tmp_path, text)
    assert "paper.values.dnc-uniform-cpy: no such cell (did you mean 'dnc-uniform-copy'?)" in msg


def test_smoke_profile_is_required(tmp_path):
    msg = error_of(tmp_path, edit(BASE, '  smoke: {cells: ["lstm-*"], seeds: [0], model: {hidden_size: 4}}\n', ""))
    assert "profiles.smoke is required" in msg


def test_profile_pattern_that_matches_nothing(tmp_path):
    msg = error_of(tmp_path, edit(BASE, '["lstm-*"]', '["gru-*"]'))
    assert "profiles.smoke.cells: pattern 'gru-*' matches no cell" in msg


def test_file_is_named_by_its_id(tmp_path):
    msg = error_of(tmp_path, BASE, name="other.yaml")
    assert "id: a study file is named by its id, so id must be 'other', got 'mini'" in msg


def test_duplicate_cell_ids(tmp_path):
    text = edit(BASE, "  - {model: dnc, label:", "  - {model: lstm, name: lstm, grid: {task.seq_len: [6]}}\n"
                                                 "  - {model: dnc, label:")
    assert "cell id 'lstm-T6' is produced twice" in error_of(tmp_path, text)


def test_label_placeholder_with_a_typo_names_it_and_the_valid_keys(tmp_path):
    msg = error_of(tmp_path, edit(BASE, 'label: "DNC+{model.writer}"', 'label: "DNC+{model.wrtier}"'))
    assert "cells[1].label: placeholder {model.wrtier} is not a model setting (did you mean {model.writer}?)" in msg
    assert "valid: model.attention_size, " in msg and "model.memory_size" in msg
    msg = error_of(tmp_path, edit(BASE, 'label: "DNC+{model.writer}"', 'label: "DNC+{modle.writer}"'))
    assert "placeholder {modle...}" in msg and "section one of task, model, train" in msg


def test_label_placeholders_show_defaults_and_every_section(tmp_path):
    text = edit(BASE, 'label: "DNC+{model.writer}"', 'label: "DNC+{model.writer} D={model.memory_size} '
                                                       'W={model.word_size} {task.name} lr={train.lr}"')
    plan = expand(load(write(tmp_path, text)), "paper")
    word_size = plan.cell("dnc-uniform-reverse").label.split("W=")[1].split()[0]
    assert plan.cell("dnc-uniform-reverse").label == f"DNC+uniform D=2 W={word_size} reverse lr=0.001"
    assert word_size.isdigit()  # the model's default, not ""


def test_the_package_keeps_its_names():
    import uwbench.spec as pkg

    for name in ("Cell", "Plan", "StudySpec", "SpecError", "load", "parse", "expand", "load_plan", "check",
                 "read_yaml", "plan_hash", "import_plugins", "BASE_PROFILE", "PLUGINS_ENV", "ChoiceParam"):
        assert hasattr(pkg, name), name


def test_unregistered_task_waits_instead_of_failing(tmp_path):
    result = check(write(tmp_path, edit(BASE, "task: {name: copy, seq_len: 6}", "task: {name: enwik8, seq_len: 6}")))
    assert result.status == "waits" and "waits for task enwik8 (not registered yet)" in result.message


def test_linked_axis_sets_several_keys(tmp_path):
    text = edit(BASE, "grid: {model.writer: [regular, uniform], task.name: [copy, reverse]}",
                "grid: {model.writer: [uniform], data: [{id: short, task.seq_len: 5, model.memory_size: 1},"
                " {id: long, task.seq_len: 9, model.memory_size: 3}]}")
    plan = expand(load(write(tmp_path, text)), "paper")
    cell = plan.cell("dnc-uniform-long")
    assert cell.config["task"]["seq_len"] == 9 and cell.config["model"]["memory_size"] == 3


def test_yaml_exponents_are_numbers(tmp_path):
    data = spec.read_yaml(write(tmp_path, "a: 1e-4\nb: 1.0e-3\nc: 5\n", "x.yaml"))
    assert data == {"a": 1e-4, "b": 1e-3, "c": 5}


def test_parse_rejects_non_mappings():
    with pytest.raises(SpecError, match="a study file is a mapping"):
        parse([1, 2], "x.yaml")


def test_search_space_compiles_to_optuna_distributions():
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from uwbench.sweeps import space

    s = parse(spec.read_yaml(os.path.join(ROOT, "studies", "quickstart.yaml"))).search
    dists = space.distributions(s)
    assert dists["train.lr"] == FloatDistribution(1e-3, 1e-2, log=True)
    assert dists["train.clip"] == CategoricalDistribution([1, 5, 10])
    d = space.to_distribution(spec.IntParam(type="int", low=2, high=10, step=2))
    assert d == IntDistribution(2, 10, step=2)
    cfg = space.apply({"train": {"steps": 3}, "model": {"name": "dnc"}},
                      {"train.lr": 0.01, "model.cache_size": 3, "seed": 7})
    assert cfg == {"train": {"steps": 3, "lr": 0.01, "seed": 7}, "model": {"name": "dnc", "cache_size": 3}}
    assert space.grid_space(s | {"train.lr": spec.ChoiceParam(type="choice", values=[0.1])}, [0, 1]) == \
        {"train.lr": [0.1], "train.clip": [1, 5, 10], "seed": [0, 1]}


def test_cell_seeds_give_chosen_cells_their_own_seeds(tmp_path):
    from uwbench.sweeps import planning

    text = edit(BASE, "  cpu: {train: {steps: 8}}", '  cpu: {cell_seeds: {"dnc-uniform-*": [0, 1, 2, 3]}}')
    cpu = expand(load(write(tmp_path, text)), "cpu")
    assert cpu.seeds_of("dnc-uniform-copy") == [0, 1, 2, 3] and cpu.seeds_of("lstm-T6") == [0, 1]
    assert cpu.n_runs() == 4 * 2 + 2 * 4  # four cells on the study's 2 seeds, two on their own 4
    assert [j.seed for j in planning.final_jobs(cpu, "dnc-uniform-reverse", [])] == [0, 1, 2, 3]
    assert [j.seed for j in planning.final_jobs(cpu, "dnc-regular-copy", [])] == [0, 1]
    assert cpu.all_seeds() == [0, 1, 2, 3]
    plain = expand(load(write(tmp_path, edit(text, '{"dnc-uniform-*": [0, 1, 2, 3]}', "{}"))), "cpu")
    assert cpu.spec_hash != plain.spec_hash  # more seeds are more runs: a new sweep
    msg = error_of(tmp_path, edit(text, "dnc-uniform-*", "dnc-uniformm-*"))
    assert "profiles.cpu.cell_seeds.dnc-uniformm-*: matches no cell" in msg
    msg = error_of(tmp_path, edit(text, "[0, 1, 2, 3]", "[0, 1, 1]"))
    assert "repeated seeds" in msg


def test_cell_set_gives_chosen_cells_their_own_settings_and_refuses_what_it_would_drop(tmp_path):
    text = edit(BASE, "  cpu: {train: {steps: 8}}",
                '  cpu: {train: {steps: 8}, cell_set: {"dnc-*-copy": {train: {steps: 16}}}}')
    cpu = expand(load(write(tmp_path, text)), "cpu")
    steps = {c.id: c.config["train"]["steps"] for c in cpu.cells}
    assert steps == {"lstm-T6": 8, "lstm-T8": 8, "dnc-regular-copy": 16, "dnc-regular-reverse": 8,
                     "dnc-uniform-copy": 16, "dnc-uniform-reverse": 8}
    plain = expand(load(write(tmp_path, edit(text, ', cell_set: {"dnc-*-copy": {train: {steps: 16}}}', ""))), "cpu")
    assert cpu.spec_hash != plain.spec_hash  # longer runs are other runs: a new sweep
    assert "matches no cell" in error_of(tmp_path, edit(text, "dnc-*-copy", "dnc-*-copyy"))
    msg = error_of(tmp_path, edit(text, "{train: {steps: 16}}", "{train: {stepz: 16}}"))
    assert "profiles.cpu.cell_set.dnc-*-copy.train.stepz" in msg and "did you mean 'steps'" in msg
    msg = error_of(tmp_path, edit(text, "{train: {steps: 16}}", "{model: {writer: uniform}}"))
    assert "model.writer is a grid axis" in msg
    with pytest.raises(SpecError, match=r"--set train.steps: profiles.cpu.cell_set.dnc-\*-copy sets train.steps"):
        expand(load(write(tmp_path, text)), "cpu", overrides={"train": {"steps": 3}})
    lr = expand(load(write(tmp_path, text)), "cpu", overrides={"train": {"lr": 0.5}})  # other keys: --set applies
    assert {c.config["train"]["lr"] for c in lr.cells} == {0.5}
    tuned = edit(text, "mode: faithful", "mode: tuned") + (
        "search: {train.steps: {type: choice, values: [4, 8]}}\nbudget: {n_trials: 2}\nfinal_seeds: [5]\n")
    assert "cell_set.dnc-*-copy.train.steps: train.steps is searched by this study" in error_of(tmp_path, tuned)
