"""No DNS rebinding: the crawl's client connects only to an address it resolved and checked.

Name resolution is injected (no real DNS): a hostile resolver answers a public address to the
first look-up (the target check) and a loopback one to the next (the connection). The server on
127.0.0.1 must see nothing.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import pytest

from crawlsched.drivers.fetching import FetchFailed, PoliteHttp
from crawlsched.drivers.net import guarded_client
from crawlsched.drivers.targets import CachingResolver, parse_networks
from tests.support.serving import running

LOOPBACK = parse_networks(["127.0.0.1/32"])


class _Recorder(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.seen.append((self.headers.get("Host"), self.path))
        body = b"<html>ok</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    with running(_Recorder, seen=[]) as httpd:
        yield httpd


def test_a_name_is_connected_to_the_address_that_was_checked(server):
    port = server.server_address[1]
    answers = {"site.test": ["127.0.0.1"]}
    with guarded_client(LOOPBACK, 5, resolver=lambda host, _: answers[host]) as client:
        http = PoliteHttp(client, allowed_networks=LOOPBACK, resolver=lambda h, _: answers[h])
        assert http.get(f"http://site.test:{port}/page").text == "<html>ok</html>"
    assert server.seen == [(f"site.test:{port}", "/page")]  # the name kept in the Host header


def test_rebinding_to_a_refused_address_after_the_check_connects_nowhere(server):
    port = server.server_address[1]
    # The target check sees a public address; the connection's own look-up gets loopback,
    # which these settings do not allow.
    public = lambda host, _: ["93.184.216.34"]  # noqa: E731
    rebound = lambda host, _: ["127.0.0.1"]  # noqa: E731
    with guarded_client((), 5, resolver=rebound) as client:
        http = PoliteHttp(client, allowed_networks=(), resolver=public)
        with pytest.raises(FetchFailed) as failed:
            http.get(f"http://rebind.test:{port}/secret")
    assert server.seen == []
    # The failure (what the crawl logs as `job_failed`) says why, not only "ConnectError".
    assert "ConnectError: refused:" in str(failed.value)
    assert "loopback address 127.0.0.1" in str(failed.value)


@pytest.mark.parametrize("address", ["10.0.0.8", "169.254.169.254", "::ffff:10.0.0.1", "::1"])
def test_any_refused_address_among_the_answers_refuses_the_connection(server, address):
    port = server.server_address[1]
    answers = lambda host, _: ["127.0.0.1", address]  # noqa: E731
    with guarded_client(LOOPBACK, 5, resolver=answers) as client, pytest.raises(Exception) as e:
        client.get(f"http://mixed.test:{port}/")
    assert "refused" in str(e.value)
    assert server.seen == []


class _FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_cached_name_is_resolved_once_per_ttl_for_the_check_and_the_connection(server):
    # Given a crawl whose check and connection share one cache of 60 s, over a resolver that
    # counts its look-ups (a new connection per page: the site closes each one)
    port = server.server_address[1]
    asked: list[str] = []
    clock = _FakeClock()

    def counted(host: str, _port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    cache = CachingResolver(ttl_s=60, resolver=counted, clock=clock)
    with guarded_client(LOOPBACK, 5, resolver=cache) as client:
        http = PoliteHttp(client, allowed_networks=LOOPBACK, resolver=cache)
        # When it fetches three pages of the site within the minute
        for n in range(3):
            assert http.get(f"http://site.test:{port}/p{n}").status_code == 200
        # Then the name was looked up once for all six uses
        assert asked == ["site.test"]
        # And asked again once the answer is older than the TTL
        clock.t += 61
        http.get(f"http://site.test:{port}/again")
        assert asked == ["site.test", "site.test"]
    assert [path for _, path in server.seen] == ["/p0", "/p1", "/p2", "/again"]


def test_a_cached_answer_is_checked_at_every_use_and_failures_are_not_kept():
    answers = iter([OSError("no such name"), ["127.0.0.1"]])

    def flaky(host: str, _port: int) -> list[str]:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    cache = CachingResolver(ttl_s=60, resolver=flaky, clock=_FakeClock())
    with pytest.raises(OSError):
        cache("site.test", 80)
    assert cache("site.test", 80) == ["127.0.0.1"]  # the failure was not remembered
    assert cache("SITE.test", 80) == ["127.0.0.1"]  # names are case-blind; no third look-up
    # A loopback answer kept in the cache is still refused where loopback is not allowed
    with guarded_client((), 5, resolver=cache) as client, pytest.raises(Exception) as refused:
        client.get("http://site.test:80/")
    assert "refused" in str(refused.value)
