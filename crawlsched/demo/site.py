"""A small website served on 127.0.0.1 for the demo: profile pages, articles, a few dead links."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MISSING_PREFIX = "/gone/"  # always 404: shows failed jobs and their retry schedule


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith(MISSING_PREFIX):
            self.send_error(404, "gone")
            return
        parts = [p for p in self.path.split("/") if p]
        title = " / ".join(parts) or "home"
        links = "".join(f'<a href="/{"/".join(parts)}/post-{i}">post {i}</a>' for i in range(3))
        body = f"<html><head><title>{title}</title></head><body>{links}</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # keep the live view clean
        pass


class DemoSite:
    """Serve on an ephemeral loopback port in a daemon thread; `with DemoSite() as site:`."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> DemoSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
