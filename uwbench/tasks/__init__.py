"""Tasks: importing this package registers every built-in task in ``uwbench.registry.TASKS``.
``build_task(name, values)`` makes a task from its name and settings."""
import importlib

from uwbench.tasks.base import build_task  # noqa: F401  (the one task builder)

# Each module registers its tasks on import; a module added later only needs a line here.
TASK_MODULES = (
    "uwbench.tasks.synthetic",
    "uwbench.tasks.sinusoid",
    "uwbench.tasks.pixels",
    "uwbench.tasks.documents",
)
for _module in TASK_MODULES:
    importlib.import_module(_module)
