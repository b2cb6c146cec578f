"""robots.txt, fetched once per site (scheme, host, port) and kept `ttl_s`, read with protego.

RFC 9309: a robots.txt that answers 4xx allows everything; one that answers 5xx or cannot be
fetched disallows everything until it is asked again. The fetch itself is PoliteHttp's
(checked target, paced, never with the account's credentials).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from protego import Protego

from crawlsched.drivers.base import DriverError
from crawlsched.drivers.proxied import ProxyBlocked, ProxyFailed

ALLOW_ALL = Protego.parse("")
DISALLOW_ALL = Protego.parse("User-agent: *\nDisallow: /")
MAX_ROBOTS_CHARS = 500_000


MAX_SITES = 10_000  # sites remembered; the oldest entry goes first beyond that


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    fetched_at: float = float("-inf")
    rules: Protego | None = None


class RobotsCache:
    """One per process, shared by its threads: a site's robots.txt is fetched once per TTL
    even when many threads ask at once (they wait for the first one's answer)."""

    def __init__(self, ttl_s: float = 3600.0, clock: Callable[[], float] = time.monotonic):
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0, got {ttl_s}")
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._sites: dict[str, _Entry] = {}

    def allowed(self, url: str, user_agent: str, fetch: Callable[[str], tuple[int, str]]) -> bool:
        parts = urlsplit(url)
        site = f"{parts.scheme}://{parts.netloc}".lower()
        with self._lock:
            entry = self._sites.get(site)
            if entry is None:
                if len(self._sites) >= MAX_SITES:
                    del self._sites[next(iter(self._sites))]
                entry = self._sites[site] = _Entry()
        with entry.lock:
            if entry.rules is None or self._clock() - entry.fetched_at > self.ttl_s:
                entry.rules = self._read(site, fetch)
                entry.fetched_at = self._clock()
            rules = entry.rules
        return rules.can_fetch(url, user_agent)

    @staticmethod
    def _read(site: str, fetch: Callable[[str], tuple[int, str]]) -> Protego:
        return rules_of(*fetch_robots(site, fetch))


UNREACHABLE = 0  # the status kept for a robots.txt that could not be fetched at all


def fetch_robots(site: str, fetch: Callable[[str], tuple[int, str]]) -> tuple[int, str]:
    """`site`'s robots.txt as (status, text); an unreachable one is `UNREACHABLE`. A proxy
    that failed or was blocked on the way says nothing of the site: that propagates (and
    nothing is stored for the site)."""
    try:
        status, text = fetch(f"{site}/robots.txt")
    except (ProxyFailed, ProxyBlocked):
        raise
    except DriverError:
        return UNREACHABLE, ""
    return status, text[:MAX_ROBOTS_CHARS]


def rules_of(status: int, text: str) -> Protego:
    """RFC 9309: 4xx allows everything; 5xx or unreachable disallows everything."""
    if 400 <= status < 500:
        return ALLOW_ALL
    if status >= 500 or status == UNREACHABLE:
        return DISALLOW_ALL
    return Protego.parse(text[:MAX_ROBOTS_CHARS])
