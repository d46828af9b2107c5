"""Values computed from what ``uwbench.report.data`` reads, the second stage of the report pipeline: frames,
dataclasses and numbers, never text tables or files.

- ``summary``: one row per cell over its finished final seeds (``summarize``), the study's status;
- ``labels``: how a cell is named (``model_label``) and which axes its name needs (``label_flags``);
- ``timing``: the time reduction of UW / CUW against regular writing, devices, how runs were trained;
- ``compute``: what the runs cost (``compute``, ``cpu_seconds``);
- ``pareto``: a multi-objective study's Pareto-optimal configurations (``pareto_points``);
- ``search``: a tuned study's search analysis (``analyse``: importance per cell, the figures to draw).

Imports ``uwbench.report.data`` only.
"""
