"""What a browser page loads by itself is held to the crawl's target rules.

A page on an allowed loopback address (127.0.0.2) frames, fetches, loads an image and a script
from, and then redirects itself to, a refused one (127.0.0.1, not allowed here). Through the
worker's filtering proxy that server logs no request at all, while the page and its own
same-origin fetch load. The same page without the proxy does reach it: the check can fail.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from structlog.testing import capture_logs

from crawlsched.drivers.browser_proxy import FilteringProxy
from crawlsched.drivers.browser_session import open_browser
from crawlsched.drivers.targets import parse_networks
from tests.support.waiting import wait_for

PAGE = """<!doctype html><html><head><title>hostile</title>
<script src="{bad}/script.js"></script></head><body>
<iframe src="{bad}/frame"></iframe><img src="{bad}/image.png">
<script>
fetch("{bad}/fetch").catch(() => null);
// The page's own fetch, read, is told back to its server (the test watches for that request:
// the document itself is gone once the page has redirected); only then does it redirect.
fetch("/ok").then(r => r.text())
  .then(t => fetch("/got-" + t))
  .then(() => setTimeout(() => {{ location.href = "{bad}/redirect"; }}, 400));
</script></body></html>"""


def _server(host: str, page: str = ""):
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = (page if self.path == "/page" else "yes").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if self.path == "/page" else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.fixture
def servers():
    refused, refused_seen = _server("127.0.0.1")
    bad = f"http://127.0.0.1:{refused.server_address[1]}"
    allowed, allowed_seen = _server("127.0.0.2", PAGE.format(bad=bad))
    yield f"http://127.0.0.2:{allowed.server_address[1]}", allowed_seen, refused_seen
    for server in (refused, allowed):
        server.shutdown()
        server.server_close()


def _visit(node: str, url: str, proxy_url: str | None, allowed_seen: list[str]) -> str:
    """Load the page; what its own fetch read (told back to its server as `/got-<text>`:
    read from the server's log, not from the document, which a loaded machine may already
    have left for the redirect when the test looks)."""
    with open_browser(node, proxy_url=proxy_url) as browser:
        browser.get(f"{url}/page")
        told = wait_for(
            lambda: [p for p in allowed_seen if p.startswith("/got-")], 30, "the page's own fetch"
        )
        time.sleep(1.0)  # the page redirects itself 0.4 s later: give it the time to try
        return told[0].removeprefix("/got-")


def test_page_loads_through_the_proxy_and_reaches_no_refused_address(chromedriver_node, servers):
    url, allowed_seen, refused_seen = servers
    proxy = FilteringProxy(parse_networks(["127.0.0.2/32"])).start()
    try:
        with capture_logs() as logs:
            assert _visit(chromedriver_node, url, proxy.url, allowed_seen) == "yes"
    finally:
        proxy.stop()
    assert allowed_seen[:1] == ["/page"] and "/ok" in allowed_seen
    assert refused_seen == []  # not the frame, fetch, image, script or redirect
    assert any(entry.startswith("127.0.0.1:") for entry in proxy.refused)
    # Each refusal is logged with its reason, as information: a page's (or Chrome's own)
    # requests for refused addresses are not the worker's warnings.
    refusals = [e for e in logs if e["event"] == "browser_request_refused"]
    assert any("127.0.0.1" in e["reason"] and e["host"] == "127.0.0.1" for e in refusals)
    assert {e["log_level"] for e in refusals} == {"info"}
    assert [e for e in logs if e["log_level"] in ("warning", "error")] == []


def test_without_the_proxy_the_same_page_reaches_the_refused_address(chromedriver_node, servers):
    url, allowed_seen, refused_seen = servers
    assert _visit(chromedriver_node, url, None, allowed_seen) == "yes"
    assert {"/frame", "/fetch"} <= set(refused_seen)
