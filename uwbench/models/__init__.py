"""Models: importing this package registers every built-in model and controller.

The interface and builder (``base``), controllers (``controllers``), the LSTM baseline (``lstm``), the
memory-model frame (``mann``) over the ``Memory`` contract (``memory_base``) with the DNC's and the NTM's
memories (``dnc_memory``, ``ntm``); the other execution paths of the same models: native (``native``,
``native_cell``), CUDA graphs (``cuda_graph``), a population as one model (``stacked``); parameter counts
(``params``)."""
import importlib

# Each module registers its models on import; a module added later only needs a line here.
MODEL_MODULES = ("uwbench.models.controllers", "uwbench.models.lstm", "uwbench.models.dnc_memory",
                 "uwbench.models.ntm")
for _module in MODEL_MODULES:
    importlib.import_module(_module)
