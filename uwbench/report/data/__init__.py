"""What a report reads, the first stage of the report pipeline (``uwbench.report``): nothing here computes
a result or writes a report file.

- ``study``: the study as the report sees it (``StudyView``: its cells, paper values, tolerance, objectives),
  from a spec file, a mapping or the runs alone; which run set of MLflow's to report (``select_run_set``);
- ``protocols``: the study's other run sets (``RunSet``, ``load_others``), read from their snapshot folders;
- ``traces``: memory traces recorded from finished runs' checkpoints, as 2-D arrays (``trace_arrays``);
- ``guard``: whose runs a report folder holds (its profiles), so no report replaces one of another profile.

Imports no other subpackage of ``uwbench.report``.
"""
