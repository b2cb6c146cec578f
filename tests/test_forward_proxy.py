"""The project's own forward proxy: a site behind it sees the proxy's outgoing address and never
its credentials; plain-http requests and CONNECT tunnels go through; each fault mode does what
a client meets with a real proxy (refused, stalled, blocked); the log says what went through."""

from __future__ import annotations

import json
import socket
import threading

import httpx
import pytest

from crawlsched.demo.forward_proxy import ForwardProxy, ProxyRequest
from tests.support.echo_site import EchoSite
from tests.support.waiting import wait_for


def _closed_by_peer(sock: socket.socket) -> bool:
    """The other end closed (or reset) the connection without sending anything more."""
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True


@pytest.fixture
def site():
    with EchoSite() as running:
        yield running


def test_forward_proxy_site_sees_the_outgoing_address_and_no_proxy_headers(site):
    with (
        ForwardProxy("127.0.0.3", "carol", "s3cret") as proxy,
        httpx.Client(proxy=httpx.Proxy(proxy.url, auth=("carol", "s3cret")), timeout=10) as client,
    ):
        got = client.get(f"{site.base_url}/page?x=1", headers={"Cookie": "session=abc"})
        posted = client.post(f"{site.base_url}/login", data={"username": "carol"})
    seen = got.json()
    assert seen["peer"] == "127.0.0.3"
    assert seen["path"] == "/page?x=1"
    assert "proxy-authorization" not in seen["headers"]
    assert "proxy-connection" not in seen["headers"]
    assert posted.json()["body"] == "username=carol"  # a body sent apart from its head
    assert got.headers["connection"] == "close"  # one request per connection to the proxy
    port = site.port
    assert proxy.log == [
        ProxyRequest("GET", "127.0.0.1", port, "/page?x=1", 200, "carol", "session=abc"),
        ProxyRequest("POST", "127.0.0.1", port, "/login", 200, "carol", None),
    ]
    assert (proxy.requests, proxy.refused) == (2, 0)


def test_forward_proxy_without_right_credentials_answers_407(site):
    with ForwardProxy("127.0.0.2", "carol", "s3cret") as proxy:
        for auth in (None, ("carol", "wrong"), ("mallory", "s3cret")):
            url = httpx.Proxy(proxy.url, auth=auth) if auth else proxy.url
            with httpx.Client(proxy=url, timeout=10) as client:
                response = client.get(f"{site.base_url}/page")
            assert response.status_code == 407
            assert response.headers["proxy-authenticate"] == 'Basic realm="crawlsched"'
    assert [r.status for r in proxy.log] == [407, 407, 407]
    assert (proxy.requests, proxy.refused) == (3, 3)
    assert {r.client_user for r in proxy.log} == {None}


def test_forward_proxy_connect_tunnels_from_the_outgoing_address(site):
    port = site.port
    with (
        ForwardProxy("127.0.0.4") as proxy,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock,
    ):
        sock.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /tunnelled HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200")
    assert json.loads(body)["peer"] == "127.0.0.4"
    assert json.loads(body)["path"] == "/tunnelled"
    assert proxy.log == [ProxyRequest("CONNECT", "127.0.0.1", port, None, 200, None, None)]


def test_forward_proxy_refuse_mode_refuses_connections_until_ok_again(site):
    with ForwardProxy() as proxy, httpx.Client(proxy=proxy.url, timeout=10) as client:
        proxy.mode = "refuse"
        with pytest.raises((httpx.ConnectError, httpx.ProxyError)):
            client.get(f"{site.base_url}/page")
        proxy.mode = "ok"
        assert client.get(f"{site.base_url}/page").json()["peer"] == "127.0.0.2"
    assert [r.status for r in proxy.log] == [200]


def test_forward_proxy_starting_in_refuse_mode_listens_on_its_port_later(site):
    with ForwardProxy(mode="refuse") as proxy:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", proxy.port), timeout=10).close()
        proxy.mode = "block"
        with httpx.Client(proxy=proxy.url, timeout=10) as client:
            assert client.get(f"{site.base_url}/page").status_code == 429


def test_forward_proxy_refuse_mode_drops_open_tunnels(site):
    port = site.port
    with (
        ForwardProxy() as proxy,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock,
    ):
        sock.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        proxy.mode = "refuse"
        assert _closed_by_peer(sock)


def test_forward_proxy_stall_mode_reads_and_never_answers(site):
    with ForwardProxy(mode="stall") as proxy:
        with (
            httpx.Client(proxy=proxy.url, timeout=httpx.Timeout(10, read=0.5)) as client,
            pytest.raises(httpx.ReadTimeout),
        ):
            client.get(f"{site.base_url}/page")
        wait_for(lambda: proxy.log, 30, "the stalled request in the log")
    assert [(r.path, r.status) for r in proxy.log] == [("/page", None)]


def test_forward_proxy_block_mode_answers_429_with_the_marker(site):
    with (
        ForwardProxy("127.0.0.2", "carol", "pw", mode="block") as proxy,
        httpx.Client(proxy=httpx.Proxy(proxy.url, auth=("carol", "pw")), timeout=10) as client,
    ):
        response = client.get(f"{site.base_url}/page")
    assert response.status_code == 429
    assert "proxy-blocked" in response.text
    assert [(r.status, r.client_user) for r in proxy.log] == [(429, "carol")]


def test_forward_proxy_closes_stalled_requests_and_open_tunnels_promptly(site):
    # Given a request stalled for up to 10 minutes and an open tunnel
    port = site.port
    proxy = ForwardProxy(stall_s=600).__enter__()
    tunnel = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
    tunnel.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert tunnel.recv(1024).startswith(b"HTTP/1.1 200")
    proxy.mode = "stall"
    stalled = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
    stalled.sendall(f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n".encode())
    wait_for(lambda: len(proxy.log) == 2, 30, "the stalled request in the log")
    # When the proxy closes (in a thread: the test does not wait on it blindly)
    closer = threading.Thread(target=proxy.__exit__, args=(None, None, None))
    closer.start()
    closer.join(timeout=60)
    # Then it has ended, and both connections are closed from its side
    assert not closer.is_alive()
    with tunnel, stalled:
        assert _closed_by_peer(tunnel) and _closed_by_peer(stalled)


def test_forward_proxy_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="mode must be one of"):
        ForwardProxy(mode="flaky")
    with ForwardProxy() as proxy, pytest.raises(ValueError, match="mode"):
        proxy.mode = "down"
