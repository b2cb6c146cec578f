"""Where a crawl may go, and where a credential may be sent: checked before any connection.

A crawl target is refused unless it is http(s), carries no userinfo, and every address its host
resolves to may be reached by the rule every outgoing connection follows (`outbound.addresses`:
private, loopback, link-local, multicast, reserved and unspecified addresses are refused unless
`CRAWLSCHED_TARGET_ALLOW_NETWORKS` admits them, e.g. 127.0.0.1/32 for the demo and the tests).
Pure apart from name resolution, which is passed in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

from crawlsched.errors import UnsafeTarget
from crawlsched.outbound.addresses import (
    IpAddress,
    IpNetwork,
    Resolver,
    check_addresses,
    check_host,
    literal_addresses,
    parse_networks,
    refusal,
    resolve,
)

# The shared rule (`outbound.addresses`) under the names the crawl's modules import.
__all__ = [
    "CachingResolver",
    "IpAddress",
    "IpNetwork",
    "Resolver",
    "check_addresses",
    "check_literal",
    "check_target",
    "declared_origin",
    "may_carry_secret",
    "origin_of",
    "parse_networks",
    "redact",
    "refusal",
    "resolve",
    "split_web_url",
]


class CachingResolver:
    """`resolver`'s answers, remembered per (host, port) for `ttl_s`: a crawler's DNS cache
    (Scrapy and Heritrix keep one too). Every page of a site asks for the same name twice, in
    the check before the request and when its connection is made; the system resolver is
    asked once a minute instead. Failures are not remembered.

    The check and the connection then read the same answer, so DNS rebinding still cannot
    slip between them, and every use checks the addresses as a fresh answer is checked."""

    def __init__(
        self,
        ttl_s: float = 60.0,
        size: int = 10_000,
        resolver: Resolver = resolve,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s, self.size, self._resolver, self._clock = ttl_s, size, resolver, clock
        self._known: dict[tuple[str, int], tuple[list[str], float]] = {}
        self._lock = threading.Lock()

    def __call__(self, host: str, port: int) -> list[str]:
        key = (host.lower(), port)
        now = self._clock()
        with self._lock:
            known = self._known.get(key)
        if known is not None and known[1] > now:
            return list(known[0])
        addresses = self._resolver(host, port)
        with self._lock:
            if len(self._known) >= self.size:
                self._known = {k: v for k, v in self._known.items() if v[1] > now}
                if len(self._known) >= self.size:
                    self._known.clear()
            self._known[key] = (list(addresses), now + self.ttl_s)
        return addresses


def redact(url: str) -> str:
    """The URL without user:password@ (for logs and error messages), at most 300 characters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url[:300]
    if "@" in parts.netloc:
        host = parts.netloc.rsplit("@", 1)[1]
        url = urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))
    return url[:300]


def split_web_url(url: str) -> tuple[str, int]:
    """(host, port) of an http(s) URL without userinfo, or UnsafeTarget saying what is wrong."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise UnsafeTarget(f"not a valid URL {redact(url)!r}: {e}") from None
    if parts.scheme not in ("http", "https"):
        raise UnsafeTarget(f"only http(s) targets are crawled, got {redact(url)!r}")
    if parts.username is not None or parts.password is not None:
        raise UnsafeTarget(f"credentials in a URL are refused: {redact(url)!r}")
    if not parts.hostname:
        raise UnsafeTarget(f"URL without a host: {redact(url)!r}")
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def check_literal(url: str, allowed: Sequence[IpNetwork]) -> None:
    """The checks that need no DNS (when a job is added): scheme, userinfo, and a host whose
    text names a refused address in any spelling (`127.1`, `2130706433`, `LOCALHOST`…).
    Names are resolved and checked again before each fetch."""
    host, _ = split_web_url(url)
    check_addresses(redact(url), literal_addresses(host) or [], allowed)


def check_target(url: str, allowed: Sequence[IpNetwork], resolver: Resolver = resolve) -> None:
    """Before a fetch: resolve the host and refuse the URL if any address is not allowed."""
    host, port = split_web_url(url)
    check_host(host, port, allowed, resolver, where=redact(url))


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL, lower case, default ports filled in."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def declared_origin(entry: str) -> tuple[str, str, int] | None:
    """A media's `secret_hosts` entry as an origin: `host` means https://host:443; an entry
    may also be a whole origin, `http://127.0.0.1:8080` (the demo's local sites)."""
    return origin_of(entry if "://" in entry else f"https://{entry}")


def may_carry_secret(url: str, secret_hosts: Iterable[str]) -> bool:
    """A credential goes only to an origin its media declares: same scheme, host (exact name,
    case-insensitive: no suffix or look-alike matches) and port."""
    origin = origin_of(url)
    return origin is not None and origin in {declared_origin(h) for h in secret_hosts}
