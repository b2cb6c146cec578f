"""robots.txt (RFC 9309) judged by a server on 127.0.0.1's own request log: what is disallowed is
never requested, robots.txt is fetched once per site even when threads ask at once, redirects
are followed (and checked), and an unreachable site is not crawled."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from crawlsched.drivers.fetching import PoliteHttp, RobotsDisallowed
from crawlsched.drivers.robots import RobotsCache
from crawlsched.drivers.targets import parse_networks
from tests.support.serving import running

LOOPBACK = parse_networks(["127.0.0.1/32"])
RULES = (
    b"User-agent: *\nDisallow: /private\nDisallow: /star-only\n\n"
    b"User-agent: crawlsched\nDisallow: /private\nDisallow: /no-bots\n"
)


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.log.append(self.path)
        if self.path == "/robots.txt":
            time.sleep(self.server.robots_delay_s)
            status, body, location = self.server.robots
        elif self.path == "/real-robots.txt":
            status, body, location = 200, RULES, None
        else:
            status, body, location = 200, b"<html>ok</html>", None
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def site():
    with running(_Site, log=[], robots=(200, RULES, None), robots_delay_s=0.0) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}", server


def _http(client: httpx.Client, cache: RobotsCache) -> PoliteHttp:
    return PoliteHttp(client, allowed_networks=LOOPBACK, robots=cache)


def _try(http: PoliteHttp, url: str) -> bool:
    try:
        http.get(url)
        return True
    except RobotsDisallowed:
        return False


def test_many_threads_asking_at_once_fetch_robots_txt_once(site):
    base, server = site
    server.robots_delay_s = 0.3  # every thread arrives while the first fetch is under way
    cache = RobotsCache()
    results: dict[str, bool] = {}
    with httpx.Client(timeout=10) as client:
        http = _http(client, cache)

        def visit(path: str) -> None:
            results[path] = _try(http, f"{base}{path}")

        paths = [f"/open/{i}" for i in range(6)] + [f"/private/{i}" for i in range(6)]
        threads = [threading.Thread(target=visit, args=(p,)) for p in paths]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert server.log.count("/robots.txt") == 1
    assert sorted(p for p in server.log if p != "/robots.txt") == sorted(paths[:6])
    assert results == {p: p.startswith("/open/") for p in paths}


def test_our_own_user_agent_group_applies(site):
    base, server = site
    with httpx.Client(timeout=10) as client:
        http = _http(client, RobotsCache())
        assert not _try(http, f"{base}/no-bots/page")  # the `crawlsched` group
        assert _try(http, f"{base}/star-only")  # that group replaces the `*` one
    assert "/no-bots/page" not in server.log


def test_robots_txt_is_read_again_after_its_ttl(site):
    base, server = site
    clock = [0.0]
    cache = RobotsCache(ttl_s=60, clock=lambda: clock[0])
    with httpx.Client(timeout=10) as client:
        http = _http(client, cache)
        assert _try(http, f"{base}/a")
        server.robots = (200, b"User-agent: *\nDisallow: /\n", None)
        clock[0] = 59.0
        assert _try(http, f"{base}/b")  # still the cached rules
        clock[0] = 61.0
        assert not _try(http, f"{base}/c")  # read again: now everything is disallowed
    assert server.log == ["/robots.txt", "/a", "/b", "/robots.txt"]


def test_a_redirected_robots_txt_is_followed(site):
    base, server = site
    server.robots = (301, b"", "/real-robots.txt")
    with httpx.Client(timeout=10) as client:
        http = _http(client, RobotsCache())
        assert not _try(http, f"{base}/private/x")
        assert _try(http, f"{base}/x")
    assert server.log == ["/robots.txt", "/real-robots.txt", "/x"]


def test_robots_txt_redirected_to_a_refused_address_disallows_the_site(site):
    base, server = site
    server.robots = (302, b"", "http://169.254.169.254/robots.txt")
    with httpx.Client(timeout=10) as client:
        assert not _try(_http(client, RobotsCache()), f"{base}/x")
    assert server.log == ["/robots.txt"]


def test_an_unreachable_site_is_disallowed_until_asked_again():
    with running(_Site, log=[]) as closed:
        base = f"http://127.0.0.1:{closed.server_address[1]}"
    # The server is gone: its port refuses connections.
    with httpx.Client(timeout=5) as client:
        assert not _try(_http(client, RobotsCache()), f"{base}/x")


@pytest.mark.parametrize("status", [500, 503])
def test_a_robots_txt_answering_5xx_disallows_the_site(site, status):
    # RFC 9309 2.3.1.4: a server error on robots.txt means complete disallow.
    base, server = site
    server.robots = (status, b"User-agent: *\nAllow: /\n", None)
    with httpx.Client(timeout=10) as client:
        http = _http(client, RobotsCache())
        assert not _try(http, f"{base}/x")
        assert not _try(http, f"{base}/y")
    assert server.log == ["/robots.txt"]  # no page of the site was requested


def test_a_robots_txt_answering_404_allows_the_site(site):
    base, server = site
    server.robots = (404, b"User-agent: *\nDisallow: /\n", None)
    with httpx.Client(timeout=10) as client:
        assert _try(_http(client, RobotsCache()), f"{base}/x")
    assert server.log == ["/robots.txt", "/x"]
