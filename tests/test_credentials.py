"""The HTTP driver against a real server on 127.0.0.1 that records every request's headers:
the account secret reaches only the origins its media declares (not another port or scheme,
not a look-alike name), never follows a redirect elsewhere, and refused targets receive no
traffic at all (checked before connecting)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

import httpx
import pytest

from crawlsched.drivers.base import Account, CrawlJob, DriverError
from crawlsched.drivers.context import CrawlContext
from crawlsched.drivers.fetching import PoliteHttp
from crawlsched.drivers.http import HttpPageDriver
from crawlsched.drivers.targets import may_carry_secret, parse_networks
from crawlsched.errors import UnsafeTarget
from tests.support.serving import running, send_html

SECRET = "s3cret-token-value"
LOOPBACK = parse_networks(["127.0.0.1/32", "::1/128"])


class _Recorder(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.seen.append(
            (self.headers.get("Host"), self.path, self.headers.get("Authorization"))
        )
        if self.path.startswith("/redirect-to/"):
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/redirect-to/").replace("~", "/"))
            self.end_headers()
            return
        send_html(self, b"<html><title>ok</title><a href='/next'>n</a></html>")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    with running(_Recorder, seen=[]) as httpd:
        yield httpd


def _crawl(url: str, allowed=LOOPBACK, secret_hosts=None):
    job = CrawlJob("j1", "t", url, "profile", "twitter", 10)
    port = urlsplit(url).port
    hosts = (f"http://127.0.0.1:{port}",) if secret_hosts is None else secret_hosts
    account = Account("alice", SECRET)
    with httpx.Client(timeout=5) as client:
        http = PoliteHttp(client, allowed_networks=allowed, account=account, secret_hosts=hosts)
        context = CrawlContext(
            http=http, account=account, secret_hosts=hosts, allowed_networks=allowed
        )
        context.begin(job)
        HttpPageDriver().crawl(job, context)
        return context


def test_secret_sent_to_a_declared_origin(server):
    port = server.server_address[1]
    _crawl(f"http://127.0.0.1:{port}/p")
    assert server.seen == [(f"127.0.0.1:{port}", "/p", f"Bearer {SECRET}")]


def test_no_secret_to_a_host_the_media_does_not_declare(server):
    port = server.server_address[1]
    _crawl(f"http://localhost:{port}/p")
    assert len(server.seen) == 1
    assert server.seen[0][2] is None


def test_redirect_from_declared_host_to_another_drops_the_secret(server):
    port = server.server_address[1]
    elsewhere = f"http:~~localhost:{port}~landing"
    # The page driver does not follow redirects (it discovers them), so fetch directly
    with httpx.Client(timeout=5) as client:
        origin = f"http://127.0.0.1:{port}"
        http = PoliteHttp(
            client, allowed_networks=LOOPBACK, account=Account("a", SECRET), secret_hosts=(origin,)
        )
        http.get(f"{origin}/redirect-to/{elsewhere}")
    assert [(path, auth) for _, path, auth in server.seen] == [
        (f"/redirect-to/{elsewhere}", f"Bearer {SECRET}"),
        ("/landing", None),
    ]


def test_another_port_or_scheme_of_a_declared_host_gets_no_secret(server):
    port = server.server_address[1]
    # Declared: the same host on another port, and on https
    _crawl(f"http://127.0.0.1:{port}/p", secret_hosts=(f"http://127.0.0.1:{port + 1}", "127.0.0.1"))
    assert [auth for _, _, auth in server.seen] == [None]


@pytest.mark.parametrize(
    "url",
    [
        "https://evil-twitter.com/",
        "https://twitter.com.evil.org/",
        "https://eviltwitter.com/",
        "https://twitter.com:8443/",
        "http://twitter.com/",
        "https://sub.twitter.com/",
        "https://twitter.com@evil.org/",
    ],
)
def test_look_alike_origins_never_carry_the_secret(url):
    assert not may_carry_secret(url, ["twitter.com"])
    assert may_carry_secret("https://TWITTER.com/home", ["twitter.com"])


def test_redirect_to_a_refused_address_is_not_followed(server):
    port = server.server_address[1]
    with httpx.Client(timeout=5) as client, pytest.raises(DriverError, match="link-local"):
        PoliteHttp(client, allowed_networks=LOOPBACK).get(
            f"http://127.0.0.1:{port}/redirect-to/http:~~169.254.169.254~latest~meta-data"
        )
    assert len(server.seen) == 1  # only the first hop reached anyone


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:{port}/p", "loopback"),  # loopback not admitted this time
        ("http://localhost:{port}/p", "loopback"),  # a name resolving to loopback
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://10.0.0.8/", "private"),
        ("http://[::ffff:127.0.0.1]:{port}/", "loopback"),
        ("file:///etc/passwd", "http"),
        ("http://user:pw@127.0.0.1:{port}/", "credentials"),
    ],
)
def test_refused_target_receives_no_traffic(server, url, reason):
    port = server.server_address[1]
    with pytest.raises(DriverError, match=reason) as caught:
        _crawl(url.format(port=port), allowed=())
    assert server.seen == []
    assert SECRET not in str(caught.value) and "pw@" not in str(caught.value)


def test_literal_check_needs_no_dns():
    from crawlsched.drivers.targets import check_literal

    check_literal("https://example.invalid/page", ())  # a name: checked again at fetch
    with pytest.raises(UnsafeTarget):
        check_literal("http://192.168.1.1/", ())
    check_literal("http://192.168.1.1/", parse_networks(["192.168.0.0/16"]))
