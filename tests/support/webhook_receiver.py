"""A local webhook receiver: answers 500 to the first `failures` POSTs, then 200; keeps them."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookReceiver:
    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.posts: list[dict[str, Any]] = []  # every POST: status answered, headers, body
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    status = 500 if len(receiver.posts) < receiver.failures else 200
                    receiver.posts.append(
                        {
                            "status": status,
                            "key": self.headers.get("Idempotency-Key"),
                            "body": json.loads(body),
                        }
                    )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def delivered(self) -> list[dict[str, Any]]:
        with self._lock:
            return [p for p in self.posts if p["status"] == 200]

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
