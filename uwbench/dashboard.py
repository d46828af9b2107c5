"""`make dashboard`: optuna-dashboard on an Optuna storage, answering only requests addressed to this machine.

optuna-dashboard's own server answers any ``Host`` header, so a web page the user opens elsewhere could,
by DNS rebinding (its own name pointed at 127.0.0.1), read the studies and delete them through the user's
browser. Here the dashboard's WSGI app (``optuna_dashboard.wsgi``) is served behind a check of the
``Host`` header: only ``127.0.0.1``, ``localhost`` and ``[::1]`` (with any port), and the host the server
was bound to, are answered; any other request, whatever its method, gets 403, as the MLflow UI does.

    python -m uwbench.dashboard [--host 127.0.0.1] [--port 8080] STORAGE   (a journal file or a database URL)
"""
from __future__ import annotations

import argparse
import sys
from socketserver import ThreadingMixIn
from typing import Callable, Iterable, List, Optional
from wsgiref.simple_server import WSGIServer, make_server

LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
WILDCARD_HOSTS = ("", "0.0.0.0", "::")  # binding to every address names no host a request may carry


def host_name(header: str) -> str:
    """The host of a ``Host`` header without its port (``[::1]:8080`` -> ``[::1]``), lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def allowed_hosts(bound: str) -> List[str]:
    """The hosts a request may name: this machine's loopback names, and the one the server is bound to."""
    hosts = list(LOCAL_HOSTS)
    if bound.lower() not in WILDCARD_HOSTS:
        hosts.append(bound.lower() if ":" not in bound or bound.startswith("[") else f"[{bound.lower()}]")
    return hosts


def host_checked(app: Callable, hosts: Iterable[str]) -> Callable:
    """``app`` answering only requests whose ``Host`` header names one of ``hosts``; others get 403."""
    allowed = {h.lower() for h in hosts}

    def checked(environ, start_response):
        host = host_name(environ.get("HTTP_HOST", ""))
        if host not in allowed:
            body = (f"403 Forbidden: the Host header {environ.get('HTTP_HOST', '')!r} is not this machine's "
                    f"(allowed: {', '.join(sorted(allowed))}); open the dashboard at http://127.0.0.1:PORT\n").encode()
            start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8"),
                                              ("Content-Length", str(len(body)))])
            return [body]
        return app(environ, start_response)

    return checked


class _ThreadedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def server(storage: str, host: str = "127.0.0.1", port: int = 8080):
    """The dashboard's WSGI server for ``storage`` (not yet serving: call ``serve_forever``)."""
    import optuna_dashboard

    app = host_checked(optuna_dashboard.wsgi(storage), allowed_hosts(host))
    return make_server(host, port, app, server_class=_ThreadedServer)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m uwbench.dashboard", description=__doc__.splitlines()[0])
    p.add_argument("storage", help="the Optuna storage: a journal file (runs/optuna/<study>.journal) or a database URL")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    args = p.parse_args(argv)
    httpd = server(args.storage, args.host, args.port)
    print(f"optuna-dashboard for {args.storage} at http://127.0.0.1:{httpd.server_port} (Ctrl-C stops it)",
          file=sys.stderr, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
