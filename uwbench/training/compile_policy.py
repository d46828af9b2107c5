"""Which execution path a run takes: the ``train.native`` and ``train.compile`` settings.

Three paths compute the same function (each checked against the plain one in the tests): ``native``,
the memory models' whole sequence through C++ kernels as one autograd node (``models/native.py``, the
fastest by far on a CPU and without a compilation to wait for); ``compiled``, the per-step function
under ``torch.compile``; ``eager``, plain torch.

``train.native``: ``true`` takes the native path or fails naming why it cannot (the part without a
kernel: a GRU controller, a plugin writer's own attention; a CUDA device; no C++ compiler);
``false`` never takes it; ``auto``, the default, takes it wherever it applies (every part of the model
declares a kernel, ``models/native.py``), unless ``train.compile=true`` asks for the compiled path.
Where ``auto`` cannot take it (a part without a kernel, CUDA) the run goes on with the rules below
(on CUDA ``train.cuda_graph`` first, then ``train.compile``), and the run's ``path_reason`` tag says
why; a missing compiler or a declaration that disagrees with its kernel is also reported as a
warning. ``native=true`` with ``compile=true`` is an error: they are two paths.

``train.cuda_graph`` (on CUDA, where the native path does not run): ``true`` captures the model's whole
training forward and its backward as CUDA graphs (``models/cuda_graph.py``) or fails naming why it
cannot; ``false`` never does; ``auto``, the default, does so wherever it applies (a CUDA device, a model
marked ``capturable``: the memory models and the lstm baseline, a task without per-sequence lengths)
unless ``train.compile=true`` asks for
the compiled path, whose steps are captured one kind at a time instead. The capture happens in the
first update, whose time is recorded on its own. ``cuda_graph=true`` with ``compile=true`` is an error.

``train.compile`` (on runs that take neither path above): ``true`` and ``false`` are obeyed as
given (``false`` is the eager path). ``auto``, the default, compiles when the time compiling saves over
the run exceeds what the compilation costs, from two figures measured on a 2-core CPU machine
(benchmarks/README.md, "Fast by default"):

    saved    = updates x (encoder + decoder steps per sequence) x model.compiled_step_saving
    compile  = COMPILE_SECONDS (a cold compile of one model's steps; Inductor's on-disk cache under
               runs/ makes later ones cheaper, which this leaves as a margin)

Each model states its saving per step (``compiled_step_saving``; the DNC's and NTM's hardly depend on
their sizes, since the eager step's cost is its operator calls). The measurements behind both figures,
and the runs they decide, are in benchmarks/README.md, "Fast by default": the paper's copy run compiles,
while the quickstart's CPU profile and the test suite's tiny runs stay eager, since their compilation
would cost more than it saves. Models without a step function (``compile_steps``) stay eager under
``auto``, and so does the LSTM baseline, whose compiled step gains too little and too unsteadily to
count on (``compiled_step_saving = 0``); ``true`` on a model without a step function is an error.
"""
from __future__ import annotations

import warnings
from typing import Optional, Tuple, Union

from uwbench.errors import UserError

COMPILE_SECONDS = 40.0  # a cold compile of a DNC's kinds of step (benchmarks/README.md, "Fast by default")

def estimated_saving(updates: int, steps_per_sequence: int, saving_per_step: float) -> float:
    """Seconds the compiled step saves over ``updates`` updates of ``steps_per_sequence`` steps each."""
    return updates * steps_per_sequence * saving_per_step


def should_compile(setting: Union[bool, str], saving_per_step: Optional[float], updates: int,
                   steps_per_sequence: Optional[int]) -> bool:
    """The decision for one run: ``setting`` is ``TrainConfig.compile`` (True, False or "auto");
    ``saving_per_step`` the model's ``compiled_step_saving`` (None: it has no step to compile)."""
    if setting is True or setting is False:
        return setting
    if setting != "auto":
        raise UserError(f"`train.compile` must be auto, true or false, got {setting!r}")
    if not saving_per_step or steps_per_sequence is None:
        return False
    return estimated_saving(updates, steps_per_sequence, saving_per_step) > COMPILE_SECONDS


def _check_setting(name: str, setting, compile_setting) -> None:
    """``train.<name>`` is auto, true or false, and true does not come with ``train.compile=true``."""
    if setting is not True and setting is not False and setting != "auto":
        raise UserError(f"`train.{name}` must be auto, true or false, got {setting!r}")
    if setting is True and compile_setting is True:
        raise UserError(f"train.{name}=true and train.compile=true ask for two different paths: set one of "
                         "them to false")


def native_decision(model, model_name: str, native, compile_setting) -> bool:
    """Whether the run takes the native path (see the module docstring); raises ``ValueError`` for a
    ``native=true`` the model cannot have."""
    return native_choice(model, model_name, native, compile_setting)[0]


def native_choice(model, model_name: str, native, compile_setting) -> Tuple[bool, Optional[str]]:
    """``native_decision`` and, when the run does not take the native path, why not (the run's
    ``path_reason`` tag): the setting, or the model part without a kernel, the device, a declaration
    that disagrees with its kernel, no compiler."""
    _check_setting("native", native, compile_setting)
    if native is False:
        return False, "train.native=false"
    if getattr(model, "use_native", None) is None:
        if native is True:
            raise UserError(f"train.native=true needs a model with native parts (dnc, ntm or lstm), got "
                             f"{model_name!r}; set train.native=auto or false")
        return False, f"the model {model_name!r} has no native path"
    if native is True:
        return True, None  # model.use_native raises with the reason if it cannot
    if compile_setting is True:
        return False, "train.compile=true asks for the compiled path"
    from uwbench import native as kernels
    from uwbench.models.native import checked_kernels, unsupported_reason

    param = next(model.parameters())
    reason = unsupported_reason(model, param.device, param.dtype)
    if reason is not None:
        return False, reason
    try:
        checked_kernels(model)  # builds the kernels and checks the parts' declarations against them
    except kernels.NativeUnavailable as exc:
        warnings.warn(f"the native path is unavailable, the run takes the torch path: {exc}", stacklevel=2)
        return False, str(exc)
    return True, None


def cuda_graph_decision(model, setting, compile_setting, device, lengths: bool = False) -> bool:
    """Whether the run captures its training forward and backward as CUDA graphs (see the module
    docstring; ``lengths``: the task's batches carry per-sequence lengths); raises ``ValueError`` for a
    ``cuda_graph=true`` the model, task or device cannot have."""
    _check_setting("cuda_graph", setting, compile_setting)
    if setting is False:
        return False
    from uwbench.models.cuda_graph import unsupported_reason

    reason = unsupported_reason(model, device, lengths)
    if setting is True:
        if reason is not None:
            raise UserError(f"train.cuda_graph=true cannot run this model: {reason}; set train.cuda_graph=auto "
                             "or false")
        return True
    return reason is None and compile_setting is not True
