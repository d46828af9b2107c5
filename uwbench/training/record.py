"""What the trainer records in its MLflow run (docs/design.md §9.1): the resolved config and the run's
facts when it opens, a learning-curve point per evaluation, the final numbers and the best weights at
the end, and the status it ends with. The metric names come from ``uwbench.metrics``."""
from __future__ import annotations

from typing import Dict, Optional

import torch

from uwbench import metrics
from uwbench.config import flatten


class MetricKeys:
    """The MLflow names of one task's metrics (``eval_accuracy``, ``best_eval_accuracy``,
    ``test_accuracy``)."""

    def __init__(self, measure: str):
        self.eval = metrics.metric("eval", measure).key
        self.best_eval = metrics.metric("best_eval", measure).key
        self.test = metrics.metric("test", measure).key


def open_run(run, resolved, result, saved: Optional[Dict], resumes: int, device) -> None:
    """A fresh run gets the config as params and ``config.json``; a resumed one the curve points logged
    before the kill but missing from MLflow (from the checkpoint's curve). Both get the run's tags and
    provenance."""
    result.run_id = run.run_id
    run.skip_logged_metrics()  # a resumed run never logs a (metric, step) point twice
    if saved is None:
        cfg_dict = resolved.as_dict()
        run.log_params(flatten(cfg_dict))
        run.log_dict(cfg_dict, "config.json")
    else:
        run.delete_tags(["error", "status"])  # the interruption's; the run goes on
        h = result.history
        for i, s in enumerate(h["step"]):
            run.log_metrics({k: h[k][i] for k in h if k != "step" and h[k][i] is not None}, s)
    run.set_tags({"num_parameters": result.num_parameters, "device": str(device),
                  "torch_threads": result.threads, "resumes": resumes,
                  "compiled": result.path == "compiled", "path": result.path,
                  **({"path_reason": result.path_reason[:1000]} if result.path_reason else {})})
    run.log_provenance("provenance" if saved is None else f"provenance/resume-{resumes}")


def log_evaluation(run, keys: MetricKeys, step: int, mean_loss: float, value: float, sec100: float,
                   grad_size: float) -> None:
    run.log_metrics({"train_loss": mean_loss, keys.eval: value, "seconds_per_100": sec100,
                     metrics.GRAD_NORM: grad_size},
                    step)


def log_final(run, keys: MetricKeys, result, counters, best_state) -> None:
    """The run's final numbers (at its last update) and its best weights as the ``checkpoint/best.pt``
    artifact."""
    run.log_metrics({keys.test: result.test, "train_seconds": result.train_seconds,
                     "mean_seconds_per_100": result.seconds_per_100,
                     "mean_cpu_seconds_per_100": result.cpu_seconds_per_100,
                     "first_update_seconds": result.first_update_seconds, "eval_seconds": result.eval_seconds,
                     "test_seconds": result.test_seconds, keys.best_eval: result.best_eval,
                     "checkpoint_seconds": result.checkpoint_seconds,
                     "resume_warmup_seconds": counters.resume_warmup_seconds if counters.resumes else None},
                    result.steps_done)
    run.log_bytes(lambda p: torch.save(best_state, p), "best.pt", "checkpoint")


def fail(run, exc: BaseException) -> None:
    """End a run the trainer has not ended (an error before or outside the loop: a model that cannot be
    built, a checkpoint that cannot be read): status ``failed`` and the error as tags, MLflow status FAILED
    (KILLED when interrupted). A run already ended keeps its status; a store that cannot be written to
    any more is left as it is (its error is the one the caller sees)."""
    if run is None or getattr(run, "ended", False):
        return
    interrupted = isinstance(exc, KeyboardInterrupt)
    try:
        run.set_tags({"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:5000]})
        run.end("KILLED" if interrupted else "FAILED")
    except Exception:  # noqa: BLE001 - the original error matters more than this one
        pass


def finish(run, result, status: str) -> None:
    """End the run (``FINISHED``, ``FAILED``, ``KILLED``) with the result's status and error as tags."""
    if run is None:
        return
    tags = {"status": result.status}
    if result.error:
        tags["error"] = result.error[:5000]
    run.set_tags(tags)
    run.end(status)
