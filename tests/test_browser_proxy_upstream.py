"""The browser's filtering proxy chained to an upstream proxy (the account's): an allowed target
is reached through the upstream, whose outgoing address the site sees, and the upstream's
credentials go to it alone; a refused target is refused before the upstream hears of it; a dead
or unwilling upstream is a 502 the caller can tell from a failing site. Names are mapped by an
injected resolver (no real DNS)."""

from __future__ import annotations

import socket

import httpx
import pytest

from crawlsched.demo.forward_proxy import ForwardProxy
from crawlsched.drivers.browser_proxy import FilteringProxy
from crawlsched.drivers.targets import parse_networks
from crawlsched.drivers.upstream import Upstream
from tests.support.echo_site import EchoSite

LOOPBACK = parse_networks(["127.0.0.1/32"])


@pytest.fixture
def site():
    with EchoSite() as running:
        yield running


@pytest.fixture
def forward():
    with ForwardProxy("127.0.0.5", "carol", "s3cret") as proxy:
        yield proxy


@pytest.fixture
def filtering_for():
    started: list[FilteringProxy] = []

    def start(upstream: Upstream, resolved: str = "127.0.0.1") -> FilteringProxy:
        proxy = FilteringProxy(LOOPBACK, resolver=lambda host, _: [resolved], upstream=upstream)
        started.append(proxy.start())
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


def test_upstream_carries_an_allowed_request_from_its_own_address(site, forward, filtering_for):
    proxy = filtering_for(Upstream.from_url(forward.url, "carol", "s3cret"))
    with httpx.Client(proxy=proxy.url, timeout=10) as client:
        response = client.get(f"http://site.test:{site.port}/page", headers={"Cookie": "a=1"})
    assert response.status_code == 200
    seen = response.json()
    assert seen["peer"] == "127.0.0.5"  # the forward proxy's outgoing address
    assert seen["headers"]["host"] == f"site.test:{site.port}"
    assert "proxy-authorization" not in seen["headers"]
    # The upstream was asked for a tunnel to the checked address, as carol
    [tunnel] = forward.log
    assert (tunnel.method, tunnel.target_host, tunnel.target_port) == (
        "CONNECT", "127.0.0.1", site.port,
    )  # fmt: skip
    assert (tunnel.status, tunnel.client_user) == (200, "carol")
    assert proxy.upstream_failures == 0


def test_upstream_carries_a_connect_tunnel(site, forward, filtering_for):
    proxy = filtering_for(Upstream.from_url(f"http://carol:s3cret@127.0.0.1:{forward.port}"))
    host, port = proxy.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(f"CONNECT site.test:{site.port} HTTP/1.1\r\n\r\n".encode())
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /tunnelled HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    assert b"200" in reply.split(b"\r\n", 1)[0]
    assert [(s["peer"], s["path"]) for s in site.seen] == [("127.0.0.5", "/tunnelled")]


@pytest.mark.parametrize("address", ["10.0.0.5", "169.254.169.254", "127.0.0.9"])
def test_a_refused_target_never_reaches_the_upstream(site, forward, filtering_for, address):
    proxy = filtering_for(Upstream.from_url(forward.url, "carol", "s3cret"), resolved=address)
    with httpx.Client(proxy=proxy.url, timeout=10) as client:
        assert client.get(f"http://inward.test:{site.port}/secret").status_code == 403
    assert forward.log == [] and forward.requests == 0
    assert site.seen == []
    assert proxy.upstream_failures == 0
    assert list(proxy.refused) == [f"inward.test:{site.port}"]


def test_a_dead_upstream_is_a_502_counted_as_an_upstream_failure(site, forward, filtering_for):
    proxy = filtering_for(Upstream.from_url(forward.url, "carol", "s3cret"))
    forward.mode = "refuse"
    with httpx.Client(proxy=proxy.url, timeout=10) as client:
        assert client.get(f"http://site.test:{site.port}/page").status_code == 502
        assert proxy.upstream_failures == 1
        forward.mode = "ok"
        assert client.get(f"http://site.test:{site.port}/page").status_code == 200
    assert proxy.upstream_failures == 1
    assert [s["path"] for s in site.seen] == ["/page"]


def test_wrong_upstream_credentials_are_a_502_and_an_upstream_failure(site, forward, filtering_for):
    proxy = filtering_for(Upstream.from_url(forward.url, "carol", "wrong"))
    with httpx.Client(proxy=proxy.url, timeout=10) as client:
        assert client.get(f"http://site.test:{site.port}/page").status_code == 502
    assert proxy.upstream_failures == 1
    assert [r.status for r in forward.log] == [407]
    assert site.seen == []


def test_only_an_http_upstream_chains_the_browser():
    with pytest.raises(ValueError, match="only http upstream") as raised:
        FilteringProxy(LOOPBACK, upstream=Upstream.from_url("socks5://u:pw@proxy.test:1080"))
    assert "pw" not in str(raised.value)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://proxy.test:21", "scheme"),
        ("proxy.test:8080", "scheme"),
        ("http://:8080", "host"),
        ("http://proxy.test:0", "port"),
        ("http://proxy.test:70000", "not valid"),
        ("http://proxy.test:port", "not valid"),
    ],
)
def test_upstream_from_url_refuses_what_is_not_a_proxy(url, message):
    with pytest.raises(ValueError, match=message):
        Upstream.from_url(url)


def test_upstream_from_url_reads_credentials_and_never_shows_the_password():
    upstream = Upstream.from_url("http://ann%40x:p%3Aw@proxy.test:3128")
    assert (upstream.username, upstream.password) == ("ann@x", "p:w")
    assert Upstream.from_url("http://a:b@proxy.test", "carol", "pw").username == "carol"
    assert Upstream.from_url("https://proxy.test").port == 443
    assert Upstream.from_url("socks5://[::1]:9050").redacted() == "socks5://[::1]:9050"
    assert upstream.redacted() == "http://***@proxy.test:3128"
    assert "p:w" not in repr(upstream) and "p:w" not in upstream.redacted()
    with pytest.raises(ValueError, match="password"):
        Upstream("http", "proxy.test", 80, None, "pw")
