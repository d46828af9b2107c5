"""Experiment tracking. ``uwbench.tracking.mlflow`` is the only module that imports mlflow; import it
lazily (importing mlflow is slow enough to delay `uwbench --help`)."""
