"""robots.txt, fetched once per site (scheme, host, port) and kept `ttl_s`, read with protego.

RFC 9309: a robots.txt that answers 4xx allows everything; one that answers 5xx or cannot be
fetched disallows everything until it is asked again. The fetch itself is PoliteHttp's
(checked target, paced, never with the account's credentials).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from protego import Protego

from crawlsched.drivers.base import DriverError

ALLOW_ALL = Protego.parse("")
DISALLOW_ALL = Protego.parse("User-agent: *\nDisallow: /")
MAX_ROBOTS_CHARS = 500_000


class RobotsCache:
    def __init__(self, ttl_s: float = 3600.0, clock: Callable[[], float] = time.monotonic):
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._rules: dict[str, tuple[float, Protego]] = {}

    def allowed(self, url: str, user_agent: str, fetch: Callable[[str], tuple[int, str]]) -> bool:
        parts = urlsplit(url)
        site = f"{parts.scheme}://{parts.netloc}"
        with self._lock:
            cached = self._rules.get(site)
        if cached is None or self._clock() - cached[0] > self.ttl_s:
            cached = (self._clock(), self._read(site, fetch))
            with self._lock:
                self._rules[site] = cached
        return cached[1].can_fetch(url, user_agent)

    @staticmethod
    def _read(site: str, fetch: Callable[[str], tuple[int, str]]) -> Protego:
        try:
            status, text = fetch(f"{site}/robots.txt")
        except DriverError:
            return DISALLOW_ALL
        if 400 <= status < 500:
            return ALLOW_ALL
        if status >= 500:
            return DISALLOW_ALL
        return Protego.parse(text[:MAX_ROBOTS_CHARS])
