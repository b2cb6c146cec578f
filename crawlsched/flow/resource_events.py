"""What operators must hear of the resource pools, as events in `activity`, once per change:
an account banned (by the site's refusal or by an operator), a node lost (found down by the
probe, or lost under a batch) and back again, a proxy that failed and rests (each failure).
A change already made (an account already banned, a node already down) emits nothing. Never
a secret: media and username, node URL without its user:password@, proxy name, the reason."""

from __future__ import annotations

from typing import Any

from crawlsched import metrics
from crawlsched.drivers.targets import redact
from crawlsched.events import emit
from crawlsched.resources.bindings import group_of
from crawlsched.resources.rules import BANNED, DOWN
from crawlsched.runtime import Runtime


def ban_account_by_lease(rt: Runtime, lease_id: str, reason: str) -> None:
    """The site refused the login of the account this lease holds: banned until enabled."""
    before = rt.inventory.ban_by_lease(lease_id, reason, rt.now())
    rt.leases.drop_session(lease_id)  # the site refused it: its session is worth nothing
    if before is not None and before.get("status") != BANNED:
        _account_banned(rt, before, reason, by="site")


def set_account_status(
    rt: Runtime, media_name: str, username: str, status: str, reason: str | None
) -> dict[str, Any]:
    """An operator's change of an account's status; returns the account as it is now."""
    account = rt.inventory.set_account_status(media_name, username, status, reason, rt.now())
    if status == BANNED and account.get("previous_status") != BANNED:
        _account_banned(rt, account, reason or "", by="operator")
    return account


def _account_banned(rt: Runtime, account: dict[str, Any], reason: str, by: str) -> None:
    emit(
        rt,
        "AccountBanned",
        media=account.get("media_name"),
        username=account.get("username"),
        reason=reason[:300],
        by=by,
    )


def node_marked(
    rt: Runtime, url: str, before: str | None, healthy: bool, reason: str | None, **fields: Any
) -> None:
    """A node's health as just recorded (`before`: as it was): `NodeLost` when it went down,
    `NodeRecovered` when a node that was down answers again."""
    if before is None:
        return  # no such node (removed meanwhile)
    if not healthy and before != DOWN:
        emit(rt, "NodeLost", node=redact(url), reason=(reason or "")[:300], **fields)
    elif healthy and before == DOWN:
        emit(rt, "NodeRecovered", node=redact(url))


def proxy_failed(rt: Runtime, lease_id: str, reason: str, blocked: bool, media: str | None) -> None:
    """The proxy behind this lease failed (or, `blocked`, an answer through it showed its
    media's block signs): it rests, and a block counts against its domain's tier."""
    now = rt.now()
    proxy = rt.proxies.failed_by_lease(lease_id, reason, now)
    metrics.proxy_failed("blocked" if blocked else "failed")
    if proxy is None:
        return
    if blocked and media is not None:
        group = group_of(rt.media(media))
        rt.proxies.record_tier(media, group, int(proxy.get("tier") or 0), True, now)
    emit(
        rt,
        "ProxyCooled",
        proxy=proxy["_id"],
        reason=reason[:300],
        failures=proxy["failures"],
        until=proxy["cooling_until"].isoformat(),
    )
