"""Mid-run checkpoints: atomic writes, refusal of another config, pruning, and real processes killed with
SIGKILL at random updates that resume to exactly the uninterrupted run's result."""
import json
import os
import random
import signal
import subprocess
import sys

import pytest
import torch

from uwbench.training.checkpoint import (BEST_FILE, Checkpoint, CheckpointError, atomic_save,
                                         capture_rng, restore_rng, status)
from uwbench.training.loop import train

from tests.helpers import ROOT as REPO

# copy with a DNC and the random writer (its mask comes from the run's seeded RNG): small enough for a few
# hundred updates in seconds
KILL_CFG = {"task": {"name": "copy", "seq_len": 5, "test_size": 64},
            "model": {"name": "dnc", "hidden_size": 32, "memory_size": 4, "word_size": 8, "writer": "random"},
            "train": {"steps": 120, "batch_size": 16, "lr": 1e-2, "eval_every": 20, "eval_batches": 1, "seed": 3}}

# A training process that SIGKILLs itself when its model starts the forward pass of its KILL_AT-th
# training update (counted from its own start; 0: never), i.e. in the middle of an update.
CHILD = r"""
import json, os, signal, sys
import torch
from uwbench.tracking.mlflow import Run
from uwbench.training.loop import train

config, uri, run_id, kill_at, ckpt_dir = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
calls = 0

def kill_hook(module, args):
    global calls
    if module.training and type(module).__name__ == "MANN":
        calls += 1
        if calls == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

torch.nn.modules.module.register_module_forward_pre_hook(kill_hook)
run = Run("kills", uri=uri, run_id=None if run_id == "-" else run_id)
print("RUN_ID", run.run_id, flush=True)
result = train(config, run=run, progress=False, checkpoint_dir=ckpt_dir)
print("RESULT", json.dumps({"test": result.test, "resumes": result.resumes}), flush=True)
"""


def _env(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               UWBENCH_RUNS_DIR=str(tmp_path / "mlruns"), MLFLOW_DISABLE_TELEMETRY="true")
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def _child(tmp_path, config, uri, run_id, kill_at, ckpt_dir):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.run([sys.executable, str(script), json.dumps(config), uri, run_id or "-", str(kill_at),
                           str(ckpt_dir)], env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    ids = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("RUN_ID")]
    return proc, ids[0] if ids else None


def _kill_plan(rng, steps, eval_every, kills):
    """``kills`` absolute updates at which to die, each after at least one checkpoint of its own process
    (so that every kill is followed by a real resume), as (update, updates into the process)."""
    plan, start = [], 0
    for _ in range(kills):
        lo, hi = start + eval_every + 1, min(start + 3 * eval_every, steps - 1)
        if lo > hi:
            break
        update = rng.randint(lo, hi)
        plan.append((update, update - start))
        start = (update - 1) // eval_every * eval_every  # the last checkpoint before the kill
    return plan


def _assert_same_as_uninterrupted(reference, run_id, uri, ckpt_dir, ref_ckpt_dir, resumes):
    from mlflow.tracking import MlflowClient

    c = MlflowClient(uri)
    run = c.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["status"] == "finished"
    assert "error" not in run.data.tags
    assert run.data.tags["resumes"] == str(resumes)
    assert run.data.metrics["test_accuracy"] == reference.test  # bit for bit
    for key in ("train_loss", "eval_accuracy", "seconds_per_100"):
        points = c.get_metric_history(run_id, key)
        assert [m.step for m in points] == reference.history["step"], key  # each step once, in order
        if key != "seconds_per_100":  # a timing: differs from run to run
            assert [m.value for m in points] == reference.history[key], key
    for key in ("test_accuracy", "best_eval_accuracy"):
        assert len(c.get_metric_history(run_id, key)) == 1
    # the finished run keeps only its best weights, identical to the uninterrupted run's
    assert os.listdir(os.path.join(ckpt_dir, run_id)) == [BEST_FILE]
    best = torch.load(os.path.join(ckpt_dir, run_id, BEST_FILE), weights_only=True)
    ref_best = torch.load(os.path.join(ref_ckpt_dir, reference.run_id, BEST_FILE), weights_only=True)
    assert best.keys() == ref_best.keys() and all(torch.equal(best[k], ref_best[k]) for k in best)
    assert torch.equal(best["writer_mask"], ref_best["writer_mask"])


def _reference(tmp_path, config, uri):
    from uwbench.tracking.mlflow import Run

    ref_dir = tmp_path / "ref-ckpt"
    result = train(config, run=Run("reference", uri=uri), progress=False, checkpoint_dir=str(ref_dir),
                   system_metrics=False)
    assert result.status == "finished"
    return result, str(ref_dir)


def _kill_and_resume(tmp_path, uri, config, kills, seed):
    """Run ``config`` in processes killed at random updates, resumed until it finishes; returns the run id
    and the number of kills. The last resume goes through `uwbench train --resume`."""
    rng = random.Random(seed)
    plan = _kill_plan(rng, config["train"]["steps"], config["train"]["eval_every"], kills)
    assert len(plan) == kills
    ckpt_dir = tmp_path / "ckpt"
    run_id = None
    for update, into_process in plan:
        proc, got = _child(tmp_path, config, uri, run_id, into_process, ckpt_dir)
        assert proc.returncode == -signal.SIGKILL, f"plan {plan} (seed {seed}): {proc.stdout}\n{proc.stderr[-3000:]}"
        run_id = run_id or got
        assert status(run_id, str(ckpt_dir)) == "resumable"
    out = subprocess.run([sys.executable, "-m", "uwbench", "train", "--resume", run_id, "--tracking-uri", uri,
                          "--checkpoint-dir", str(ckpt_dir), "--no-progress"],
                         env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"plan {plan} (seed {seed}): {out.stdout}\n{out.stderr[-3000:]}"
    assert f"resuming MLflow run {run_id}" in out.stdout
    return run_id, str(ckpt_dir), plan


def test_a_run_killed_once_resumes_to_the_uninterrupted_result(tmp_path, tracking_uri):
    seed = random.randrange(10**6)
    reference, ref_dir = _reference(tmp_path, KILL_CFG, tracking_uri)
    run_id, ckpt_dir, plan = _kill_and_resume(tmp_path, tracking_uri, KILL_CFG, kills=1, seed=seed)
    _assert_same_as_uninterrupted(reference, run_id, tracking_uri, ckpt_dir, ref_dir, resumes=len(plan))


@pytest.mark.slow
def test_a_run_killed_many_times_resumes_to_the_uninterrupted_result(tmp_path, tracking_uri):
    seed = random.randrange(10**6)
    config = {**KILL_CFG, "train": {**KILL_CFG["train"], "steps": 300}}
    reference, ref_dir = _reference(tmp_path, config, tracking_uri)
    run_id, ckpt_dir, plan = _kill_and_resume(tmp_path, tracking_uri, config, kills=4, seed=seed)
    _assert_same_as_uninterrupted(reference, run_id, tracking_uri, ckpt_dir, ref_dir, resumes=len(plan))


# ---- units ----


def test_atomic_save_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "state.pt"
    atomic_save({"x": torch.arange(3)}, str(path))
    atomic_save({"x": torch.arange(5)}, str(path))
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.arange(5))
    assert os.listdir(path.parent) == ["state.pt"]

    class Unsaveable:
        def __reduce__(self):
            raise RuntimeError("cannot pickle")

    with pytest.raises(RuntimeError, match="cannot pickle"):  # a write that fails half way
        atomic_save({"x": torch.arange(7), "bad": Unsaveable()}, str(path))
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.arange(5))  # the old one is intact
    assert os.listdir(path.parent) == ["state.pt"]


def test_a_stored_config_that_differs_is_refused_with_the_difference(tmp_path):
    from uwbench.training.config import resolve_run

    config = resolve_run(KILL_CFG).as_dict()
    Checkpoint("r1", config, root=str(tmp_path)).save({"step": 20})
    assert Checkpoint("r1", config, root=str(tmp_path)).load()["step"] == 20
    other = resolve_run({**KILL_CFG, "train": {**KILL_CFG["train"], "lr": 0.5}}).as_dict()
    with pytest.raises(CheckpointError, match=r"train\.lr: stored 0\.01, given 0\.5"):
        Checkpoint("r1", other, root=str(tmp_path)).load()


def test_train_refuses_to_resume_a_run_under_another_config(tmp_path, tracking_uri):
    from uwbench.tracking.mlflow import Run

    cfg = {**KILL_CFG, "train": {**KILL_CFG["train"], "steps": 40}}
    run = Run("mismatch", uri=tracking_uri)
    Checkpoint(run.run_id, {"task": {"name": "copy"}}, root=str(tmp_path)).save({"step": 20})
    with pytest.raises(CheckpointError, match="another run config"):
        train(cfg, run=run, progress=False, checkpoint_dir=str(tmp_path), system_metrics=False)


def test_a_finished_run_keeps_only_its_best_weights_and_is_not_resumed(tmp_path, tracking_uri):
    from uwbench.tracking.mlflow import Run

    cfg = {**KILL_CFG, "train": {**KILL_CFG["train"], "steps": 40}}
    run = Run("prune", uri=tracking_uri)
    result = train(cfg, run=run, progress=False, checkpoint_dir=str(tmp_path), system_metrics=False)
    folder = tmp_path / run.run_id
    assert os.listdir(folder) == [BEST_FILE] and status(run.run_id, str(tmp_path)) == "finished"
    best = torch.load(folder / BEST_FILE, weights_only=True)
    assert sum(t.numel() for t in best.values()) >= result.num_parameters  # the weights (and the buffers)
    again = Run("prune", uri=tracking_uri, run_id=run.run_id)
    with pytest.raises(CheckpointError, match="already finished"):
        train(cfg, run=again, progress=False, checkpoint_dir=str(tmp_path), system_metrics=False)


def test_checkpoints_can_be_switched_off(tmp_path, tracking_uri):
    from uwbench.tracking.mlflow import Run

    cfg = {**KILL_CFG, "train": {**KILL_CFG["train"], "steps": 20, "checkpoint_every": 0}}
    run = Run("off", uri=tracking_uri)
    assert train(cfg, run=run, progress=False, checkpoint_dir=str(tmp_path), system_metrics=False).status == "finished"
    assert not (tmp_path / run.run_id).exists()


def test_the_random_writers_mask_comes_back_from_the_state_dict_not_from_the_rng():
    from uwbench.training.config import resolve_run
    from uwbench.training.loop import build_components

    resolved = resolve_run({**KILL_CFG, "task": {"name": "copy", "seq_len": 40}})
    torch.manual_seed(0)
    _, saved = build_components(resolved, torch.device("cpu"))
    torch.manual_seed(1)
    _, fresh = build_components(resolved, torch.device("cpu"))
    assert fresh.writer.mask != saved.writer.mask  # another draw
    fresh.load_state_dict(saved.state_dict())
    assert fresh.writer.mask == saved.writer.mask


def test_rng_states_round_trip_through_a_checkpoint(tmp_path):
    import numpy as np

    gens = {"train": torch.Generator().manual_seed(1), "eval": torch.Generator().manual_seed(2)}
    atomic_save({"rng": capture_rng(gens)}, str(tmp_path / "s.pt"))
    expected = ([torch.rand(3, generator=g) for g in gens.values()], torch.rand(3),
                random.random(), np.random.rand())
    state = torch.load(tmp_path / "s.pt", weights_only=True)
    restore_rng(state["rng"], gens)
    got = ([torch.rand(3, generator=g) for g in gens.values()], torch.rand(3), random.random(), np.random.rand())
    assert all(torch.equal(a, b) for a, b in zip(expected[0], got[0]))
    assert torch.equal(expected[1], got[1]) and expected[2:] == got[2:]


def test_resume_from_the_cli_with_other_flags_is_refused_before_the_run_is_touched(tmp_path, capsys):
    from uwbench.cli import main
    from uwbench.training.config import resolve_run

    Checkpoint("r9", resolve_run(KILL_CFG).as_dict(), root=str(tmp_path)).save({"step": 20})
    code = main(["train", "--resume", "r9", "--checkpoint-dir", str(tmp_path), "--task", "copy", "--model", "dnc",
                 "--seq-len", "6", "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "another run config" in err and "task.seq_len: stored 5, given 6" in err


def test_an_interrupted_run_reads_as_interrupted_not_failed_and_a_resume_clears_the_mark(tracking_uri):
    """A run stopped by an interruption ends KILLED with the trainer's ``failed`` tag; the report's snapshot
    reads it as ``killed`` (a report counts its cell incomplete, not failed), and resuming it removes the interruption's
    tags, so while it runs again it reads ``running``."""
    from uwbench.snapshot import normalise_mlflow
    from uwbench.tracking.mlflow import Run, get_run, search_runs

    def stop(step, value):
        if step >= 20:
            raise KeyboardInterrupt

    run = Run("interrupted", uri=tracking_uri)
    with pytest.raises(KeyboardInterrupt):
        train(KILL_CFG, run=run, report=stop, progress=False, system_metrics=False)
    rec = get_run(run.run_id, tracking_uri)
    assert (rec["status"], rec["tags"]["status"]) == ("KILLED", "failed")
    rows = normalise_mlflow(search_runs(["interrupted"], tracking_uri), "s")
    assert [r["status"] for r in rows] == ["killed"]
    # what a resume does first (record.open_run with a checkpoint): the interruption's marks go
    from uwbench.training import record
    from uwbench.training.config import resolve_run
    from uwbench.training.loop import RunResult

    again = Run("interrupted", uri=tracking_uri, run_id=run.run_id)
    result = RunResult(status="failed", metric="accuracy", num_parameters=1, threads=1, path="eager")
    result.history = {"step": []}
    record.open_run(again, resolve_run(KILL_CFG), result, {"step": 20}, 1, "cpu")
    rows = normalise_mlflow(search_runs(["interrupted"], tracking_uri), "s")
    assert [r["status"] for r in rows] == ["running"]
    assert "error" not in get_run(run.run_id, tracking_uri)["tags"]
