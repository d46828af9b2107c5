"""Writing strategies: importing this package registers every built-in writer."""
import importlib

WRITER_MODULES = ()
for _module in WRITER_MODULES:
    importlib.import_module(_module)
