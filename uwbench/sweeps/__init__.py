"""Sweeps: a study spec (``uwbench.spec``) run by ``driver`` with an engine from ``backends`` (Optuna or
Ray Tune), sharing what a sweep plans (``planning``), one search-space grammar (``space``), one trial runner
(``common``), the study lock (``locks``), what the person running it sees (``display``) and the Optuna
storages (``storage``); ``restore`` puts a report's snapshot back into those stores.

Sweeps sit above ``uwbench.snapshot`` (the recorded runs, which ``restore`` reads) and below
``uwbench.report``, which reads a sweep's Optuna storage for its search analysis; they never import a report."""
