"""The leaderboard (`uwbench leaderboard`, docs/design.md §15): a plugin writer or memory model ranked against
the paper's writers on the suite ``studies/leaderboard.yaml``, with significance and time.

It sits above ``report``: a board is computed from a snapshot (``uwbench.snapshot``) with the report's
tables, regime rule and tests, and ``report`` knows nothing of it (a board's folder is told apart by
``snapshot.folders``). Modules: ``steps`` (the command's steps: the plugin loaded, the row's study written,
its runs recorded, the board written), ``contract`` (the writer and model contract checked before any run),
``board`` (the numbers), ``render`` (the board's files) and ``readme`` (the README's board block).
"""
