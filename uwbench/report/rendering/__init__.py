"""The report's text, figures and files, the last stage of the report pipeline and its only part that
writes: it lays out what ``data``, ``analysis`` and ``verdicts`` computed.

- ``text``: one value as a table shows it (``rounded``, ``csv_value``, ``int_text``, ``ours_text``, ...);
- ``tables``: the paper's layout, every cell, time, the Pareto front, as ``uwbench.tabular.Table`` objects;
- ``verdict_tables``, ``protocols``, ``search``: the Verdicts, Protocols and Search analysis sections;
- ``figures``, ``search_figures``: the figures (``uwbench.png.save_png`` writes them);
- ``render``: a report folder (``build_report``) and its README.md; ``page``: report.html;
- ``index``, ``readme_block``: the reports' index and the README's results block;
- ``falls``: a traced fall's files (``uwbench trace``); ``compare``: when two builds are the same.
"""
