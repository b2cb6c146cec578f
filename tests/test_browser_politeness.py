"""A real Chrome's page loads keep the host's rules: the status its document was answered with
reaches the host's clock (a 429 blocks the host for every worker), and robots.txt is read
before a page is loaded. Judged by the host store and the site's own request log."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler

import httpx
import mongomock
import pytest

from crawlsched.drivers.browser_session import navigate, open_browser
from crawlsched.drivers.fetching import PoliteHttp, RobotsDisallowed
from crawlsched.drivers.robots import RobotsCache
from crawlsched.drivers.targets import parse_networks
from crawlsched.politeness.pacer import ClusterHostPacer, HostNotReady
from crawlsched.resources.host_rules import HostPolicy
from crawlsched.store.hosts import MongoHostStore
from tests.support.serving import running, send_html

LOOPBACK = parse_networks(["127.0.0.1/32"])


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.log.append(self.path)
        if self.path == "/robots.txt":
            body = b"User-agent: *\nDisallow: /private\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        status = 429 if self.path == "/busy" else 200
        send_html(self, b"<html><body>page</body></html>", status)

    def log_message(self, *args) -> None:
        pass


def _polite(client: httpx.Client, store: MongoHostStore) -> PoliteHttp:
    pacer = ClusterHostPacer(
        store,
        HostPolicy(0.0, 1, 0),
        slice_s=10.0,
        # Waits a moment for its own pacing (robots.txt just went), never through a block
        # (the first backoff is 1-2 s)
        max_sleep_s=0.5,
        clock=lambda: datetime.now(UTC),
        sleep=time.sleep,
        holder="p1",
        rng=random.Random(7),
    )
    return PoliteHttp(client, allowed_networks=LOOPBACK, pacer=pacer, robots=RobotsCache())


@pytest.fixture
def browser(chromedriver_node):
    with open_browser(chromedriver_node) as session:
        yield session


def test_a_page_chrome_was_answered_429_blocks_its_host(browser):
    store = MongoHostStore(mongomock.MongoClient(tz_aware=True).db)
    with running(_Site, log=[]) as site, httpx.Client(timeout=10) as client:
        origin = f"http://127.0.0.1:{site.server_address[1]}"
        http = _polite(client, store)
        # Given a page loaded fine (its 200 seen: no backoff)
        navigate(browser, f"{origin}/fine", http)
        assert (store.get(origin) or {}).get("backoff_tries", 0) == 0
        # When the browser loads a page the site answers 429
        with pytest.raises(HostNotReady) as told:
            navigate(browser, f"{origin}/busy", http)
        # Then the host is blocked for everyone, for the reason the site gave
        assert "HTTP 429" in told.value.why
        assert store.get(origin)["blocked_until"] > datetime.now(UTC)
        with pytest.raises(HostNotReady):
            navigate(browser, f"{origin}/later", http)
        # And robots.txt was read once, before the first page; /later was never asked for
        assert [p for p in site.log if p != "/favicon.ico"] == ["/robots.txt", "/fine", "/busy"]


def test_chrome_never_loads_a_page_robots_txt_disallows(browser):
    store = MongoHostStore(mongomock.MongoClient(tz_aware=True).db)
    with running(_Site, log=[]) as site, httpx.Client(timeout=10) as client:
        origin = f"http://127.0.0.1:{site.server_address[1]}"
        http = _polite(client, store)
        with pytest.raises(RobotsDisallowed):
            navigate(browser, f"{origin}/private/page", http)
        assert site.log == ["/robots.txt"]
