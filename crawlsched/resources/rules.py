"""Pure lease rules: when a resource may be leased, which one goes first, what a grant changes.

A resource (an account, a Selenium node, a proxy) is one document holding its live leases in
a list. A decision is made here on a snapshot of that document and written back by a
compare-and-set on its `version`, so the rules below are the only place that knows what "free"
means:

- a lease counts until it expires, whether or not its holder ever released it;
- an account takes at most `max_concurrent` leases, none while it cools down, is banned or
  disabled, and at most `rate_uses` grants per `rate_window_s` window when a window is set;
- an account rate-limited on one task (`task_locks`) takes no lease for that task until the
  lock ends, and still takes leases for its other tasks;
- an account goes out by one route at a time, a proxy or none (the worker's own address): a
  lease asking for another route than the account's live leases use is refused;
- a node takes at most `capacity` leases, none while it is down, draining or disabled;
- a proxy takes at most `max_concurrent` leases, none while it cools down or is disabled
  (its health: `resources/proxy_health.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from crawlsched.resources.proxy_health import proxy_state

ACCOUNT_POOL = "account"
SELENIUM_POOL = "selenium"
PROXY_POOL = "proxy"
POOLS = (ACCOUNT_POOL, SELENIUM_POOL, PROXY_POOL)

# Account states an operator sets; "cooling" is derived (see `cooling_until`).
ACTIVE, BANNED, DISABLED, COOLING = "active", "banned", "disabled", "cooling"
ACCOUNT_STATUSES = (ACTIVE, BANNED, DISABLED)
# Node health as the probe last saw it.
UP, DOWN, UNKNOWN = "up", "down", "unknown"


@dataclass(frozen=True)
class Lease:
    lease_id: str
    pool: str
    resource_id: Any
    holder: str  # the dispatch id holding it
    expires_at: datetime
    run_id: str = ""
    label: str = ""  # what an operator recognises: the username, the node URL, the proxy name
    proxy_id: str | None = None  # an account lease: the proxy the account goes out through


def new_lease_id(pool: str) -> str:
    """`<pool>.<random>`: the pool prefix tells a worker which collection holds the lease."""
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; known: {POOLS}")
    return f"{pool}.{uuid.uuid4().hex}"


def pool_of(lease_id: str) -> str:
    pool, _, token = lease_id.partition(".")
    if pool not in POOLS or not token:
        raise ValueError(f"not a lease id: {lease_id!r}")
    return pool


def label_of(resource: Mapping[str, Any]) -> str:
    """What an operator recognises a resource by: an account's username (an account belongs
    to a media), a node's URL or a proxy's name (their document's id; a proxy's username is
    its credential's, not its name)."""
    if resource.get("media_name"):
        return str(resource.get("username") or resource["_id"])
    return str(resource["_id"])


def expiry(now: datetime, ttl_s: float) -> datetime:
    if not ttl_s > 0:
        raise ValueError(f"lease ttl must be > 0 seconds, got {ttl_s}")
    return now + timedelta(seconds=ttl_s)


def live_leases(resource: Mapping[str, Any], now: datetime) -> list[dict[str, Any]]:
    return [lease for lease in resource.get("leases") or [] if lease["expires_at"] > now]


def capacity_of(pool: str, resource: Mapping[str, Any]) -> int:
    if pool in (ACCOUNT_POOL, PROXY_POOL):
        return int(resource.get("max_concurrent") or 1)
    return int(resource.get("capacity") or 0)


def cooling_until(account: Mapping[str, Any]) -> datetime | None:
    """The later of a cooldown set by the site (rate-limited until T) and the rest after the
    last use (`cooldown_s` after `last_released_at`)."""
    ends = [account.get("cooling_until")]
    released, rest_s = account.get("last_released_at"), account.get("cooldown_s") or 0
    if released is not None and rest_s > 0:
        ends.append(released + timedelta(seconds=float(rest_s)))
    return max((e for e in ends if e is not None), default=None)


def account_state(account: Mapping[str, Any], now: datetime) -> str:
    status = account.get("status") or ACTIVE
    if status != ACTIVE:
        return status
    until = cooling_until(account)
    return COOLING if until is not None and until > now else ACTIVE


def node_state(node: Mapping[str, Any]) -> str:
    if not node.get("enabled", True):
        return "disabled"
    if node.get("draining"):
        return "draining"
    return node.get("health") or UNKNOWN


def _window_open(account: Mapping[str, Any], now: datetime) -> bool:
    ends = account.get("window_ends_at")
    return ends is not None and ends > now


def task_locked_until(account: Mapping[str, Any], task: str, now: datetime) -> datetime | None:
    """When the site's rate limit on this account for `task` ends, if it has not yet."""
    until = (account.get("task_locks") or {}).get(task)
    return until if isinstance(until, datetime) and until > now else None


def routes_in_use(account: Mapping[str, Any], now: datetime) -> set[str | None]:
    """How the account's live leases go out: the proxy of each, None for the worker's own
    address. The rules keep this to one route at most."""
    return {lease.get("proxy_id") for lease in live_leases(account, now)}


def refusal(
    pool: str,
    resource: Mapping[str, Any],
    now: datetime,
    task: str = "",
    proxy_id: str | None = None,
) -> str | None:
    """Why this resource cannot take one more lease now, or None if it can. For an account,
    `task` is what the lease is for and `proxy_id` the proxy it would go out through."""
    if pool == ACCOUNT_POOL:
        state = account_state(resource, now)
        if state != ACTIVE:
            return state
        uses = resource.get("rate_uses")
        if uses and _window_open(resource, now) and (resource.get("window_uses") or 0) >= uses:
            return "rate window full"
        if task and task_locked_until(resource, task, now) is not None:
            return f"rate-limited for {task}"
        routes = routes_in_use(resource, now)
        if routes and routes != {proxy_id}:
            return "in use through another route"
    elif pool == PROXY_POOL:
        state = proxy_state(resource, now)
        if state != ACTIVE:
            return state
    else:
        state = node_state(resource)
        if state != UP:
            return state
    if len(live_leases(resource, now)) >= capacity_of(pool, resource):
        return "busy"
    return None


def load_key(pool: str, resource: Mapping[str, Any], now: datetime) -> tuple:
    """Least loaded first (share of capacity in use), then least recently leased."""
    used = len(live_leases(resource, now))
    last = resource.get("last_leased_at")
    return (used / max(1, capacity_of(pool, resource)), last is not None, last or now)


def choose(pool: str, resources: Iterable[Mapping[str, Any]], now: datetime) -> list[Mapping]:
    """The resources that can take a lease now, best first."""
    free = [r for r in resources if refusal(pool, r, now) is None]
    return sorted(free, key=lambda r: load_key(pool, r, now))


def grant_fields(
    pool: str, resource: Mapping[str, Any], lease: Mapping[str, Any], now: datetime
) -> dict[str, Any]:
    """The fields a grant writes: expired leases dropped, the new one added, the window counted."""
    fields: dict[str, Any] = {
        "leases": [*live_leases(resource, now), dict(lease)],
        "last_leased_at": now,
    }
    if pool == ACCOUNT_POOL and lease.get("proxy_id"):
        fields["proxy_id"] = lease["proxy_id"]  # sticky: the next lease prefers it
    if pool == ACCOUNT_POOL and resource.get("rate_uses"):
        window_s = float(resource.get("rate_window_s") or 0)
        if _window_open(resource, now):
            fields["window_uses"] = (resource.get("window_uses") or 0) + 1
        else:
            fields["window_ends_at"] = now + timedelta(seconds=window_s)
            fields["window_uses"] = 1
    return fields


def renew_fields(
    resource: Mapping[str, Any], lease_id: str, ttl_s: float, now: datetime
) -> dict[str, Any] | None:
    """Push a live lease's expiry back; None if the lease has gone or already expired."""
    live = live_leases(resource, now)
    if not any(lease["id"] == lease_id for lease in live):
        return None
    until = expiry(now, ttl_s)
    return {
        "leases": [
            {**lease, "expires_at": until} if lease["id"] == lease_id else lease for lease in live
        ]
    }


@dataclass(frozen=True)
class AccountLimits:
    """What an operator sets per account; validated so that a bad value never reaches the store."""

    max_concurrent: int = 1
    cooldown_s: float = 0.0
    rate_uses: int | None = None
    rate_window_s: float | None = None

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {self.max_concurrent}")
        if not 0 <= self.cooldown_s <= 7 * 86400:
            raise ValueError(f"cooldown_s must be between 0 and 7 days, got {self.cooldown_s}")
        if (self.rate_uses is None) != (self.rate_window_s is None):
            raise ValueError("rate_uses and rate_window_s go together: give both or neither")
        if self.rate_uses is not None and self.rate_uses < 1:
            raise ValueError(f"rate_uses must be >= 1, got {self.rate_uses}")
        if self.rate_window_s is not None and not 0 < self.rate_window_s <= 7 * 86400:
            raise ValueError(f"rate_window_s must be in (0, 7 days], got {self.rate_window_s}")


def held_by(resources: Sequence[Mapping[str, Any]], now: datetime) -> int:
    return sum(len(live_leases(r, now)) for r in resources)
