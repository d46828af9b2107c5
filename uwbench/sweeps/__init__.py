"""Sweeps: a study spec (``uwbench.spec``) run by Optuna (``optuna_backend``) or Ray Tune
(``ray_backend``), sharing one search-space grammar (``space``) and one trial runner (``common``)."""
