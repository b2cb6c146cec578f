"""Where a crawl may go and where a secret may go, with injected resolvers (never real DNS).

Every address a host resolves to is checked, not just the first or the last: a host that
resolves to a public address *and* a private one is refused, both by `check_target` (before a
fetch) and by the network backend that makes the connection. A credential goes only to an
origin its media declares, and look-alike names, other ports and other schemes are not it.
"""

from __future__ import annotations

import httpcore
import pytest

from crawlsched.drivers import targets
from crawlsched.drivers.net import CheckedBackend
from crawlsched.drivers.targets import check_target, may_carry_secret, parse_networks
from crawlsched.errors import UnsafeTarget

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
