from uwbench.cli import run

run()
