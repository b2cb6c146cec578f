"""The account's credential and its login session reach only the origin its media declares.

Real requests through the crawl's own client (`guarded_client`) to servers on 127.0.0.1 that
record every request's Host, Authorization, Cookie and body. Look-alike names (`evil-site.test`,
`site.test.evil.org`) are mapped to 127.0.0.1 by an injected resolver, so they reach the same
recording server as the declared `site.test` does — only the Host header tells them apart —
and no real DNS is asked.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from crawlsched.drivers.base import Account
from crawlsched.drivers.fetching import PoliteHttp, Refused
from crawlsched.drivers.net import guarded_client
from crawlsched.drivers.targets import parse_networks
from crawlsched.errors import UnsafeTarget
from tests.support.serving import running

SECRET = "s3cret-password-value"
SESSION = "sid=alice-session-7f3a"
LOOPBACK = parse_networks(["127.0.0.1/32"])
ALICE = Account("alice", SECRET)
NAMES = {"site.test", "evil-site.test", "site.test.evil.org"}


def resolver(host: str, port: int) -> list[str]:
    if host in NAMES:
        return ["127.0.0.1"]
    raise UnsafeTarget(f"host {host!r} does not resolve (test resolver)")


class _Recorder(BaseHTTPRequestHandler):
    def _record(self, body: bytes = b"") -> None:
        self.server.seen.append(
            {
                "host": (self.headers.get("Host") or "").rsplit(":", 1)[0],
                "method": self.command,
                "path": urlsplit(self.path).path,
                "auth": self.headers.get("Authorization"),
                "cookie": self.headers.get("Cookie"),
                "body": body.decode("latin-1"),
            }
        )
        parts = urlsplit(self.path)
        if parts.path == "/redirect":
            query = parse_qs(parts.query)
            self.send_response(int(query["code"][0]))
            self.send_header("Location", query["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        if parts.path == "/login":
            self.send_header("Set-Cookie", f"{SESSION}; Path=/; HttpOnly")
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def do_GET(self) -> None:
        self._record()

    def do_POST(self) -> None:
        self._record(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def servers():
    with running(_Recorder, seen=[]) as main, running(_Recorder, seen=[]) as other:
        yield main, other


@pytest.fixture
def client():
    with guarded_client(LOOPBACK, 5, resolver=resolver) as client:
        yield client


def _http(client, declared: str, account: Account | None = ALICE):
    return PoliteHttp(
        client,
        allowed_networks=LOOPBACK,
        account=account,
        secret_hosts=(declared,),
        resolver=resolver,
    )


def _look_alikes(main, other) -> list[str]:
    port, other_port = main.server_address[1], other.server_address[1]
    return [
        f"http://evil-site.test:{port}",
        f"http://site.test.evil.org:{port}",
        f"http://site.test:{other_port}",  # the declared host on another port
    ]


def _carried(seen: list[dict]) -> list[dict]:
    """The requests that carried anything of the account."""
    return [r for r in seen if r["auth"] or r["cookie"] or SECRET in r["body"]]


def test_bearer_goes_to_the_declared_origin_and_no_look_alike(servers, client):
    main, other = servers
    declared = f"http://site.test:{main.server_address[1]}"
    http = _http(client, declared)
    for origin in [declared, *_look_alikes(main, other)]:
        http.get(f"{origin}/page")
    seen = main.seen + other.seen
    assert len(seen) == 4
    assert [(r["host"], r["auth"]) for r in _carried(seen)] == [("site.test", f"Bearer {SECRET}")]


def test_same_host_and_port_under_another_scheme_gets_nothing(servers, client):
    main, _ = servers
    port = main.server_address[1]
    _http(client, f"https://site.test:{port}").get(f"http://site.test:{port}/page")
    assert len(main.seen) == 1 and _carried(main.seen) == []


@pytest.mark.parametrize("code", [302, 307])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_redirect_to_a_look_alike_carries_nothing(servers, client, code, which):
    main, other = servers
    declared = f"http://site.test:{main.server_address[1]}"
    target = quote(f"{_look_alikes(main, other)[which]}/landing", safe="")
    _http(client, declared).get(f"{declared}/redirect?code={code}&to={target}")
    seen = main.seen + other.seen
    assert [r["path"] for r in seen] == ["/redirect", "/landing"]
    assert [r["path"] for r in _carried(seen)] == ["/redirect"]


def test_login_session_stays_on_the_declared_origin(servers, client):
    main, other = servers
    declared = f"http://site.test:{main.server_address[1]}"
    http = _http(client, declared)
    http.form_login(f"{declared}/login", {"user": "alice", "password": SECRET})
    http.get(f"{declared}/home")
    for origin in _look_alikes(main, other):
        http.get(f"{origin}/page")
        landing = quote(f"{origin}/landing", safe="")
        http.get(f"{declared}/redirect?code=302&to={landing}")
    carried = _carried(main.seen + other.seen)
    assert [(r["path"], r["cookie"], r["auth"]) for r in carried] == [
        ("/login", None, None),  # the password, in the form body, to the declared origin
        ("/home", SESSION, None),  # then the session, not the bearer
        ("/redirect", SESSION, None),
        ("/redirect", SESSION, None),
        ("/redirect", SESSION, None),
    ]
    assert SECRET in carried[0]["body"]


def test_login_form_redirected_to_a_look_alike_loses_its_body(servers, client):
    main, other = servers
    declared = f"http://site.test:{main.server_address[1]}"
    evil = quote(f"{_look_alikes(main, other)[0]}/steal", safe="")
    _http(client, declared).form_login(
        f"{declared}/redirect?code=307&to={evil}", {"password": SECRET}
    )
    assert [(r["method"], r["path"]) for r in main.seen] == [
        ("POST", "/redirect"),
        ("GET", "/steal"),
    ]
    assert [r["path"] for r in _carried(main.seen)] == ["/redirect"]


def test_login_form_to_a_look_alike_is_refused_before_any_connection(servers, client):
    main, other = servers
    declared = f"http://site.test:{main.server_address[1]}"
    for origin in _look_alikes(main, other):
        with pytest.raises(Refused, match="not a declared host"):
            _http(client, declared).form_login(f"{origin}/login", {"password": SECRET})
    assert main.seen == [] and other.seen == []


def test_a_session_does_not_leak_to_another_batch_on_the_shared_client(servers, client):
    # One client per process serves every batch: the first batch's login cookie must not ride
    # along with the next batch's requests (another account, or none).
    main, _ = servers
    declared = f"http://site.test:{main.server_address[1]}"
    _http(client, declared).form_login(f"{declared}/login", {"password": SECRET})
    _http(client, declared, account=None).get(f"{declared}/page")
    _http(client, declared, account=Account("bob", "bob-secret")).get(f"{declared}/page")
    assert [(r["cookie"], r["auth"]) for r in main.seen[1:]] == [
        (None, None),
        (None, "Bearer bob-secret"),
    ]
