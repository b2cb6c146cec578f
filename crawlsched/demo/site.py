"""A small website served on 127.0.0.1 for the demo: profile pages, articles, a few dead links."""

from __future__ import annotations

from crawlsched.demo.serving import LocalSite, QuietHandler

MISSING_PREFIX = "/gone/"  # always 404: shows failed jobs and their retry schedule


class _Handler(QuietHandler):
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


class DemoSite(LocalSite):
    """Serve on an ephemeral loopback port in a daemon thread; `with DemoSite() as site:`."""

    def __init__(self) -> None:
        super().__init__(_Handler)
