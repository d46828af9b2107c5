"""`uwbench demo`: the README's first command (`make demo`) — a small real job on the defaults."""
from __future__ import annotations

HELP = "run the demo: a short real training recorded in MLflow (what `make demo` runs)"


def add_arguments(p) -> None:
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///runs/mlflow.db)")


def run(args) -> int:
    from uwbench.commands import train as train_cmd

    argv = ["--task", "copy", "--model", "lstm", "--seq-len", "8", "--steps", "300", "--experiment", "demo"]
    if args.tracking_uri:
        argv += ["--tracking-uri", args.tracking_uri]
    import argparse

    p = argparse.ArgumentParser()
    train_cmd.add_arguments(p)
    return train_cmd.run(p.parse_args(argv))
