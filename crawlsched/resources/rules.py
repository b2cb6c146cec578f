"""Pure lease rules: when a resource is free, what a lease is, how long it lasts."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

ACCOUNT_POOL = "account"
SELENIUM_POOL = "selenium"
POOLS = (ACCOUNT_POOL, SELENIUM_POOL)


@dataclass(frozen=True)
class Lease:
    lease_id: str
    pool: str
    resource_id: Any
    holder: str  # the dispatch id holding it
    expires_at: datetime


def new_lease_id(pool: str) -> str:
    """`<pool>.<random>`: the pool prefix tells a worker which store holds the lease."""
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; known: {POOLS}")
    return f"{pool}.{uuid.uuid4().hex}"


def pool_of(lease_id: str) -> str:
    pool, _, token = lease_id.partition(".")
    if pool not in POOLS or not token:
        raise ValueError(f"not a lease id: {lease_id!r}")
    return pool


def expiry(now: datetime, ttl_s: float) -> datetime:
    if ttl_s <= 0:
        raise ValueError(f"lease ttl must be > 0 seconds, got {ttl_s}")
    return now + timedelta(seconds=ttl_s)


def is_free(lease: dict[str, Any] | None, now: datetime) -> bool:
    """A resource is free when nobody holds it or its holder's lease has run out."""
    return lease is None or lease["expires_at"] <= now
