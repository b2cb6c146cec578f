"""Admission: all-or-nothing leases for a batch that needs an account, a node, or both."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from crawlsched.resources.backends.mongo import MongoLeaseBackend
from crawlsched.resources.queueing import SELENIUM_KEY, account_key
from crawlsched.resources.rules import ACCOUNT_POOL, SELENIUM_POOL, Lease


@dataclass(frozen=True)
class Need:
    login: bool
    selenium: bool
    media_name: str


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
        wanted = []
        if need.login:
            # Accounts belong to one media: a Twitter login is no use on Instagram.
            wanted.append(
                (ACCOUNT_POOL, {"media_name": need.media_name}, account_key(need.media_name))
            )
        if need.selenium:
            wanted.append((SELENIUM_POOL, {}, SELENIUM_KEY))
        granted: list[Lease] = []
        try:
            for pool, selector, key in wanted:
                lease = self.backend.try_acquire(
                    pool, selector, holder, self.ttl_s, now, run_id, need.media_name
                )
                if lease is None:
                    self.release(granted, now)
                    return Grant(None, key)
                granted.append(lease)
        except BaseException:
            self.release(granted, now)
            raise
        return Grant(granted)

    def release(self, leases: list[Lease] | list[str], now: datetime) -> int:
        released = 0
        for lease in leases:
            lease_id = lease.lease_id if isinstance(lease, Lease) else lease
            released += 1 if self.backend.release(lease_id, now) else 0
        return released
