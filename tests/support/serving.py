"""A test's own HTTP server on 127.0.0.1, stopped when the `with` block ends."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextlib.contextmanager
def running(
    handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1", **attributes: Any
) -> Iterator[ThreadingHTTPServer]:
    """Serve `handler`; `attributes` are set on the server (a request log the handler fills)."""
    httpd = ThreadingHTTPServer((host, 0), handler)
    httpd.daemon_threads = True
    for name, value in attributes.items():
        setattr(httpd, name, value)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def send_html(handler: BaseHTTPRequestHandler, body: bytes, status: int = 200) -> None:
    """Answer a request with an HTML page (a test site's usual answer)."""
    handler.send_response(status)
    handler.send_header("Content-Type", "text/html")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
