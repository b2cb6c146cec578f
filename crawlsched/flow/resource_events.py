"""What operators must hear of the resource pools, as events in `activity`, once per change:
an account banned (by the site's refusal or by an operator), a node lost (found down by the
probe, or lost under a batch) and back again. A change already made (an account already
banned, a node already down) emits nothing. Never a secret: media and username, node URL
without its user:password@, and the reason."""

from __future__ import annotations

from typing import Any

from crawlsched.drivers.targets import redact
from crawlsched.events import emit
from crawlsched.resources.rules import BANNED, DOWN
from crawlsched.runtime import Runtime


def ban_account_by_lease(rt: Runtime, lease_id: str, reason: str) -> None:
    """The site refused the login of the account this lease holds: banned until enabled."""
    before = rt.inventory.ban_by_lease(lease_id, reason, rt.now())
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
