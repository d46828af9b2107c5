"""Whether the paper's claims and orderings hold in the runs, and whether their budget can tell: the third
stage of the report pipeline, from ``uwbench.report.analysis``'s summaries.

- ``claims``: the paper's claims as data (``CLAIMS``);
- ``regime``: has a cell converged (rising, falling, at the guessing level, collapsed late);
- ``stats``: Welch's t-test, Holm's correction, Kendall's tau-b;
- ``judge``: the claims and orderings checked by the one rule (``build`` returns a ``Verdicts``);
- ``protocols``: the study's run sets compared cell by cell (``side_by_side``, ``points``).

Values only: their tables and CSVs are ``uwbench.report.rendering``'s. Imports ``data`` and ``analysis``.
"""
