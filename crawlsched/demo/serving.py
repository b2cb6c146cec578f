"""LocalSite: an HTTP server on an ephemeral 127.0.0.1 port, served by daemon threads, as a
context manager. The demo's sites (and the tests' sites) subclass it and give the handler."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class LocalSite:
    def __init__(self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1") -> None:
        self._server = ThreadingHTTPServer((host, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that keeps the console clean (no access log lines)."""

    def log_message(self, format: str, *args: object) -> None:
        pass
