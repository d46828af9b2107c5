"""Provenance (commit, dirty flag and diff, versions, machine, packages) and system metrics on real MLflow
runs."""
import subprocess

import pytest

from uwbench.tracking import provenance

TINY = {"task": {"name": "copy", "seq_len": 4, "test_size": 32},
        "model": {"name": "lstm", "hidden_size": 16},
        "train": {"steps": 20, "batch_size": 8, "eval_every": 10, "eval_batches": 1}}


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo, check=True,
                   capture_output=True)


@pytest.fixture
def dirty_repo(tmp_path):
    repo = tmp_path / "code"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "model.py").write_text("WIDTH = 1\n")
    _git(repo, "add", "model.py")
    _git(repo, "commit", "-q", "-m", "first")
    (repo / "model.py").write_text("WIDTH = 2\n")  # an uncommitted change
    (repo / "notes.txt").write_text("scratch\n")  # an untracked file
    return repo


def test_a_dirty_work_tree_is_flagged_and_its_diff_is_an_artifact(dirty_repo, tracking_uri):
    import mlflow
    from mlflow.tracking import MlflowClient

    from uwbench.tracking.mlflow import Run

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=dirty_repo, capture_output=True, text=True).stdout.strip()
    run = Run("prov", uri=tracking_uri)
    run.log_provenance(repo_dir=str(dirty_repo))
    run.end()
    mlflow.set_tracking_uri(tracking_uri)
    df = mlflow.search_runs(experiment_names=["prov"], filter_string="tags.git_dirty = 'true'")  # filterable
    assert list(df["run_id"]) == [run.run_id]
    row = df.iloc[0]
    assert row["tags.git_commit"] == head and len(head) == 40
    assert row["tags.git_changed_files"] == "1" and row["tags.git_untracked_files"] == "1"
    for tag in ("python_version", "torch_version", "cuda_version", "cudnn_version", "cpu_model", "cpu_count",
                "hostname", "platform", "package_count"):
        assert row[f"tags.{tag}"], tag
    assert int(row["tags.cpu_count"]) >= 1
    c = MlflowClient(tracking_uri)
    diff = open(c.download_artifacts(run.run_id, "provenance/git_diff.patch")).read()
    assert "-WIDTH = 1" in diff and "+WIDTH = 2" in diff
    assert open(c.download_artifacts(run.run_id, "provenance/git_untracked.txt")).read() == "notes.txt\n"
    packages = open(c.download_artifacts(run.run_id, "provenance/packages.txt")).read().splitlines()
    names = {line.split("==")[0].lower() for line in packages}
    assert {"torch", "mlflow", "optuna"} <= names and len(packages) == int(row["tags.package_count"])


def test_a_clean_work_tree_has_no_diff_and_outside_git_the_commit_is_none(dirty_repo, tmp_path):
    _git(dirty_repo, "add", "-A")
    _git(dirty_repo, "commit", "-q", "-m", "second")
    clean = provenance.collect(str(dirty_repo))
    assert clean.tags["git_dirty"] == "false" and "git_diff.patch" not in clean.files
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert provenance.collect(str(outside)).tags["git_commit"] == provenance.NONE


def test_a_training_run_records_provenance_and_system_metrics(tracking_uri, monkeypatch):
    from mlflow.tracking import MlflowClient

    from uwbench.tracking.mlflow import Run
    from uwbench.training.loop import train

    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.2")
    run = Run("sysmetrics", uri=tracking_uri)
    result = train(TINY, run=run, progress=False)
    assert result.status == "finished"
    c = MlflowClient(tracking_uri)
    data = c.get_run(run.run_id).data
    assert data.tags["git_commit"] and data.tags["hostname"] and data.tags["python_version"]
    cpu = c.get_metric_history(run.run_id, "system/cpu_utilization_percentage")
    memory = c.get_metric_history(run.run_id, "system/system_memory_usage_megabytes")
    assert cpu and memory and all(m.value > 0 for m in memory)
    assert sorted(m.step for m in memory) == list(range(len(memory)))  # its own steps, each once
    assert "packages.txt" in {a.path.split("/")[-1] for a in c.list_artifacts(run.run_id, "provenance")}


def test_system_metrics_switch_off_by_argument_and_by_environment(tracking_uri, monkeypatch):
    from mlflow.tracking import MlflowClient

    from uwbench import env
    from uwbench.tracking.mlflow import Run
    from uwbench.training.loop import train

    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.2")
    c = MlflowClient(tracking_uri)
    by_argument = Run("sys-off", uri=tracking_uri)
    train(TINY, run=by_argument, progress=False, system_metrics=False)
    monkeypatch.setenv(env.SYSTEM_METRICS_ENV, "0")
    by_environment = Run("sys-off", uri=tracking_uri)
    train(TINY, run=by_environment, progress=False)
    for run in (by_argument, by_environment):
        assert not [k for k in c.get_run(run.run_id).data.metrics if k.startswith("system/")]
    monkeypatch.setenv(env.SYSTEM_METRICS_ENV, "maybe")
    with pytest.raises(ValueError, match="UWBENCH_SYSTEM_METRICS must be one of"):
        env.system_metrics()
