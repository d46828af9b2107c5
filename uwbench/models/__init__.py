"""Models: importing this package registers every built-in model and controller."""
import importlib

# Each module registers its models on import; a module added later only needs a line here.
MODEL_MODULES = ("uwbench.models.controllers", "uwbench.models.lstm", "uwbench.models.dnc_memory",
                 "uwbench.models.ntm")
for _module in MODEL_MODULES:
    importlib.import_module(_module)
