"""LocalSite: an HTTP server on a 127.0.0.1 port (ephemeral unless given), served by daemon
threads, as a context manager. The demo's sites (and the tests' sites) subclass it and give the
handler."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class LocalSite:
    def __init__(
        self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._server = ThreadingHTTPServer((host, port), handler)
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
        if self._thread.is_alive():  # shutdown() waits for a loop that was never started
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that keeps the console clean (no access log lines)."""

    def log_message(self, format: str, *args: object) -> None:
        pass
