"""Sweeps that train a cell's trials as populations (the optuna backend, ``--population`` and the study's
``population`` key): a population sweep records the runs a solo sweep records (same cells, seeds, params and,
on the native path, the same test values), each run tagged with its population; two slots refilled until
five runs are done; the quickstart's smoke sweep with the default setting (search trials and final runs,
a population per cell and phase); a sweep killed with SIGKILL mid-population and run again finishes every
trial once, each member's run re-opened and resumed from its checkpoint; and the setting itself (parsing,
precedence, the device's size, the spec hash it leaves alone)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.helpers.processes import stop_process_group
from tests.sweeps.test_sweeps import PLUGIN, QUICKSTART, ROOT, _wait_for, check_layout, runs, study_file, sweep_here

THREE_SEEDS = """
    mode: faithful
    task: {name: copy, seq_len: 4, test_size: 8}
    fixed: {train: {steps: 20, batch_size: 4, eval_every: 10, eval_batches: 1}}
    cells:
      - {model: dnc, name: d, set: {model: {hidden_size: 8, memory_size: 2}}}
    seeds: [0, 1, 2]
"""


def _children(uri: str, experiment: str):
    df = runs(uri, experiment)
    return df[df["tags.role"] != "cell"].sort_values(["tags.cell", "tags.role", "tags.seed", "tags.trial_number"])


def test_a_population_sweep_records_the_runs_a_solo_sweep_records(tracking_uri, tmp_path, capsys):
    path = study_file(tmp_path, "pop", THREE_SEEDS)
    for setting in ("3", "off"):
        sweep_here(capsys, path, "--workers", "0", "--tracking-uri", tracking_uri, "--population", setting,
                   "--experiment", f"pop-{setting}", "--storage", str(tmp_path / f"{setting}.journal"))
    together, alone = _children(tracking_uri, "pop-3"), _children(tracking_uri, "pop-off")
    check_layout(runs(tracking_uri, "pop-3"), "pop", {"d"}, "optuna")
    assert len(together) == len(alone) == 3
    assert list(together["tags.seed"]) == list(alone["tags.seed"]) == ["0", "1", "2"]
    params = sorted(c for c in alone.columns if c.startswith("params."))
    assert params and sorted(c for c in together.columns if c.startswith("params.")) == params
    for col in params:  # the same resolved config, run for run
        assert list(together[col]) == list(alone[col]), col
    # the native path: each member's arithmetic is its solo run's, so the test values are the same
    assert list(together["metrics.test_accuracy"]) == list(alone["metrics.test_accuracy"])
    assert set(together["status"]) == {"FINISHED"} and set(together["tags.status"]) == {"finished"}
    assert set(together["tags.population_size"]) == {"3"} and set(together["tags.population_limit"]) == {"3"}
    assert together["tags.population"].nunique() == 1 and together["tags.population"].iloc[0]
    assert sorted(together["tags.population_member"]) == ["0", "1", "2"]
    assert together["tags.population_seconds_per_100"].notna().all()
    assert not [c for c in alone.columns if c.startswith("tags.population")]  # off: as without populations


def test_the_quickstart_smoke_sweep_trains_each_cells_final_runs_as_one_population(tracking_uri, capsys):
    from uwbench.spec import load_plan
    from uwbench.training.sizes import AUTO_SIZE

    plan = load_plan(QUICKSTART, "smoke")
    out = sweep_here(capsys, QUICKSTART, "--profile", "smoke", "--workers", "0", "--tracking-uri", tracking_uri)
    assert f"{plan.n_runs()} runs planned" in out
    df = runs(tracking_uri, "quickstart")
    _, children = check_layout(df, "quickstart", {c.id for c in plan.cells}, "optuna")
    assert len(children) == plan.n_runs() and set(children["tags.status"]) == {"finished"}
    trials, finals = children[children["tags.role"] == "trial"], children[children["tags.role"] == "final"]
    for cell in plan.cells:  # the search varies lr and clip only: a cell's search trials are one population
        searched = trials[trials["tags.cell"] == cell.id]
        assert len(searched) == plan.budget.n_trials and searched["tags.population"].nunique() == 1
        assert set(searched["tags.population_size"]) == {str(plan.budget.n_trials)}
        mine = finals[finals["tags.cell"] == cell.id]
        assert sorted(mine["tags.seed"].astype(int)) == plan.final_seeds
        assert mine["tags.population"].nunique() == 1  # the cell's final seeds: one population
        assert set(mine["tags.population_size"]) == {str(len(plan.final_seeds))}
        assert set(mine["tags.population_limit"]) == {str(AUTO_SIZE["cpu"])}  # auto, on a CPU
    assert finals["tags.population"].nunique() == len(plan.cells)
    assert not set(finals["tags.population"]) & set(trials["tags.population"])  # a phase per population


FIVE_SEEDS = THREE_SEEDS.replace("seeds: [0, 1, 2]", "seeds: [0, 1, 2, 3, 4]")


def test_a_population_of_two_slots_refills_them_until_the_cells_runs_are_done(tracking_uri, tmp_path, capsys):
    """Five runs through two slots: as a member ends, the next WAITING trial takes its slot, so one
    population trains all five (members 0-4 in the order they joined, size 2), each its solo run."""
    path = study_file(tmp_path, "slots", FIVE_SEEDS)
    for setting in ("2", "off"):
        sweep_here(capsys, path, "--workers", "0", "--tracking-uri", tracking_uri, "--population", setting,
                   "--experiment", f"slots-{setting}", "--storage", str(tmp_path / f"{setting}.journal"))
    together, alone = _children(tracking_uri, "slots-2"), _children(tracking_uri, "slots-off")
    assert len(together) == len(alone) == 5
    assert list(together["tags.seed"]) == list(alone["tags.seed"]) == ["0", "1", "2", "3", "4"]
    assert list(together["metrics.test_accuracy"]) == list(alone["metrics.test_accuracy"])
    assert together["tags.population"].nunique() == 1
    assert set(together["tags.population_size"]) == {"2"}
    assert sorted(together["tags.population_member"].astype(int)) == [0, 1, 2, 3, 4]
    assert set(together["tags.status"]) == {"finished"}


def _checkpointed_population(journal: str, checkpoints: str, n: int):
    """The pids of the workers running ``n`` trials whose runs have each written a mid-run checkpoint, or None."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from optuna.trial import TrialState

    if not os.path.exists(journal):
        return None
    storage = JournalStorage(JournalFileBackend(journal))
    ready = []
    for s in storage.get_all_studies():
        for t in storage.get_all_trials(s._study_id, deepcopy=False, states=(TrialState.RUNNING,)):
            run_id = t.user_attrs.get("mlflow_run_id")
            if run_id and os.path.exists(os.path.join(checkpoints, run_id, "state.pt")):
                ready.append(t.user_attrs["worker"])
    return ready if len(ready) >= n else None


@pytest.fixture
def sleepy_env(sweep_env, tmp_path):
    env, uri = sweep_env
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "uwb_test_plugin.py").write_text(PLUGIN)
    return dict(env, UWBENCH_PLUGINS="uwb_test_plugin",
                PYTHONPATH=os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))), uri


@pytest.mark.slow  # minutes on 2 cores: `make test-slow`
def test_a_sweep_killed_mid_population_then_run_again_finishes_every_trial_once(sleepy_env, tmp_path):
    from mlflow.tracking import MlflowClient

    env, uri = sleepy_env
    path = study_file(tmp_path, "killpop", """
        mode: faithful
        task: {name: copy, seq_len: 4, test_size: 8}
        fixed: {train: {steps: 60, batch_size: 4, eval_every: 5, eval_batches: 1}}
        cells:
          - {model: test_sleepy, name: sleepy, set: {model: {hidden_size: 8, sleep_s: 0.05}}}
        seeds: [0, 1, 2]
        population: off
    """)
    cmd = [sys.executable, "-m", "uwbench", "sweep", path, "--workers", "1", "--no-progress", "--tracking-uri", uri,
           "--population", "3"]  # the command line over the study's `population: off`
    journal = os.path.join(env["UWBENCH_RUNS_DIR"], "optuna", "killpop.journal")
    checkpoints = os.path.join(env["UWBENCH_RUNS_DIR"], "checkpoints")
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        workers = _wait_for(lambda: _checkpointed_population(journal, checkpoints, 3), timeout=180,
                            what="three members with checkpoints")
        assert len(set(workers)) == 1  # one worker trains all three
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its worker, mid-population, as a power cut would
        proc.communicate(timeout=30)
    finally:
        stop_process_group(proc.pid, grace_s=1, leader=proc)
    first = _children(uri, "killpop")
    assert len(first) == 3 and set(first["status"]) == {"RUNNING"}
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)  # the same command
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "3 interrupted run(s) recovered" in done.stdout
    children = _children(uri, "killpop")
    assert len(children) == 3 and sorted(children["tags.seed"].astype(int)) == [0, 1, 2]  # none lost or repeated
    assert set(children["status"]) == {"FINISHED"} and set(children["tags.status"]) == {"finished"}
    assert set(children["run_id"]) == set(first["run_id"])  # each member's run re-opened, not started again
    assert len(runs(uri, "killpop", deleted=True)) == 0
    assert set(children["tags.resumes"]) == {"1"}  # and resumed from its checkpoint
    assert set(children["tags.population_size"]) == {"3"} and children["tags.population"].nunique() == 1
    assert children["tags.population"].iloc[0] != first["tags.population"].iloc[0]  # trained again as one
    client = MlflowClient(uri)
    for run_id in children["run_id"]:  # every evaluation logged once: no update lost or repeated
        assert [m.step for m in client.get_metric_history(run_id, "train_loss")] == list(range(5, 61, 5))


# ---- the setting ----


def test_the_population_key_of_a_study_and_its_profiles_leaves_the_spec_hash_alone(tmp_path):
    from uwbench.spec import load_plan

    with open(QUICKSTART) as fh:
        text = fh.read()
    folder = tmp_path / "with_key"
    folder.mkdir()
    assert "\nprofiles:\n" in text and "\n  smoke:\n" in text
    keyed = text.replace("\nprofiles:\n", "\npopulation: 4\nprofiles:\n", 1).replace(
        "\n  smoke:\n", "\n  smoke:\n    population: off\n", 1)
    (folder / "quickstart.yaml").write_text(keyed)
    for profile in ("paper", "cpu", "smoke"):
        plain, with_key = load_plan(QUICKSTART, profile), load_plan(str(folder / "quickstart.yaml"), profile)
        assert with_key.spec_hash == plain.spec_hash and with_key.n_runs() == plain.n_runs()
        assert plain.population is None
        assert with_key.population == ("off" if profile == "smoke" else 4)  # YAML's bare `off` is read as off


@pytest.mark.parametrize("value", ["0", "-2", "true", "many", "2.5"])
def test_a_bad_population_in_a_study_file_is_a_clear_error(value, tmp_path):
    from uwbench.spec import SpecError, load_plan

    path = study_file(tmp_path, "badpop", textwrap.dedent(THREE_SEEDS) + f"population: {value}\n")
    with pytest.raises(SpecError, match="`population` must be auto, off or a number of members >= 1"):
        load_plan(path)


def test_the_setting_comes_from_the_command_line_then_the_study_then_auto():
    from types import SimpleNamespace

    from uwbench.sweeps.common import SweepError
    from uwbench.sweeps.planning import Options, parse_population, population_limit, population_setting
    from uwbench.training.sizes import AUTO_SIZE

    assert [parse_population(v) for v in (None, "auto", "off", "5")] == [None, "auto", "off", 5]
    for bad in ("0", "x", "-1"):
        with pytest.raises(SweepError, match="`--population` must be auto, off or a number of members >= 1"):
            parse_population(bad)
    study = SimpleNamespace(population=4)
    assert population_setting(study, Options(population="off")) == "off"
    assert population_setting(study, Options()) == 4
    assert population_setting(SimpleNamespace(population=None), Options()) == "auto"
    assert population_limit("off", "cuda") == 1 and population_limit(3, "cpu") == 3
    assert population_limit("auto", "cpu") == AUTO_SIZE["cpu"] == 8
    assert population_limit("auto", "cuda") == AUTO_SIZE["cuda"] == 256


def test_a_bad_population_on_the_command_line_is_refused_before_anything_runs(tracking_uri, tmp_path, capsys):
    from uwbench.cli import main

    path = study_file(tmp_path, "pop", THREE_SEEDS)
    assert main(["sweep", path, "--tracking-uri", tracking_uri, "--population", "0", "--no-progress"]) != 0
    assert "`--population` must be auto, off or a number of members >= 1, got '0'" in capsys.readouterr().err
    assert not os.path.exists(os.path.join(os.environ["UWBENCH_RUNS_DIR"], "optuna"))
