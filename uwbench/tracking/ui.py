"""Links into the MLflow UI (docs/design.md §9.3): the one place that builds them.

MLflow 3 opens an experiment page in its GenAI view (traces, token usage) unless the URL asks for the
model-training view, so every link uwbench prints or writes carries ``workflowType=machine_learning``::

    http://127.0.0.1:5000/#/experiments/<experiment id>?workflowType=machine_learning

which opens the experiment's runs table: one parent run per cell with its training runs nested under it.
A local store is browsed with ``make mlflow-ui`` (``mlflow ui`` on 127.0.0.1:5000); a tracking server is
its own UI, so its links use the server's address.

``python -m uwbench.tracking.ui [--tracking-uri URI] [--port N] [EXPERIMENT ...]`` prints the link of
every experiment in a store (what ``make mlflow-ui`` shows before it starts the UI). Nothing here
creates a store or an experiment.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Iterable, List, Optional, Tuple

HOST = "127.0.0.1"
PORT = 5000  # `make mlflow-ui` serves here (its MLFLOW_PORT)
WORKFLOW = "machine_learning"  # MLflow's model-training view: the runs table, not the GenAI traces
SERVE_LOCAL = "make mlflow-ui"
HIDDEN_EXPERIMENTS = ("Default",)  # MLflow's own experiment 0, empty unless something logs without one


def is_server(uri: Optional[str]) -> bool:
    return bool(uri) and uri.startswith(("http://", "https://"))


def ui_base(tracking_uri: Optional[str] = None, port: int = PORT) -> str:
    """The UI's address: the tracking server itself, or ``mlflow ui`` on 127.0.0.1 for a local store."""
    if is_server(tracking_uri):
        return tracking_uri.rstrip("/")
    return f"http://{HOST}:{port}"


def experiment_url(experiment_id: str, tracking_uri: Optional[str] = None, port: int = PORT) -> str:
    """The experiment's runs table in the model-training view."""
    if not str(experiment_id).strip():
        raise ValueError("an MLflow experiment id is needed to link to its runs table, got an empty one")
    return f"{ui_base(tracking_uri, port)}/#/experiments/{experiment_id}?workflowType={WORKFLOW}"


def serve_hint(tracking_uri: Optional[str] = None, port: int = PORT) -> str:
    """How to start a UI for this store: nothing for a server, `make mlflow-ui` for the default store,
    else the `mlflow ui` command line for that store."""
    from uwbench.tracking import mlflow as tracking

    if is_server(tracking_uri):
        return ""
    uri = tracking_uri or tracking.default_tracking_uri()
    path = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None
    if path is not None:
        path = os.path.abspath(path)
        if path == os.path.abspath(os.path.join("runs", "mlflow.db")):  # the store `make mlflow-ui` serves
            return SERVE_LOCAL
        uri = f"sqlite:///{path}"
    return (f"MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false mlflow ui --host {HOST} --port {port} --workers 1 "
            f"--backend-store-uri {uri}")


def experiment_ids(tracking_uri: Optional[str] = None, names: Iterable[str] = ()) -> List[Tuple[str, str]]:
    """(name, id) of the active experiments of a store, all or the named ones, in id order; [] when a
    local store does not exist yet (it is not created)."""
    from uwbench.tracking import mlflow as tracking

    if not tracking.store_exists(tracking_uri):
        return []
    client = tracking.client(tracking_uri)
    wanted = list(names)
    if wanted:
        found = [client.get_experiment_by_name(n) for n in wanted]
        exps = [e for e in found if e is not None and e.lifecycle_stage != "deleted"]
    else:
        exps = [e for e in client.search_experiments() if e.name not in HIDDEN_EXPERIMENTS]
    return sorted(((e.name, str(e.experiment_id)) for e in exps), key=lambda p: (_id_key(p[1]), p[0]))


def _id_key(experiment_id: str):
    return (0, int(experiment_id), "") if experiment_id.isdigit() else (1, 0, experiment_id)


def link_line(experiment: str, experiment_id: Optional[str] = None, tracking_uri: Optional[str] = None,
              port: int = PORT) -> str:
    """One line to print after a command: the experiment's runs table and how to serve the UI. The id is
    looked up by name when not given; an experiment that is not there gives a line saying so."""
    if experiment_id is None:
        found = dict(experiment_ids(tracking_uri, [experiment]))
        experiment_id = found.get(experiment)
    if experiment_id is None:
        return f"MLflow: no experiment {experiment!r} in this store yet"
    hint = serve_hint(tracking_uri, port)
    how = f" (start the UI with `{hint}`)" if hint else ""
    return f"MLflow UI, experiment {experiment!r}: {experiment_url(experiment_id, tracking_uri, port)}{how}"


def study_hint(study_id: str, port: int = PORT) -> str:
    """What a report says about the UI (Markdown). A report is computed from its snapshot alone, which does
    not know the store (nor so the experiment's id in it): the hint names the command that prints the link."""
    code = lambda text: f"`{text}`"  # noqa: E731
    return (f"{code(SERVE_LOCAL)} serves the MLflow store and prints the link to experiment {code(study_id)}'s "
            f"runs table, {code(f'http://{HOST}:{port}/#/experiments/<id>?workflowType={WORKFLOW}')} "
            "(the id is the one in your store)")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m uwbench.tracking.ui",
                                description="print the MLflow UI link of each experiment's runs table")
    p.add_argument("experiments", nargs="*", metavar="EXPERIMENT", help="experiment names (default: all)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///runs/mlflow.db)")
    p.add_argument("--port", type=int, default=PORT, help=f"the UI's port (default {PORT})")
    args = p.parse_args(argv)
    base = ui_base(args.tracking_uri, args.port)
    found = experiment_ids(args.tracking_uri, args.experiments)
    missing = [n for n in args.experiments if n not in dict(found)]
    if not found:
        print(f"MLflow UI: {base} (no experiments recorded yet: `make demo` or `uwbench sweep` makes some)")
    else:
        print(f"MLflow UI: {base}. Each experiment's runs table (model-training view):")
        width = max(len(name) for name, _ in found)
        for name, exp_id in found:
            print(f"  {name:<{width}}  {experiment_url(exp_id, args.tracking_uri, args.port)}")
    for name in missing:
        print(f"  {name}: no such experiment in this store", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
