"""Experiment tracking: ``mlflow`` (the system of record, and the only module that imports mlflow: import it
lazily, importing mlflow is slow enough to delay `uwbench --help`), ``provenance`` (a run's commit, software
and machine) and ``ui`` (links into the MLflow UI)."""
