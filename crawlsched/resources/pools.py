"""Admission: all-or-nothing leases for a batch that needs an account (and the proxy it goes
out through), a proxy, a browser node, or several of these.

All of a batch's needs are leased in one pass, or none is held: a short pool gives back what
the pass took, so no batch ever holds one resource while it waits for another (no deadlock).
Who goes first among waiting batches is `resources.queueing`'s order (no starvation).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from crawlsched.resources import bindings
from crawlsched.resources.backends.mongo import CAS_ATTEMPTS, MongoLeaseBackend
from crawlsched.resources.bindings import ProxyNeed
from crawlsched.resources.queueing import PROXY_KEY, SELENIUM_KEY, account_key, task_key
from crawlsched.resources.rules import (
    ACCOUNT_POOL,
    PROXY_POOL,
    SELENIUM_POOL,
    Lease,
    load_key,
    refusal,
)


@dataclass(frozen=True)
class Need:
    login: bool
    selenium: bool
    media_name: str
    # The media's proxies (None: it routes through none, though a bound account still uses
    # its own), and the task: an account rate-limited on one task still serves the others.
    proxy: ProxyNeed | None = None
    task: str = ""


@dataclass(frozen=True)
class Grant:
    """Every lease asked for, or none and the pool key that ran short."""

    leases: list[Lease] | None
    short: str | None = None


class ResourcePools:
    def __init__(self, backend: MongoLeaseBackend, ttl_s: float) -> None:
        if not ttl_s > 0:
            raise ValueError(f"ttl_s must be > 0, got {ttl_s}")
        self.backend = backend
        self.ttl_s = ttl_s

    def acquire(self, need: Need, holder: str, now: datetime, run_id: str = "") -> Grant:
        """Every lease the batch needs, or nothing held (never a partial grant)."""
        granted: list[Lease] = []
        try:
            if need.login:
                pair = self._account_and_proxy(need, holder, now, run_id)
                if isinstance(pair, str):
                    return Grant(None, pair)
                granted.extend(pair)
            elif need.proxy is not None:
                proxy = self._proxy(need, holder, now, run_id)
                if proxy is None:
                    return Grant(None, PROXY_KEY)
                granted.append(proxy)
            if need.selenium:
                node = self.backend.try_acquire(
                    SELENIUM_POOL, {}, holder, self.ttl_s, now, run_id, need.media_name
                )
                if node is None:
                    self.release(granted, now)
                    return Grant(None, SELENIUM_KEY)
                granted.append(node)
        except BaseException:
            self.release(granted, now)
            raise
        return Grant(granted)

    def _account_and_proxy(
        self, need: Need, holder: str, now: datetime, run_id: str
    ) -> list[Lease] | str:
        """An account of the media and, when it goes out through one, its proxy; or the key
        of what ran short. Accounts belong to one media: a Twitter login is no use on
        Instagram."""
        for _ in range(CAS_ATTEMPTS):
            accounts = self.backend.docs(ACCOUNT_POOL, {"media_name": need.media_name})
            if need.proxy is None and not any(bindings.binding_of(a) for a in accounts):
                # No proxy anywhere: the accounts alone, best first (no proxy read at all).
                free = [a for a in accounts if not refusal(ACCOUNT_POOL, a, now, need.task)]
                free.sort(key=lambda a: load_key(ACCOUNT_POOL, a, now))
                pairs: list = [(account, None) for account in free]
            else:
                proxies = self.backend.docs(PROXY_POOL, {})
                pairs = bindings.pairs(accounts, proxies, need.proxy, need.task, now)
            if not pairs:
                if bindings.short_of(accounts, need.task, now) == PROXY_POOL:
                    return PROXY_KEY
                if need.task and bindings.short_of(accounts, "", now) == PROXY_POOL:
                    # Free but for this task's lock: only this task's batches wait for it.
                    return task_key(account_key(need.media_name), need.task)
                return account_key(need.media_name)
            for account, proxy in pairs:
                proxy_id = None if proxy is None else proxy["_id"]
                account_lease = self.backend.grant(
                    ACCOUNT_POOL, account, holder, self.ttl_s, now, run_id, need.media_name,
                    need.task, proxy_id,
                )  # fmt: skip
                if account_lease is None:
                    continue  # changed since read: try the next pair, then read again
                if proxy is None:
                    return [account_lease]
                proxy_lease = self.backend.grant(
                    PROXY_POOL, proxy, holder, self.ttl_s, now, run_id, need.media_name
                )
                if proxy_lease is not None:
                    return [account_lease, proxy_lease]
                self.release([account_lease], now)
        return account_key(need.media_name)

    def _proxy(self, need: Need, holder: str, now: datetime, run_id: str) -> Lease | None:
        for _ in range(CAS_ATTEMPTS):
            proxies = self.backend.docs(PROXY_POOL, {})
            choices = bindings.proxies_for(None, proxies, need.proxy, now)
            if not choices:
                return None
            for proxy in choices:
                if proxy is None:
                    continue
                lease = self.backend.grant(
                    PROXY_POOL, proxy, holder, self.ttl_s, now, run_id, need.media_name
                )
                if lease is not None:
                    return lease
        return None

    def release(self, leases: list[Lease] | list[str], now: datetime) -> int:
        released = 0
        for lease in leases:
            lease_id = lease.lease_id if isinstance(lease, Lease) else lease
            released += 1 if self.backend.release(lease_id, now) else 0
        return released
