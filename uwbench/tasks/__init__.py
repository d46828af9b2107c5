"""Tasks: importing this package registers every built-in task in ``uwbench.registry.TASKS``."""
import importlib

# Each module registers its tasks on import; a module added later only needs a line here.
TASK_MODULES = ("uwbench.tasks.synthetic",)
for _module in TASK_MODULES:
    importlib.import_module(_module)
