"""A population's members are their solo runs (training/population.py, models/stacked.py).

Float64 on both CPU paths: each of 3 members with its own seed, learning rate, clip and clip mode gives
its solo run's learning curve, test value and final parameters (the native path bit for bit: each member
runs its own node; the torch path to round-off: its products are batched). A member that diverges fails
alone. Float32 over a short run agrees within a stated tolerance. The command line: several seeds as a
population record the runs a solo command records, and a population killed with SIGKILL resumes with the
same command, every member finishing once.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch

from uwbench import metrics
from uwbench.tasks import base
from uwbench.training.config import resolve_run
from uwbench.training.loop import _Trainer, check_run
from uwbench.training.population import Population, PopulationError

from tests.helpers import ROOT


@pytest.fixture
def float64(monkeypatch):
    """Models built in float64 and batches cast to it (the tasks draw float32), for solo and population
    runs alike."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    to = base.Batch.to

    def to64(self, device):
        b = to(self, device)
        def cast(t):
            return t.double() if t.is_floating_point() else t

        return replace(b, inputs=cast(b.inputs), decoder_inputs=cast(b.decoder_inputs), targets=cast(b.targets))

    monkeypatch.setattr(base.Batch, "to", to64)
    yield
    torch.set_default_dtype(previous)


def config(seed, lr, clip, mode="per_tensor", native=True, writer="regular", steps=20, model="dnc"):
    m = {"name": model, "hidden_size": 12, "memory_size": 4}
    if model == "dnc":
        m.update(word_size=6, writer=writer)
        if writer == "cached_uniform":
            m.update(cache_size=2, attention_size=4)
    return {"task": {"name": "copy", "seq_len": 6}, "model": m,
            "train": {"seed": seed, "lr": lr, "clip": clip, "clip_mode": mode, "steps": steps, "batch_size": 4,
                      "eval_every": 10, "eval_batches": 1, "native": native}}


def solo(cfg):
    """The solo run, through the same trainer class ``loop.train`` uses; returns (result, model)."""
    resolved = resolve_run(cfg)
    trainer = _Trainer(resolved, check_run(resolved), None, None, None, None)
    return trainer.train(False, None), trainer.model


def members(cfgs):
    pop = Population(cfgs)
    results = pop.train(progress=False)
    return results, [m.trainer.model for m in pop.members]


def three(native, writer="regular", model="dnc"):
    return [config(0, 1e-3, 10, "per_tensor", native, writer, model=model),
            config(1, 3e-3, 1.0, "per_variable", native, writer, model=model),
            config(2, 1e-2, 0.5, "global", native, writer, model=model)]


def assert_same(pop_result, pop_model, cfg, tol):
    ref, ref_model = solo(cfg)
    assert pop_result.status == ref.status == "finished"
    for key in ("train_loss", "eval_accuracy", metrics.GRAD_NORM):
        a, b = pop_result.history[key], ref.history[key]
        assert len(a) == len(b) == 2
        assert max(abs(x - y) for x, y in zip(a, b)) <= tol, key
    assert abs(pop_result.test - ref.test) <= tol
    assert pop_result.best_step == ref.best_step
    for (name, p), (_, q) in zip(pop_model.state_dict().items(), ref_model.state_dict().items()):
        if p.is_floating_point():
            assert (p - q).abs().max().item() <= tol, name
        else:  # random writing's mask
            assert torch.equal(p, q), name


@pytest.mark.parametrize("writer", ["regular", "cached_uniform"])
def test_native_members_are_their_solo_runs_bit_for_bit(float64, writer):
    cfgs = three(True, writer)
    results, models = members(cfgs)
    assert {r.path for r in results} == {"native"}
    for r, m, c in zip(results, models, cfgs):
        assert_same(r, m, c, 0.0)


@pytest.mark.parametrize("writer,model", [("uniform", "dnc"), ("random", "dnc"), ("regular", "ntm")])
def test_torch_path_members_are_their_solo_runs_to_round_off(float64, writer, model):
    cfgs = three(False, writer, model)
    results, models = members(cfgs)
    assert {r.path for r in results} == {"stacked"}
    for r, m, c in zip(results, models, cfgs):
        assert_same(r, m, c, 1e-9)


def test_random_writing_keeps_each_members_own_schedule(float64):
    """Random writing draws one mask per seed: the members' schedules differ, so each runs its own (a
    stacked group shares one schedule), and each still equals its solo run (the test above)."""
    cfgs = three(False, "random")
    pop = Population(cfgs)
    pop._build()
    schedules = {tuple(m.trainer.model.writer.schedule(6)) for m in pop.members}
    assert len(schedules) > 1
    assert len(pop.forward.groups([0, 1, 2], 6)) == len(schedules)


@pytest.mark.parametrize("native", [True, False])
def test_a_slot_left_by_a_pruned_member_is_refilled_with_the_run_it_would_have_had_alone(float64, native):
    """Two slots, four runs: member 1 is pruned at its first evaluation and the refill's first run takes its
    slot after that update (member 0 then at update 10); when member 0 finishes, the second takes its slot.
    Each refilled member counts its own updates and equals its solo run (bit for bit on the native path)."""
    from uwbench.training.loop import Pruned
    from uwbench.training.population import Joiner

    cfgs = three(native) + [config(3, 2e-3, 5.0, "per_tensor", native)]

    def prune_at_first_evaluation(step, value):
        raise Pruned()

    queue = [Joiner(cfgs[2]), Joiner(cfgs[3])]
    ended, asked = [], []
    pop = None

    def refill():
        asked.append([m.step for m in pop.members])
        return queue.pop(0) if queue else None

    pop = Population(cfgs[:2], reports=[None, prune_at_first_evaluation], refill=refill,
                     on_end=lambda i, r: ended.append((i, r.status)))
    results = pop.train(progress=False)
    assert [r.status for r in results] == ["finished", "pruned", "finished", "finished"]
    assert results[1].steps_done == 10
    assert asked[0] == [10, 10]  # the pruned member's slot, refilled after update 10 (both slots full before)
    assert asked[1] == [20, 10, 10]  # member 0's, when it finished; the refilled member then at its update 10
    assert ended[:2] == [(1, "pruned"), (0, "finished")]
    assert sorted(i for i, _ in ended) == [0, 1, 2, 3]
    models = [m.trainer.model for m in pop.members]
    for i in (0, 2, 3):
        assert_same(results[i], models[i], cfgs[i], 0.0 if native else 1e-9)


def test_a_refilled_run_that_cannot_start_fails_alone(float64, monkeypatch):
    """A run given to a freed slot that cannot be built (here its model raises) is recorded failed and told;
    the population goes on, and the next run the refill gives takes the slot."""
    from uwbench.training import population as pop_mod
    from uwbench.training.loop import Pruned
    from uwbench.training.population import Joiner

    class Broken(_Trainer):
        def __init__(self, resolved, *args, **kwargs):
            if resolved.train.seed == 2:
                raise RuntimeError("this model cannot be built")
            super().__init__(resolved, *args, **kwargs)

    monkeypatch.setattr(pop_mod, "_Trainer", Broken)
    cfgs = three(True) + [config(3, 2e-3, 5.0, "per_tensor", True)]

    def prune_at_first_evaluation(step, value):
        raise Pruned()

    queue = [Joiner(cfgs[2]), Joiner(cfgs[3])]
    ended = []
    pop = Population(cfgs[:2], reports=[None, prune_at_first_evaluation], refill=lambda: queue.pop(0) if queue else None,
                     on_end=lambda i, r: ended.append((i, r.status)))
    results = pop.train(progress=False)
    assert [r.status for r in results] == ["finished", "pruned", "failed", "finished"]
    assert "this model cannot be built" in results[2].error
    assert (2, "failed") in ended and sorted(i for i, _ in ended) == [0, 1, 2, 3]
    assert_same(results[3], pop.members[-1].trainer.model, cfgs[3], 0.0)


@pytest.mark.parametrize("native", [True, False])
def test_a_diverging_member_fails_alone(float64, native):
    cfgs = three(native)
    cfgs[1]["train"]["lr"] = 1e10
    results, models = members(cfgs)
    assert results[1].status == "failed" and "diverged" in results[1].error
    assert results[1].steps_done < 20
    for i in (0, 2):
        assert_same(results[i], models[i], cfgs[i], 0.0 if native else 1e-9)


def test_float32_members_are_close_to_their_solo_runs():
    """Float32: the native path is its solo run's arithmetic, the torch path's batched products round
    otherwise, and training amplifies a round-off (Adam divides by the gradients' size): over 20 updates
    the training losses (about 0.7) agree within 1e-3 absolute (measured, at most 2e-5). Accuracies are
    not continuous in the weights: a bit whose output sits at 0.5, as most of a barely trained model's
    do, flips on a round-off, so the evaluation and test accuracies agree within 2% of the bits scored
    (measured, up to 11 of the test's 2,240 bits on one machine); a member trained on another's batches
    or rate would differ by far more in its losses."""
    for native in (True, False):
        cfgs = three(native)
        results, _ = members(cfgs)
        for r, c in zip(results, cfgs):
            ref, _ = solo(c)
            assert len(r.history["train_loss"]) == len(ref.history["train_loss"]) > 0
            assert max(abs(x - y) for x, y in zip(r.history["train_loss"], ref.history["train_loss"])) <= 1e-3
            assert max(abs(x - y) for x, y in zip(r.history["eval_accuracy"], ref.history["eval_accuracy"])) <= 0.02
            assert abs(r.test - ref.test) <= 0.02


def test_members_must_share_a_shape():
    a, b = config(0, 1e-3, 10), config(1, 1e-3, 10)
    b["model"]["hidden_size"] = 16
    with pytest.raises(PopulationError, match=r"member 1 differs from member 0 in model.hidden_size \(12 against 16\)"):
        Population([a, b])


# the command line -------------------------------------------------------------------------------------

TRAIN = ["train", "--task", "copy", "--model", "dnc", "--seq-len", "6", "--hidden-size", "12", "--memory-size", "4",
         "--batch-size", "4", "--eval-every", "10", "--no-progress", "--no-system-metrics", "--device", "cpu"]


def uwbench(args, cwd, **kw):
    env = {**os.environ, "PYTHONPATH": ROOT, "UWBENCH_SYSTEM_METRICS": "0", "UWBENCH_RUNS_DIR": f"{cwd}/runs"}
    args = [*args, "--tracking-uri", f"sqlite:///{cwd}/runs/mlflow.db"]
    return subprocess.run([sys.executable, "-m", "uwbench", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          **kw)


def runs_of(cwd):
    from uwbench.tracking.mlflow import client

    c = client(f"sqlite:///{cwd}/runs/mlflow.db")
    exp = c.get_experiment_by_name("uwbench-train")
    return c.search_runs([exp.experiment_id])


POPULATION_TAGS = {"population", "population_key", "population_size", "population_member",
                   "population_seconds_per_100"}
VARYING_TAGS = {"mlflow.runName", "mlflow.user", "mlflow.source.name", "mlflow.source.type", "mlflow.source.git.commit"}


def test_a_population_records_what_solo_runs_record(tmp_path):
    pop_dir, off_dir = tmp_path / "pop", tmp_path / "off"
    for d, mode in ((pop_dir, "2"), (off_dir, "off")):
        d.mkdir()
        out = uwbench([*TRAIN, "--steps", "20", "--seed", "0", "1", "--population", mode], d)
        assert out.returncode == 0, out.stderr[-2000:]
    pop, off = (sorted(runs_of(d), key=lambda r: r.data.params["train.seed"]) for d in (pop_dir, off_dir))
    assert len(pop) == len(off) == 2
    for p, o in zip(pop, off):
        assert p.info.status == o.info.status == "FINISHED"
        assert p.data.params == o.data.params
        pt = {k: v for k, v in p.data.tags.items() if k not in POPULATION_TAGS | VARYING_TAGS}
        ot = {k: v for k, v in o.data.tags.items() if k not in VARYING_TAGS}
        assert pt == ot
        assert set(p.data.metrics) == set(o.data.metrics)
        assert p.data.metrics["test_accuracy"] == o.data.metrics["test_accuracy"]  # native: the same arithmetic
        assert p.data.tags["population_size"] == "2" and "population" not in o.data.tags
    assert pop[0].data.tags["population"] == pop[1].data.tags["population"]


def test_a_killed_population_resumes_with_the_same_command(tmp_path):
    args = [*TRAIN, "--steps", "400", "--seed", "0", "1", "2", "--population", "3"]
    env = {**os.environ, "PYTHONPATH": ROOT, "UWBENCH_SYSTEM_METRICS": "0", "UWBENCH_RUNS_DIR": f"{tmp_path}/runs"}
    proc = subprocess.Popen([sys.executable, "-m", "uwbench", *args, "--tracking-uri",
                             f"sqlite:///{tmp_path}/runs/mlflow.db"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpts = tmp_path / "runs" / "checkpoints"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # until every member has checkpointed a few evaluations
        states = list(ckpts.glob("*/state.pt")) if ckpts.exists() else []
        if len(states) == 3 and _points(tmp_path) >= 3 * 5:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = runs_of(tmp_path)
    assert len(first) == 3 and all(r.info.status == "RUNNING" for r in first)
    out = uwbench(args, tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "resuming population" in out.stdout
    again = runs_of(tmp_path)
    assert {r.info.run_id for r in again} == {r.info.run_id for r in first}  # no member trained twice
    from uwbench.tracking.mlflow import client

    c = client(f"sqlite:///{tmp_path}/runs/mlflow.db")
    for r in again:
        assert r.info.status == "FINISHED"
        steps = [m.step for m in c.get_metric_history(r.info.run_id, "eval_accuracy")]
        assert steps == list(range(10, 401, 10))  # every evaluation once, none lost


def _points(cwd) -> int:
    """Evaluation points recorded so far over all runs (0 while the store is being created)."""
    from uwbench.tracking.mlflow import client

    try:
        c = client(f"sqlite:///{cwd}/runs/mlflow.db")
        return sum(len(c.get_metric_history(r.info.run_id, "eval_accuracy")) for r in runs_of(cwd))
    except Exception:  # noqa: BLE001 - the store or the experiment does not exist yet
        return 0


# CUDA (marked gpu: `make test-gpu`, `make gpu-check`) ------------------------------------------------------

def cuda_config(seed, lr, cuda_graph):
    c = config(seed, lr, 10)
    c["train"].update(device="cuda", native=False, cuda_graph=cuda_graph)
    return c


@pytest.mark.gpu
@pytest.mark.parametrize("cuda_graph", [False, True])
def test_cuda_members_are_close_to_their_solo_runs(cuda_graph):
    """On CUDA the members' forward is one stacked group (captured as CUDA graphs with cuda_graph): over 20
    updates in float32 each member's curve and test value stay within 1e-3 of its solo run's on the same
    GPU and path."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    cfgs = [cuda_config(s, lr, cuda_graph) for s, lr in ((0, 1e-3), (1, 3e-3), (2, 1e-2))]
    pop = Population(cfgs)
    results = pop.train(progress=False)
    assert {r.path for r in results} == {"stacked+cuda_graph" if cuda_graph else "stacked"}
    assert len(pop.forward.groups([0, 1, 2], 6)) == 1  # one batched forward for the three
    for r, c in zip(results, cfgs):
        ref, _ = solo(c)
        for key in ("train_loss", "eval_accuracy"):
            assert max(abs(x - y) for x, y in zip(r.history[key], ref.history[key])) <= 1e-3, key
        assert abs(r.test - ref.test) <= 1e-3
