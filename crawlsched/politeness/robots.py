"""SharedRobots: a site's robots.txt fetched once per period for the whole cluster.

The first process that needs a site's rules claims the fetch in the site's host document,
fetches robots.txt (through `PoliteHttp`, so checked and paced), and stores the answer there
with its `Crawl-delay` for our user agent, which the host's pacing then honours: the next
holder's grant reads it, and the process that read it raises its own delay for the slice it
holds at once (`on_crawl_delay`), so the delay holds from the first request after
robots.txt. Every other process reads the stored answer; each also keeps what it read for a
short while (`local_ttl_s`), so a page costs no store read. A claimer that died is replaced once its
claim runs out.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from protego import Protego

from crawlsched.drivers.robots import fetch_robots, rules_of
from crawlsched.environment import SYSTEM, Environment
from crawlsched.resources.host_rules import host_key
from crawlsched.store.hosts import MongoHostStore

CLAIM_S = 30.0  # longer than one robots.txt fetch may take (the page deadline)
LOCAL_TTL_S = 60.0
WAIT_POLL_S = 0.2


class SharedRobots:
    def __init__(
        self,
        store: MongoHostStore,
        holder: str,
        ttl_s: float,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None] | None = None,
        local_ttl_s: float = LOCAL_TTL_S,
        group_of: Callable[[str], str] = host_key,
        on_crawl_delay: Callable[[str, float], None] | None = None,
        env: Environment = SYSTEM,
    ) -> None:
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0, got {ttl_s}")
        self.store = store
        self.holder = holder
        self.ttl_s = ttl_s
        # The key a URL is paced under: its Crawl-delay also raises that group's delay.
        self._group_of = group_of
        self.local_ttl_s = min(local_ttl_s, ttl_s)
        self._clock = clock
        self._sleep = sleep or env.sleep
        self._env = env
        # Told (pacing key, delay) of every Crawl-delay read, to raise the slice held now.
        self._on_crawl_delay = on_crawl_delay
        self._lock = env.lock()  # guards `_sites` (each site's entry has a lock of its own)
        self._sites: dict[str, tuple[Any, list[Any]]] = {}
        self.fetched = 0  # robots.txt this process fetched (for tests and logs)

    def known(self, url: str) -> bool:
        """Whether this process holds fresh rules for `url`'s site (no store read, no fetch)."""
        with self._lock:
            site = self._sites.get(host_key(url))
        if site is None:
            return False
        rules, read_at = site[1]
        return rules is not None and self._clock() - read_at <= timedelta(seconds=self.local_ttl_s)

    def allowed(self, url: str, user_agent: str, fetch: Callable[[str], tuple[int, str]]) -> bool:
        return self.rules(url, user_agent, fetch).can_fetch(url, user_agent)

    def rules(self, url: str, user_agent: str, fetch: Callable[[str], tuple[int, str]]) -> Protego:
        key = host_key(url)
        with self._lock:
            if key not in self._sites:
                if len(self._sites) >= 10_000:
                    del self._sites[next(iter(self._sites))]
                self._sites[key] = (self._env.lock(), [None, None])
            lock, entry = self._sites[key]
        with lock:  # one thread per process asks the store (or fetches) for a site
            rules, read_at = entry
            now = self._clock()
            if rules is None or now - read_at > timedelta(seconds=self.local_ttl_s):
                entry[:] = [self._shared(key, url, user_agent, fetch), now]
            return entry[0]

    def _group_or_none(self, url: str) -> str | None:
        try:
            return self._group_of(url)
        except (ValueError, OSError):  # a name that no longer resolves: its fetches fail
            return None

    def _shared(self, key: str, url: str, user_agent: str, fetch: Any) -> Protego:
        parts = urlsplit(url)
        site = f"{parts.scheme}://{parts.netloc}"
        give_up = self._clock() + timedelta(seconds=CLAIM_S * 2)
        while True:
            now = self._clock()
            stored = self.store.robots(key)
            if stored and now - stored["fetched_at"] <= timedelta(seconds=self.ttl_s):
                rules = rules_of(stored["status"], stored["text"])
                if stored["status"] == 200:
                    self._raise_delay(key, url, rules.crawl_delay(user_agent))
                return rules
            if self.store.claim_robots(key, self.holder, now, CLAIM_S) or now > give_up:
                try:
                    status, text = fetch_robots(site, fetch)
                except BaseException:
                    # (the host is not ready: a 429, held elsewhere) someone else may try
                    self.store.unclaim_robots(key, self.holder)
                    raise
                self.fetched += 1
                rules = rules_of(status, text)
                delay = rules.crawl_delay(user_agent) if status == 200 else None
                self.store.store_robots(key, status, text, delay, self._clock())
                if delay and (group := self._group_or_none(url)) not in (None, key):
                    self.store.raise_crawl_delay(group, float(delay), self._clock())
                self._raise_delay(key, url, delay)
                return rules
            self._sleep(WAIT_POLL_S)  # another process is fetching it

    def _raise_delay(self, key: str, url: str, delay: float | None) -> None:
        """A Crawl-delay holds from the next request on, in the slice this process holds."""
        if not delay or self._on_crawl_delay is None:
            return
        for pacing_key in {key, self._group_or_none(url)} - {None}:
            self._on_crawl_delay(str(pacing_key), float(delay))
