from dataclasses import dataclass

import pytest
import torch

from uwbench.models.base import Seq2SeqModel
from uwbench.registry import MODELS
from uwbench.training.loop import Pruned, clip_gradients, load_checkpoint, train


@dataclass
class NaNAfterConfig:
    after: int = 3  # forward calls before the output turns NaN


class NaNAfter(Seq2SeqModel):
    """Test-only model: a linear read-out whose output becomes NaN after ``after`` training calls."""

    def __init__(self, cfg, input_size, output_size):
        super().__init__()
        self.cfg = cfg
        self.w = torch.nn.Linear(input_size, output_size)
        self.calls = 0

    def forward(self, inputs, decoder_inputs, lengths=None):
        if self.training:
            self.calls += 1
        out = self.w(decoder_inputs + inputs[:, -1:])  # (B, Td, O)
        return out * float("nan") if self.calls > self.cfg.after else out


if "test_nan_after" not in MODELS:
    MODELS.register("test_nan_after", config=NaNAfterConfig)(
        lambda cfg, input_size, output_size, task=None: NaNAfter(cfg, input_size, output_size))

TINY = {"task": {"name": "copy", "seq_len": 5, "test_size": 128},
        "model": {"name": "lstm", "hidden_size": 64},
        "train": {"steps": 600, "batch_size": 32, "lr": 1e-2, "eval_every": 100, "eval_batches": 2, "seed": 0}}


def test_lstm_learns_copy_t5():
    result = train(TINY, progress=False)
    assert result.status == "finished"
    assert result.test >= 0.90, result.history
    assert result.history["eval_accuracy"][-1] > result.history["eval_accuracy"][0]
    assert result.seconds_per_100 > 0 and result.best_step in result.history["step"]


def test_same_seed_same_result_other_seed_differs():
    cfg = {**TINY, "train": {**TINY["train"], "steps": 30, "eval_every": 10}}
    a, b = train(cfg, progress=False), train(cfg, progress=False)
    assert a.history["train_loss"] == b.history["train_loss"] and a.test == b.test
    other = {**cfg, "train": {**cfg["train"], "seed": 1}}
    assert train(other, progress=False).history["train_loss"] != a.history["train_loss"]


def test_run_is_recorded_and_readable_with_search_runs(tracking_uri):
    import mlflow

    from uwbench.tracking.mlflow import Run

    cfg = {**TINY, "train": {**TINY["train"], "steps": 20, "eval_every": 10}}
    run = Run("unit", run_name="r1", tags={"task": "copy", "seed": 0}, uri=tracking_uri)
    result = train(cfg, run=run, progress=False)
    mlflow.set_tracking_uri(tracking_uri)
    df = mlflow.search_runs(experiment_names=["unit"])
    assert len(df) == 1
    row = df.iloc[0]
    assert row["status"] == "FINISHED" and row["run_id"] == result.run_id
    assert row["params.task.seq_len"] == "5" and row["params.model.hidden_size"] == "64"
    assert row["params.train.clip_mode"] == "per_tensor"  # defaults recorded too
    assert row["tags.status"] == "finished" and row["tags.seed"] == "0"
    assert row["metrics.test_accuracy"] == pytest.approx(result.test)
    history = mlflow.tracking.MlflowClient(tracking_uri).get_metric_history(result.run_id, "eval_accuracy")
    assert [m.step for m in history] == [10, 20]
    # the largest gradient before clipping, per evaluation window: recorded, positive, as the run saw it
    sizes = mlflow.tracking.MlflowClient(tracking_uri).get_metric_history(result.run_id, "grad_norm_max")
    assert [m.step for m in sizes] == [10, 20] and all(m.value > 0 for m in sizes)
    assert [m.value for m in sizes] == pytest.approx(result.history["grad_norm_max"])
    # the best checkpoint is an artifact and loads with weights_only=True
    path = mlflow.tracking.MlflowClient(tracking_uri).download_artifacts(result.run_id, "checkpoint/best.pt")
    state = load_checkpoint(path)
    assert "w_y" in state


def test_nan_loss_marks_the_run_failed_and_keeps_what_was_recorded(tracking_uri):
    import mlflow

    from uwbench.tracking.mlflow import Run

    cfg = {"task": {"name": "copy", "seq_len": 4}, "model": {"name": "test_nan_after", "after": 25},
           "train": {"steps": 100, "batch_size": 8, "eval_every": 10, "eval_batches": 1}}
    run = Run("unit-nan", uri=tracking_uri)
    result = train(cfg, run=run, progress=False)
    assert result.status == "failed"
    assert "update 26" in result.error and "lower lr" in result.error
    mlflow.set_tracking_uri(tracking_uri)
    row = mlflow.search_runs(experiment_names=["unit-nan"]).iloc[0]
    assert row["status"] == "FAILED" and row["tags.status"] == "failed"
    assert "nan" in row["tags.error"].lower()
    history = mlflow.tracking.MlflowClient(tracking_uri).get_metric_history(row["run_id"], "train_loss")
    assert [m.step for m in history] == [10, 20]  # what came before the divergence is kept


def test_report_callback_can_prune():
    seen = []

    def report(step, value):
        seen.append(step)
        if step >= 20:
            raise Pruned()

    cfg = {**TINY, "train": {**TINY["train"], "steps": 100, "eval_every": 10}}
    with pytest.raises(Pruned):
        train(cfg, report=report, progress=False)
    assert seen == [10, 20]


def test_per_tensor_clipping_bounds_each_tensor_and_global_bounds_the_total():
    a = torch.nn.Parameter(torch.zeros(3))
    b = torch.nn.Parameter(torch.zeros(2))
    a.grad, b.grad = torch.tensor([30.0, 40.0, 0.0]), torch.tensor([0.3, 0.4])
    size = clip_gradients([a, b], 10.0, "per_tensor")
    assert a.grad.norm() == pytest.approx(10.0, rel=1e-5)
    assert b.grad.norm() == pytest.approx(0.5)  # under the threshold: untouched
    assert float(size) == pytest.approx(50.0)  # the largest tensor's norm before clipping
    a.grad, b.grad = torch.tensor([30.0, 40.0, 0.0]), torch.tensor([0.3, 0.4])
    size = clip_gradients([a, b], 10.0, "global")
    total = torch.cat([a.grad, b.grad]).norm()
    assert total == pytest.approx(10.0, rel=1e-5)
    assert float(size) == pytest.approx((50.0 ** 2 + 0.5 ** 2) ** 0.5)  # the global norm before clipping
    a.grad, b.grad = torch.tensor([30.0, 40.0, 0.0]), torch.tensor([0.3, 0.4])
    assert float(clip_gradients([a, b], 10.0, "none")) == pytest.approx(50.0) and a.grad[1] == 40.0
    assert clip_gradients([torch.nn.Parameter(torch.zeros(1))], 10.0, "per_tensor") is None  # no gradient


def test_per_variable_clipping_clips_a_controllers_two_matrices_under_one_norm():
    """The authors' TF code holds the controller's [x; r; h] kernel as one variable and clips each variable at
    norm 5: torch's weight_ih and weight_hh share one norm, every other tensor keeps its own."""
    from uwbench.models.base import build_model
    from uwbench.training.loop import tf_variables

    model = build_model("dnc", 10, 10, {"hidden_size": 4, "memory_size": 2, "word_size": 3})
    ctrl = model.controller
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    ctrl.weight_ih.grad[0, 0], ctrl.weight_hh.grad[0, 0] = 3.0, 4.0  # joint norm 5, each under 5
    model.w_y.grad[0, 0] = 4.0
    size = clip_gradients(model.parameters(), 2.5, "per_variable", tf_variables(model))
    assert float(size) == pytest.approx(5.0)  # the largest variable's norm before clipping
    assert float(ctrl.weight_ih.grad[0, 0]) == pytest.approx(1.5, rel=1e-5)  # both halved: one norm
    assert float(ctrl.weight_hh.grad[0, 0]) == pytest.approx(2.0, rel=1e-5)
    assert float(model.w_y.grad[0, 0]) == pytest.approx(2.5, rel=1e-5)  # its own variable, clipped alone
    # per tensor, the same gradients clip each matrix on its own
    for p in model.parameters():
        p.grad.zero_()
    ctrl.weight_ih.grad[0, 0], ctrl.weight_hh.grad[0, 0] = 3.0, 4.0
    clip_gradients(model.parameters(), 3.5, "per_tensor")
    assert float(ctrl.weight_ih.grad[0, 0]) == pytest.approx(3.0) and float(ctrl.weight_hh.grad[0, 0]) < 4.0
    groups = tf_variables(model)
    names = {id(p): n for n, p in model.named_parameters()}
    assert sorted(names[id(p)] for p, _ in groups[0]) == ["controller.weight_hh", "controller.weight_ih"]
    assert sum(len(g) for g in groups) == len(list(model.parameters()))  # every tensor in exactly one variable


def test_gru_variables_follow_tf_gates_and_candidate():
    """TF's GRUCell has a gates kernel (the first 2H columns) and a candidate kernel, each with a bias."""
    from uwbench.models.controllers import build_controller

    gru = build_controller("gru", 5, 3)
    groups = gru.tf_variables()
    assert len(groups) == 4
    for p in gru.parameters():
        p.grad = torch.zeros_like(p)
    gru.weight_ih.grad[:, 6:] = 1.0  # only the candidate kernel: 5 x 3 ones from x, and 3 x 3 from h
    gru.weight_hh.grad[:, 6:] = 1.0
    clip_gradients(gru.parameters(), 1.0, "per_variable", groups)
    candidate = torch.cat([gru.weight_ih.grad[:, 6:].flatten(), gru.weight_hh.grad[:, 6:].flatten()])
    assert float(candidate.norm()) == pytest.approx(1.0, rel=1e-5)
    assert float(gru.weight_ih.grad[:, :6].abs().sum()) == 0.0


@pytest.mark.parametrize("task,given,expected", [
    ("copy", None, False),  # the synthetic tasks' protocol: a read-only decoder
    ("add", None, False),
    ("sinusoid", None, True),  # the sinusoid's decoder writes every step (the paper's appendix)
    ("copy", True, True),  # the user's setting wins
    ("sinusoid", False, False),
])
def test_the_decoder_protocol_is_the_tasks_unless_the_run_sets_it(task, given, expected):
    from uwbench import axes
    from uwbench.training.config import resolve_run

    model = {"name": "dnc"} if given is None else {"name": "dnc", "decoder_write": given}
    run = resolve_run({"task": {"name": task}, "model": model})
    assert run.model_cfg.decoder_write is expected
    assert axes.run_tags(run.as_dict())["decoder_write"] == ("true" if expected else "false")
    lstm = resolve_run({"task": {"name": task}, "model": {"name": "lstm"}})
    assert "decoder_write" not in lstm.as_dict()["model"]  # no memory: no protocol
    assert axes.run_tags(lstm.as_dict())["decoder_write"] == axes.NONE


def test_cuda_request_without_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    cfg = {**TINY, "train": {**TINY["train"], "device": "cuda"}}
    with pytest.raises(ValueError, match="no CUDA GPU"):
        train(cfg, progress=False)


@pytest.mark.slow  # several training processes racing to create one store
def test_runs_started_together_on_a_fresh_store_all_get_recorded(tmp_path):
    """Three processes open a store that does not exist yet at the same moment: none may crash on the
    schema creation race (MLflow's migrations, docs/design.md §13.1); all three runs are recorded."""
    import subprocess
    import sys

    import mlflow

    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    code = ("import sys; from uwbench.tracking.mlflow import Run; "
            "r = Run('together', run_name=sys.argv[1], uri=sys.argv[2]); r.log_metrics({'x': 1.0}, 0); r.end()")
    procs = [subprocess.Popen([sys.executable, "-c", code, f"r{i}", uri], stderr=subprocess.PIPE, text=True)
             for i in range(3)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], "\n".join(errors)
    mlflow.set_tracking_uri(uri)
    df = mlflow.search_runs(experiment_names=["together"])
    assert sorted(df["tags.mlflow.runName"]) == ["r0", "r1", "r2"]
