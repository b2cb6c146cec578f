"""The browser's filtering proxy on its own (no Chrome): plain-http absolute-URI requests and
CONNECT tunnels reach only checked addresses, with the same rules and the same rebinding
defence as the crawl's client. Names are mapped by an injected resolver (no real DNS); the
upstream server on 127.0.0.1 logs what reached it."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from crawlsched.drivers.browser_proxy import FilteringProxy
from crawlsched.drivers.targets import parse_networks
from tests.support.serving import running

LOOPBACK = parse_networks(["127.0.0.1/32"])


class _Recorder(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.seen.append((self.headers.get("Host"), self.path))
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def upstream():
    with running(_Recorder, seen=[]) as server:
        yield server


@pytest.fixture
def proxy_for():
    started: list[FilteringProxy] = []

    def start(allowed, resolver) -> FilteringProxy:
        started.append(FilteringProxy(allowed, resolver=resolver).start())
        return started[-1]

    yield start
    for proxy in started:
        proxy.stop()


def _connect(proxy: FilteringProxy, target: str) -> bytes:
    host, port = proxy.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        status = sock.recv(1024)
        if b" 200 " not in status:
            return status
        # Through the tunnel: a plain HTTP request to whatever the proxy connected to.
        sock.sendall(b"GET /tunnelled HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
        return status + reply


def test_an_allowed_name_is_fetched_at_its_checked_address(upstream, proxy_for):
    port = upstream.server_address[1]
    proxy = proxy_for(LOOPBACK, lambda host, _: ["127.0.0.1"])
    with httpx.Client(proxy=proxy.url, timeout=10) as client:
        response = client.get(f"http://site.test:{port}/page")
    assert response.text == "hello"
    assert upstream.seen == [(f"site.test:{port}", "/page")]


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.5", "169.254.169.254"])
def test_a_name_resolving_to_a_refused_address_gets_403_and_no_connection(
    upstream, proxy_for, address
):
    port = upstream.server_address[1]
    # Not allowed: the name looks public but resolves (here, or after a rebinding) inward.
    proxy = proxy_for((), lambda host, _: ["93.184.216.34", address])
    with httpx.Client(proxy=proxy.url, timeout=10) as client:
        assert client.get(f"http://rebind.test:{port}/secret").status_code == 403
    assert _connect(proxy, f"rebind.test:{port}").startswith(b"HTTP/1.1 403")
    assert upstream.seen == []
    assert list(proxy.refused) == [f"rebind.test:{port}"] * 2


def test_connect_tunnels_to_an_allowed_target_only(upstream, proxy_for):
    port = upstream.server_address[1]
    proxy = proxy_for(LOOPBACK, lambda host, _: ["127.0.0.1"])
    assert b"hello" in _connect(proxy, f"site.test:{port}")
    assert upstream.seen == [("site.test", "/tunnelled")]
    assert _connect(proxy, "site.test:99999").startswith(b"HTTP/1.1 403")


def test_only_absolute_http_requests_are_relayed(upstream, proxy_for):
    proxy = proxy_for(LOOPBACK, lambda host, _: ["127.0.0.1"])
    host, port = proxy.server_address[:2]
    for line in ("GET /relative HTTP/1.1", "GET ftp://site.test/x HTTP/1.1"):
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(f"{line}\r\nHost: x\r\n\r\n".encode())
            assert sock.recv(1024).startswith(b"HTTP/1.1 400")
    assert upstream.seen == []
