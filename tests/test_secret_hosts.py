"""Where a crawl may go and where a secret may go, with injected resolvers (never real DNS).

Every address a host resolves to is checked, not just the first or the last: a host that
resolves to a public address *and* a private one is refused, both by `check_target` (before a
fetch) and by the network backend that makes the connection. A credential goes only to an
origin its media declares, and look-alike names, other ports and other schemes are not it.
"""

from __future__ import annotations

import ipaddress

import httpcore
import pytest

from crawlsched.drivers import targets
from crawlsched.drivers.net import CheckedBackend
from crawlsched.drivers.targets import check_target, may_carry_secret, parse_networks
from crawlsched.errors import UnsafeTarget
from crawlsched.outbound import addresses

PUBLIC_A, PUBLIC_B = "93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"
HOSTILE = {
    "loopback": "127.0.0.1",
    "private": "10.1.2.3",
    "link-local": "169.254.169.254",  # cloud metadata
    "v6-loopback": "::1",
    "v4-mapped-private": "::ffff:192.168.0.1",
    "unspecified": "0.0.0.0",
}


def resolver_of(addresses: list[str]):
    """A resolver answering `addresses` for any host, recording what it was asked."""
    asked: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return list(addresses)

    resolve.asked = asked  # type: ignore[attr-defined]
    return resolve


def test_a_host_resolving_to_public_addresses_only_is_allowed():
    resolve = resolver_of([PUBLIC_A, PUBLIC_B])
    check_target("https://example.com:8443/x", (), resolve)
    assert resolve.asked == [("example.com", 8443)]


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_one_refused_address_among_public_ones_refuses_the_target(kind, position):
    bad = HOSTILE[kind]
    addresses = {
        "first": [bad, PUBLIC_A, PUBLIC_B],
        "middle": [PUBLIC_A, bad, PUBLIC_B],
        "last": [PUBLIC_A, PUBLIC_B, bad],
    }[position]
    with pytest.raises(UnsafeTarget, match=bad.replace(".", r"\.")):
        check_target("http://rebind.example/", (), resolver_of(addresses))


def test_an_allowed_network_admits_only_its_own_addresses():
    allowed = parse_networks(["127.0.0.1/32"])
    check_target("http://local.test/", allowed, resolver_of(["127.0.0.1", PUBLIC_A]))
    with pytest.raises(UnsafeTarget, match=r"127\.0\.0\.2"):
        check_target("http://local.test/", allowed, resolver_of(["127.0.0.1", "127.0.0.2"]))


@pytest.fixture
def no_sockets(monkeypatch):
    """httpcore's SyncBackend.connect_tcp replaced: a test never opens a socket."""
    tried: list[str] = []

    def connect(self, host, port, *args, **kwargs):
        tried.append(host)
        raise httpcore.ConnectError(f"{host} unreachable in a test")

    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", connect)
    return tried


@pytest.mark.parametrize("position", [0, 1, 2])
def test_the_network_backend_refuses_a_host_with_any_private_address(no_sockets, position):
    addresses = [PUBLIC_A, PUBLIC_B]
    addresses.insert(position, "10.0.0.7")
    backend = CheckedBackend((), resolver_of(addresses))
    with pytest.raises(httpcore.ConnectError, match="refused"):
        backend.connect_tcp("rebind.example", 443)
    assert no_sockets == []  # refused before any connection was tried


def test_the_network_backend_tries_only_checked_addresses_and_never_the_name(no_sockets):
    resolve = resolver_of([PUBLIC_A, PUBLIC_B])
    with pytest.raises(httpcore.ConnectError):
        CheckedBackend((), resolve).connect_tcp("example.com", 443)
    assert resolve.asked == [("example.com", 443)]
    assert no_sockets == [PUBLIC_A, PUBLIC_B]


def test_the_network_backend_refuses_a_host_that_resolves_to_nothing(no_sockets):
    with pytest.raises(httpcore.ConnectError, match="no address"):
        CheckedBackend((), resolver_of([])).connect_tcp("empty.example", 443)
    assert no_sockets == []


# -- where a secret may go -----------------------------------------------------------------

DECLARED = ["login.example.com", "http://127.0.0.1:8080"]


@pytest.mark.parametrize(
    "url",
    [
        "https://login.example.com/session",
        "https://LOGIN.Example.COM/session",  # host names are case-insensitive
        "https://login.example.com:443/",  # the default port, written out
        "http://127.0.0.1:8080/login",
    ],
)
def test_a_secret_goes_to_a_declared_origin(url):
    assert may_carry_secret(url, DECLARED)


@pytest.mark.parametrize(
    "url",
    [
        # look-alike names: suffixes, prefixes, sub-domains, parents, near misses
        "https://login.example.com.evil.net/",
        "https://evil-login.example.com/",
        "https://xlogin.example.com/",
        "https://sub.login.example.com/",
        "https://example.com/",
        "https://login.example.co/",
        "https://login.example.com.:443/",
        "https://login-example.com/",
        "https://loginexample.com/",
        "https://evil.net/?login.example.com",
        "https://evil.net/login.example.com",
        "https://login.example.com@evil.net/",
        # the right name on the wrong port or scheme
        "https://login.example.com:8443/",
        "http://login.example.com/",
        "http://login.example.com:443/",
        "https://127.0.0.1:8080/login",
        "http://127.0.0.1:8081/login",
        "http://127.0.0.1/login",
        "http://127.0.0.2:8080/login",
        # not an http(s) URL at all
        "ftp://login.example.com/",
        "login.example.com",
        "https://login.example.com:99999/",
    ],
)
def test_a_secret_never_goes_to_a_look_alike_or_another_origin(url):
    assert not may_carry_secret(url, DECLARED)


def test_no_declared_host_means_no_secret_goes_anywhere():
    assert not may_carry_secret("https://login.example.com/", [])


def test_a_declared_host_entry_is_an_https_origin_on_port_443():
    assert targets.declared_origin("Login.Example.com") == ("https", "login.example.com", 443)
    assert targets.declared_origin("http://127.0.0.1:8080") == ("http", "127.0.0.1", 8080)


def test_an_ipv4_mapped_address_is_judged_as_the_ipv4_address_it_carries():
    allowed = parse_networks(["127.0.0.1/32"])
    check_target("http://mapped.test/", (), resolver_of(["::ffff:93.184.216.34"]))
    check_target("http://mapped.test/", allowed, resolver_of(["::ffff:127.0.0.1"]))
    with pytest.raises(UnsafeTarget, match="private"):
        check_target("http://mapped.test/", allowed, resolver_of(["::ffff:10.0.0.1"]))


def test_an_http_origin_defaults_to_port_80_not_443():
    declared = ["http://plain.test"]
    assert may_carry_secret("http://plain.test:80/login", declared)
    assert not may_carry_secret("http://plain.test:443/login", declared)


# -- the checks that need no DNS, and what the refusals say --------------------------------


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://localhost:8000/", "loopback"),
        ("http://shop.localhost/", "loopback"),
        ("http://127.0.0.1/", "loopback"),
        ("http://10.0.0.1/", "private"),
        ("http://[::1]:8080/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://100.64.0.1/", "non-global"),
    ],
)
def test_a_literal_refused_address_is_refused_without_dns(url, kind):
    with pytest.raises(UnsafeTarget) as refused:
        targets.check_literal(url, ())
    text = str(refused.value)
    assert f"{url!r} resolves to {kind} address" in text
    assert text.endswith("; add its network to CRAWLSCHED_TARGET_ALLOW_NETWORKS to allow it")


def test_a_literal_check_admits_an_allowed_network_and_leaves_names_to_the_fetch():
    allowed = parse_networks(["127.0.0.1/32"])
    targets.check_literal("http://localhost:8000/", allowed)
    targets.check_literal("http://127.0.0.1:8000/", allowed)
    targets.check_literal("https://example.com/", ())  # a name: checked again at fetch time
    with pytest.raises(UnsafeTarget, match=r"127\.0\.0\.2"):
        targets.check_literal("http://127.0.0.2/", allowed)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://example.com/", "only http(s) targets are crawled, got 'ftp://example.com/'"),
        ("http://user@example.com/", "credentials in a URL are refused: 'http://***@example.com/'"),
        ("http://:pw@example.com/", "credentials in a URL are refused: 'http://***@example.com/'"),
        ("http:///path", "URL without a host: 'http:///path'"),
        ("http://example.com:99999/", "not a valid URL 'http://example.com:99999/'"),
    ],
)
def test_a_url_that_is_not_a_plain_web_address_is_refused_saying_why(url, says):
    with pytest.raises(UnsafeTarget) as refused:
        check_target(url, (), resolver_of([PUBLIC_A]))
    assert str(refused.value).startswith(says)


def test_the_default_port_is_443_for_https_and_80_for_http():
    assert targets.split_web_url("https://example.com/") == ("example.com", 443)
    assert targets.split_web_url("http://example.com/") == ("example.com", 80)
    assert targets.split_web_url("http://example.com:8080/") == ("example.com", 8080)


def test_redact_hides_every_credential_and_keeps_the_rest():
    assert targets.redact("https://u:pw@example.com/p?q=1#f") == "https://***@example.com/p?q=1#f"
    assert targets.redact("https://u:p@ss@example.com/") == "https://***@example.com/"
    assert targets.redact("https://example.com/a@b") == "https://example.com/a@b"
    assert targets.redact("https://example.com/" + "x" * 400) == (
        "https://example.com/" + "x" * 280
    )
    assert targets.redact("http://[::1/" + "y" * 400) == "http://[::1/" + "y" * 288


def test_an_address_with_a_zone_index_is_judged_without_it():
    with pytest.raises(UnsafeTarget, match="link-local address fe80::1%eth0"):
        check_target("http://zone.test/", (), resolver_of(["fe80::1%eth0"]))


def test_allowed_networks_may_be_written_with_host_bits_set():
    assert parse_networks([" 10.1.2.3/8 "]) == (ipaddress.ip_network("10.0.0.0/8"),)


def test_resolve_asks_for_tcp_addresses_of_host_and_port(monkeypatch):
    asked = []

    def getaddrinfo(host, port, **kwargs):
        asked.append((host, port, kwargs))
        return [(0, 0, 0, "", ("93.184.216.34", port)), (0, 0, 0, "", ("93.184.216.34", port))]

    monkeypatch.setattr(addresses.socket, "getaddrinfo", getaddrinfo)
    assert targets.resolve("example.com", 8443) == ["93.184.216.34"]
    assert asked == [("example.com", 8443, {"proto": addresses.socket.IPPROTO_TCP})]

    def fails(host, port, **kwargs):
        raise addresses.socket.gaierror("Name or service not known")

    monkeypatch.setattr(addresses.socket, "getaddrinfo", fails)
    with pytest.raises(UnsafeTarget, match=r"host 'nowhere\.test' does not resolve: Name or"):
        targets.resolve("nowhere.test", 80)


@pytest.mark.parametrize("url", ["ftp://example.com/", "https:///path", "mailto:a@b.c", "x"])
def test_only_an_http_url_with_a_host_has_an_origin(url):
    assert targets.origin_of(url) is None
