"""A site that tells a test what reached it: the peer address, the path, the headers and the
body of each request, answered as JSON (and kept in `seen`)."""

from __future__ import annotations

import json
from typing import Any

from crawlsched.demo.serving import LocalSite, QuietHandler


class EchoSite(LocalSite):
    """`with EchoSite() as site:` on a 127.0.0.1 ephemeral port; `site.seen` lists what came."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                site._echo(self, b"")

            def do_POST(self) -> None:
                site._echo(self, self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        super().__init__(Handler)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def _echo(self, request: QuietHandler, body: bytes) -> None:
        seen = {
            "peer": request.client_address[0],
            "path": request.path,
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "body": body.decode(errors="replace"),
        }
        self.seen.append(seen)
        answer = json.dumps(seen).encode()
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(answer)))
        request.end_headers()
        request.wfile.write(answer)
