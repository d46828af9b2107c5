"""A fresh local MLflow store is a copy of an empty one migrated once per user and MLflow version
(``uwbench.tracking.mlflow._empty_store_template``): the same schema as MLflow's own migrations, a Default
experiment of its own, and no migration on the second store."""
from __future__ import annotations

import os
import sqlite3

import pytest


def _schema(path) -> list:
    """Every table, index and constraint of a store, each statement's lines sorted: MLflow's own migrations
    order a table's constraints differently from one process to the next (its sets follow the hash seed)."""
    with sqlite3.connect(path) as db:
        return sorted(sorted(line.strip().rstrip(",") for line in r[0].splitlines())
                      for r in db.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL"))


def _experiments(path) -> list:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT experiment_id, name, artifact_location FROM experiments "
                          "ORDER BY experiment_id").fetchall()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "uwbench" / "mlflow-stores"


def test_a_fresh_store_copied_from_the_template_is_what_mlflow_migrates_itself(tmp_path, cache, monkeypatch):
    import mlflow.store.db.utils as db_utils
    from mlflow import MlflowClient

    from uwbench.tracking import mlflow as tracking

    own = tmp_path / "own" / "mlflow.db"
    own.parent.mkdir()
    monkeypatch.chdir(own.parent)
    MlflowClient(tracking_uri=f"sqlite:///{own}").search_experiments(max_results=1)  # MLflow's own migrations

    first, second = tmp_path / "a" / "mlflow.db", tmp_path / "b" / "mlflow.db"
    for store in (first, second):
        store.parent.mkdir()
        monkeypatch.chdir(store.parent)
        if store == second:  # the template exists now: this store must not be migrated
            monkeypatch.setattr(db_utils, "_initialize_tables",
                                lambda engine: pytest.fail("a second fresh store ran MLflow's migrations"))
        tracking._READY_STORES.discard(f"sqlite:///{store}")
        tracking.resolve_uri(f"sqlite:///{store}")
        assert _schema(store) == _schema(own)
        # MLflow's Default experiment, made when the copy was opened: its artifacts beside this store
        assert _experiments(store) == [(0, "Default", str(store.parent / "mlruns" / "0"))]
    assert [p.name for p in cache.iterdir()] == [f"empty-mlflow-{__import__('mlflow').__version__}.db"]
    assert _experiments(cache / os.listdir(cache)[0]) == []

    exp = tracking.ensure_experiment("study", f"sqlite:///{second}")
    assert exp == "1"  # as in a store MLflow made: the first experiment after Default


def test_a_cache_that_cannot_be_written_leaves_mlflow_to_make_the_store(tmp_path, monkeypatch):
    from uwbench.tracking import mlflow as tracking

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would go\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    store = tmp_path / "mlflow.db"
    tracking.resolve_uri(f"sqlite:///{store}")
    assert tracking.ensure_experiment("study", f"sqlite:///{store}") == "1"
    assert blocked.read_text() == "a file where the cache folder would go\n"


def test_an_existing_store_is_never_replaced_by_the_template(tmp_path, cache):
    from uwbench.tracking import mlflow as tracking

    store = tmp_path / "mlflow.db"
    uri = f"sqlite:///{store}"
    tracking.resolve_uri(uri)
    tracking.ensure_experiment("kept", uri)
    tracking._READY_STORES.discard(uri)  # as a new process opens it
    tracking.resolve_uri(uri)
    assert [name for _, name, _ in _experiments(store)] == ["Default", "kept"]


def test_a_template_that_cannot_be_made_leaves_mlflow_to_make_the_store_and_nothing_in_the_cache(
        tmp_path, cache, monkeypatch):
    import sqlite3

    from uwbench.tracking import mlflow as tracking

    def full(path):
        raise sqlite3.OperationalError("database or disk is full")  # the cache's disk, not the store's

    monkeypatch.setattr(tracking, "_drop_default_experiment", full)
    store = tmp_path / "mlflow.db"
    tracking.resolve_uri(f"sqlite:///{store}")
    assert tracking.ensure_experiment("study", f"sqlite:///{store}") == "1"
    assert list(cache.iterdir()) == []  # no template, no half-made file left
