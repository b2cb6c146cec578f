"""Pages on 127.0.0.1 whose content only JavaScript writes: an HTTP fetch sees an empty body.

`/page/<name>` answers after `delay_s` (so a batch of pages takes a while) with a document whose
title and links are inserted by a script after a short timeout.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RENDERED_MARK = "rendered-by-js"

PAGE = """<!doctype html><html><head><title>loading</title></head><body>
<div id="app"></div>
<script>
setTimeout(function () {{
  document.title = "{name} {mark}";
  var app = document.getElementById("app");
  app.innerHTML = '<p>{mark}</p><a href="/page/{name}-a">a</a><a href="/page/{name}-b">b</a>';
}}, 50);
</script></body></html>"""


class JsSite:
    def __init__(self, delay_s: float = 0.0) -> None:
        delay = delay_s
        site = self
        self.served = 0  # pages answered so far: how far a crawl has gone

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not self.path.startswith("/page/"):
                    self.send_error(404)
                    return
                time.sleep(delay)
                site.served += 1
                name = self.path.removeprefix("/page/").strip("/") or "index"
                body = PAGE.format(name=name, mark=RENDERED_MARK).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> JsSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
