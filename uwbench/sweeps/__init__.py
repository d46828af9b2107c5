"""Sweeps: a study spec (``uwbench.spec``) run by ``driver`` with an engine from ``backends`` (Optuna or
Ray Tune), sharing one search-space grammar (``space``), one trial runner (``common``) and the Optuna
storages (``storage``)."""
