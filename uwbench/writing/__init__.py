"""Writing strategies: ``base.py`` holds the ``Writer`` contract; each other module is one writer, its
class and its config registered together. Importing this package registers every built-in writer.
The check that a plugin keeps the contract trains a smoke model, so it lives above training, in
``uwbench.leaderboard.contract``; the writers import nothing of training."""
import importlib

WRITER_MODULES = (
    "uwbench.writing.regular",
    "uwbench.writing.uniform",
    "uwbench.writing.cached_uniform",
    "uwbench.writing.random",
)
for _module in WRITER_MODULES:
    importlib.import_module(_module)
