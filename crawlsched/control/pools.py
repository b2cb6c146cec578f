"""The resource pools: their capacity and what waits for what (proxies included: their own
commands are `control.proxies`); login accounts (never their secrets) and Selenium nodes, added
and steered."""

from __future__ import annotations

from typing import Any

from crawlsched.control.pages import sliced
from crawlsched.encoding import plain
from crawlsched.errors import NodeUnreachable, UnknownMedia, UnsafeTarget
from crawlsched.flow import views
from crawlsched.flow.destinations import check_node
from crawlsched.resources import rules
from crawlsched.resources.node_probe import check_node_url, probe_node
from crawlsched.resources.rules import AccountLimits
from crawlsched.runtime import Runtime

# What `account_state` sets an account to, by the state asked for.
STATES = {"banned": rules.BANNED, "disabled": rules.DISABLED, "active": rules.ACTIVE}
STATE_REASONS = {"disabled": "disabled by an operator", "banned": "banned by an operator"}


def overview(rt: Runtime) -> dict[str, Any]:
    found = views.pools_overview(rt)
    found["pools"][rules.PROXY_POOL] = rt.proxies.overview(rt.now())
    return plain(found)


def accounts(
    rt: Runtime, limit: int = 100, offset: int = 0, media: str | None = None
) -> dict[str, Any]:
    return sliced(views.account_rows(rt, media), limit, offset)


def add_account(
    rt: Runtime,
    media: str,
    username: str,
    secret: str,
    max_concurrent: int = 1,
    cooldown_s: float = 0.0,
    rate_uses: int | None = None,
    rate_window_s: float | None = None,
) -> dict[str, Any]:
    """Add an account, or update its secret and limits (the secret is encrypted at rest)."""
    limits = AccountLimits(max_concurrent, cooldown_s, rate_uses, rate_window_s)
    if not secret:
        raise ValueError("secret: the secret is empty")
    if rt.reference.media_by_name(media) is None:
        raise UnknownMedia(media, sorted(m["media_name"] for m in rt.reference.media()))
    new = rt.inventory.add_account(media, username, secret, limits, rt.now())
    return {"media": media, "username": username, "added": new}


def account_state(
    rt: Runtime, media: str, username: str, state: str, reason: str | None = None
) -> dict[str, Any]:
    """Ban, disable or enable an account (enabled: usable again now, for every task: its
    per-task rate locks and its kept login session are cleared too)."""
    from crawlsched.flow.resource_events import set_account_status

    if state not in STATES:
        raise ValueError(f"state: one of {', '.join(STATES)}, got {state!r}")
    why = None if state == "active" else reason or STATE_REASONS[state]
    set_account_status(rt, media, username, STATES[state], why)
    return {"media": media, "username": username, "state": STATES[state]}


def nodes(rt: Runtime, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    return sliced(views.node_rows(rt), limit, offset)


def add_node(
    rt: Runtime, url: str, slots: int | None = None, guarded: bool = False
) -> dict[str, Any]:
    """Probe a node's /status and add it (a Grid's capacity comes from its slots). For every
    caller the node's address must be where a node may be (`CRAWLSCHED_NODE_ALLOW_NETWORKS`,
    the one address rule), and the probe goes through the client that checks every address
    as it connects; `guarded` (a caller of the API): a name that names nothing is a 404."""
    url = url.rstrip("/")
    if guarded:
        _resolves(check_node_url(url))  # a name that names nothing: no node there (404)
    check_node(rt.settings, url, rt.resolver)  # an address no node may have: 400
    status = probe_node(url, rt.probe_http)
    if not status.ready:
        raise ValueError(f"{url} is not ready: {status.message}")
    capacity = slots or status.capacity or 1
    new = rt.inventory.add_node(url, status.kind, capacity, rt.now())
    return {"url": url, "kind": status.kind, "capacity": capacity, "added": new}


def _resolves(url: str) -> None:
    from urllib.parse import urlsplit

    from crawlsched.drivers.targets import resolve

    parts = urlsplit(url)
    try:
        resolve(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
    except UnsafeTarget as e:
        raise NodeUnreachable(url, str(e)) from None


def drain_node(rt: Runtime, url: str, draining: bool = True) -> dict[str, Any]:
    """No new leases on the node (`draining`), or take leases again."""
    rt.inventory.set_draining(url.rstrip("/"), draining)
    return {"url": url.rstrip("/"), "draining": draining}


def remove_node(rt: Runtime, url: str) -> dict[str, Any]:
    """Forget a node; batches on it stop at their next lease renewal and wait again."""
    rt.inventory.remove_node(url.rstrip("/"))
    return {"url": url.rstrip("/"), "removed": True}
