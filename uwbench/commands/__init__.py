"""One module per ``uwbench`` sub-command (see ``uwbench.cli``)."""
