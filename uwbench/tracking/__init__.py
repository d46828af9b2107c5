"""Experiment tracking. ``uwbench.tracking.mlflow`` is the only module that imports mlflow; import it
lazily (it costs about 1.5 s)."""
