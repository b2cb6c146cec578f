"""A request handler base for the hostile sites of the tests: write a head, write a body and
notice when the crawler hung up (as it should, on a page too large or too slow)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


class StreamingHandler(BaseHTTPRequestHandler):
    def _head(self, status: int, content_type: str, length: int, extra=None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()

    def _send(self, status: int, body: bytes, content_type: str, extra=None) -> None:
        self._head(status, content_type, len(body), extra)
        self._write(body)

    def _write(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except OSError:
            return False  # the client hung up, as it should

    def log_message(self, *args) -> None:
        pass
