"""The whole-sequence CUDA-graph path (models/cuda_graph.py) and the rule that picks it
(training/compile_policy.py). The rule and the wrapper's fall-through run everywhere; the captures
themselves need a GPU (marked ``gpu``, skipped without one)."""
import warnings

import pytest
import torch
from tests.helpers.learning import assert_passes_match

from uwbench.models.base import build_model
from uwbench.models.cuda_graph import GraphedTraining, unsupported_reason
from uwbench.registry import TASKS
from uwbench.training.compile_policy import cuda_graph_decision
from uwbench.training.loop import train

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
MEMORY = {"memory_size": 3, "hidden_size": 6, "word_size": 4}
WRITER_OWN = {"regular": {}, "uniform": {}, "cached_uniform": {"cache_size": 2}, "random": {"writer_seed": 0}}
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def copy_task(seq_len, **extra):
    return TASKS.get("copy")(TASKS.build_config("copy", {"seq_len": seq_len, **extra}))


def small_dnc(task, writer="regular"):
    return build_model("dnc", task.input_size, task.output_size, {**MEMORY, "writer": writer, **WRITER_OWN[writer]},
                       task=task)


def test_auto_takes_the_capture_only_on_cuda_and_never_against_compile_true():
    model = small_dnc(copy_task(4))
    assert not cuda_graph_decision(model, "auto", "auto", CPU)
    assert not cuda_graph_decision(model, False, "auto", CUDA)
    assert unsupported_reason(model, CPU) == "CUDA graphs need a CUDA device, the run is on cpu"
    if torch.cuda.is_available():
        assert cuda_graph_decision(model, "auto", "auto", CUDA)
        assert not cuda_graph_decision(model, "auto", True, CUDA)  # compile=true: its per-step capture


def test_bad_settings_are_clear_errors():
    model = small_dnc(copy_task(4))
    with pytest.raises(ValueError, match="train.cuda_graph=true cannot run this model: CUDA graphs need a CUDA "
                                         "device, the run is on cpu; set train.cuda_graph=auto or false"):
        cuda_graph_decision(model, True, "auto", CPU)
    with pytest.raises(ValueError, match="two different paths"):
        cuda_graph_decision(model, True, True, CUDA)
    with pytest.raises(ValueError, match="`train.cuda_graph` must be auto, true or false, got 'yes'"):
        cuda_graph_decision(model, "yes", "auto", CPU)


def test_only_models_marked_capturable_are_captured():
    class Opaque(torch.nn.Module):  # a model that never said its forward is free of host syncs
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

    assert unsupported_reason(Opaque(), CUDA).startswith("Opaque's forward is not known to be free of host "
                                                         "synchronisation")
    task = copy_task(4)
    assert unsupported_reason(small_dnc(task), CUDA, lengths=True) == (
        "the task's batches carry per-sequence lengths, which a captured graph cannot follow")
    for name, values in (("dnc", MEMORY), ("ntm", MEMORY), ("lstm", {"hidden_size": 6})):
        assert build_model(name, task.input_size, task.output_size, values, task=task).capturable


def test_cuda_graph_true_on_cpu_fails_the_run_naming_the_fix():
    cfg = {"task": {"name": "copy", "seq_len": 3}, "model": {"name": "dnc", **MEMORY},
           "train": {"steps": 2, "batch_size": 2, "eval_every": 1, "eval_batches": 1, "cuda_graph": True,
                     "native": False}}
    with pytest.raises(ValueError, match="set train.cuda_graph=auto or false"):
        train(cfg, progress=False)


def test_the_wrapper_runs_the_eager_model_where_it_does_not_replay():
    """CPU tensors, evaluation mode and no-grad forwards go to the model itself, unchanged, and nothing
    is captured."""
    task = copy_task(4)
    model = small_dnc(task)
    graphed = GraphedTraining(model)
    batch = task.sample(3, torch.Generator().manual_seed(0))
    expected = model(batch.inputs, batch.decoder_inputs)
    torch.testing.assert_close(graphed(batch.inputs, batch.decoder_inputs), expected, rtol=0, atol=0)
    model.eval()
    with torch.no_grad():
        assert not graphed.replays(batch.inputs, batch.decoder_inputs)
        graphed(batch.inputs, batch.decoder_inputs)
    assert graphed.captures == {}


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("decoder_write", (True, False))
@pytest.mark.parametrize("writer", ("regular", "uniform", "cached_uniform", "random"))
@pytest.mark.parametrize("model_name", ("dnc", "ntm"))
def test_replayed_sequence_equals_eager_on_cuda(model_name, writer, decoder_write):
    """One capture, then replays on fresh batches: outputs and every gradient match the eager model on
    the same device, and the parameters' in-place updates between replays are seen; with the decoder that
    writes and with the read-only one."""
    torch.manual_seed(0)
    task = copy_task(6)
    values = {**MEMORY, "writer": writer, "decoder_write": decoder_write, **WRITER_OWN[writer]}
    eager = build_model(model_name, task.input_size, task.output_size, values, task=task).cuda()
    captured = build_model(model_name, task.input_size, task.output_size, values, task=task).cuda()
    captured.load_state_dict(eager.state_dict())
    graphed = GraphedTraining(captured)
    assert_passes_match(task, eager, captured, graphed, lr=0.1)  # replays see in-place updates
    assert len(graphed.captures) == 1


@pytest.mark.gpu
@needs_gpu
def test_shapes_past_the_limit_run_eager_with_a_warning():
    task = copy_task(6, seq_len_min=2)
    model = small_dnc(task).cuda()
    graphed = GraphedTraining(model, max_captures=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for length in (2, 3, 4, 4):
            x = torch.zeros(2, length + 1, task.input_size, device="cuda")
            graphed(x, torch.zeros(2, length + 1, task.input_size, device="cuda")).sum().backward()
    assert len(graphed.captures) == 2
    assert sum("more than 2 input shapes" in str(w.message) for w in caught) == 1


@pytest.mark.gpu
@needs_gpu
def test_training_on_cuda_takes_the_capture_by_default_and_matches_eager():
    cfg = {"task": {"name": "copy", "seq_len": 4, "test_size": 64}, "model": {"name": "dnc", **MEMORY},
           "train": {"steps": 20, "batch_size": 8, "eval_every": 10, "eval_batches": 1, "device": "cuda"}}
    graphed = train(cfg, progress=False)
    eager = train({**cfg, "train": {**cfg["train"], "cuda_graph": False, "compile": False}}, progress=False)
    assert graphed.path == "cuda_graph" and eager.path == "eager"
    torch.testing.assert_close(torch.tensor(graphed.history["train_loss"]),
                               torch.tensor(eager.history["train_loss"]), rtol=1e-3, atol=1e-4)


def test_gpu_bench_section_is_skipped_without_cuda_and_renders_its_tables():
    from uwbench.bench import format_tables, gpu, run_benchmarks
    from uwbench.bench.workloads import PAPER
    from uwbench.training.config import resolve_run

    for settings in gpu.GPU_PATHS.values():  # every measurement's run is a valid configuration
        resolved = resolve_run(gpu.run_config(PAPER, 64, 10, settings))
        assert resolved.train.device == "cuda" and resolved.train.steps == 11
    if not torch.cuda.is_available():
        result = run_benchmarks("quick", sections=("gpu",), log=lambda msg: None)
        assert result["sections"]["gpu"] == {"skipped": gpu.unavailable_reason()}
        assert "GPU: skipped, no CUDA GPU" in format_tables(result)
    section = {"config": {"seq_len": 50, "updates": 300}, "device": {"name": "Some GPU", "memory_gb": 79.1},
               "paths": [{"batch": 64, "path": "cuda_graph", "status": "finished", "error": None,
                          "updates_per_s": 41.5, "first_update_s": 3.2, "peak_memory_mb": 212.0}],
               "sharing": [{"trials": 2, "updates_per_s_each": [30.0, 29.0], "updates_per_s_total": 59.0,
                            "wall_s": 12.0, "errors": ["CUDA out of memory"]}]}
    text = format_tables({"sections": {"gpu": section}, "targets": []})
    assert "| 64 | cuda_graph | 41.5 | 3.20 | 212.0 |" in text
    assert "| 2 | 59.0 | 30.0, 29.0 (1 failed: CUDA out of memory) | 12.0 |" in text


def test_gpu_bench_sharing_runs_trials_as_processes_and_sums_them(monkeypatch):
    """The sharing measurement's machinery (processes, their results, the sum), on tiny CPU runs."""
    from uwbench.bench import gpu

    tiny = {"task": {"name": "copy", "seq_len": 3, "test_size": 8}, "model": {"name": "lstm", "hidden_size": 8},
            "train": {"steps": 3, "batch_size": 4, "eval_every": 3, "eval_batches": 1, "checkpoint_every": 0,
                      "native": False}}  # the CPU stand-in for a GPU path: the lstm would otherwise run native
    monkeypatch.setattr(gpu, "run_config", lambda cfg, batch, updates, settings: tiny)
    monkeypatch.setattr(gpu, "SHARING", (1, 2))
    rows = gpu.sharing({}, 2, log=lambda msg: None)
    assert [r["trials"] for r in rows] == [1, 2] and all("errors" not in r for r in rows)
    assert [len(r["updates_per_s_each"]) for r in rows] == [1, 2] and rows[1]["finished"] == 2
    assert rows[1]["updates_per_s_total"] == pytest.approx(sum(rows[1]["updates_per_s_each"]), abs=0.2)
    assert rows[0]["paths"] == ["eager"]
