"""Admission: all-or-nothing leases for a batch that needs an account, a node, or both."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from crawlsched.resources.backend import LeaseBackend
from crawlsched.resources.rules import ACCOUNT_POOL, SELENIUM_POOL, Lease


@dataclass(frozen=True)
class Need:
    login: bool
    selenium: bool
    media_name: str


class ResourcePools:
    def __init__(self, backend: LeaseBackend, ttl_s: float) -> None:
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0, got {ttl_s}")
        self.backend = backend
        self.ttl_s = ttl_s

    def acquire(self, need: Need, holder: str, now: datetime) -> list[Lease] | None:
        """Every lease the batch needs, or None and nothing held (never a partial grant)."""
        wanted = []
        if need.login:
            # Accounts belong to one media: a Twitter login is no use on Instagram.
            wanted.append((ACCOUNT_POOL, {"media_name": need.media_name}))
        if need.selenium:
            wanted.append((SELENIUM_POOL, {}))
        granted: list[Lease] = []
        try:
            for pool, selector in wanted:
                lease = self.backend.try_acquire(pool, selector, holder, self.ttl_s, now)
                if lease is None:
                    break
                granted.append(lease)
            else:
                return granted
        except BaseException:
            self.release(granted)
            raise
        self.release(granted)
        return None

    def release(self, leases: list[Lease] | list[str]) -> int:
        released = 0
        for lease in leases:
            lease_id = lease.lease_id if isinstance(lease, Lease) else lease
            released += 1 if self.backend.release(lease_id) else 0
        return released
