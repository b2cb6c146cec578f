"""The host rules of `resources/host_rules.py` stated as MongoDB filters, so that a change to a
host's document is one conditional write with no read before it.

Each filter is a *sufficient* condition: a document it matches is one on which the pure rule
gives the same answer, so the write it guards is one the rule would have made. A document it
does not match may still be one the rule accepts (a new day to count, a request for the host
older than the grant): the store then reads the document and decides on it as before.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from crawlsched.resources.host_rules import POLICY_KEYS, HostPolicy, day_of

LIMIT_FIELDS = ("policy", "crawl_delay_s")


def limits_of(doc: dict[str, Any]) -> dict[str, Any]:
    """What of a host's document sets its effective policy (`store.host_docs.effective_policy`)."""
    return {name: doc.get(name) for name in LIMIT_FIELDS}


def same_limits(limits: dict[str, Any]) -> dict[str, Any]:
    """The host's own limits and Crawl-delay are still `limits` (None: absent), so a policy
    computed from them before the write is the one in force."""
    own = limits.get("policy") or {}
    pinned = {f"policy.{key}": own.get(key) for key in POLICY_KEYS}
    return {**pinned, "crawl_delay_s": limits.get("crawl_delay_s")}


def not_blocked(now: datetime) -> dict[str, Any]:
    return {"$or": [{"blocked_until": None}, {"blocked_until": {"$lte": now}}]}


def grantable(holder: str, policy: HostPolicy, now: datetime) -> dict[str, Any]:
    """`host_rules.decide` grants `holder` the host: not blocked, not held by another live
    holder, and (under a daily cap) pages left today."""
    free = {
        "$or": [
            {"holder": {"$in": [None, "", holder]}},
            {"lease_until": None},
            {"lease_until": {"$lte": now}},
        ]
    }
    return {"$and": [not_blocked(now), free, *_budget_left(policy, now)]}


def held_elsewhere(holder: str, policy: HostPolicy, now: datetime) -> dict[str, Any]:
    """`host_rules.decide` refuses `holder` because another live holder has the host, and for
    no other reason (not blocked, pages left today)."""
    held = {"holder": {"$nin": [None, "", holder]}, "lease_until": {"$gt": now}}
    return {"$and": [not_blocked(now), held, *_budget_left(policy, now)]}


def _budget_left(policy: HostPolicy, now: datetime) -> list[dict[str, Any]]:
    if not policy.daily_pages:
        return []
    left = [
        {"day": {"$ne": day_of(now)}},
        {"pages_today": None},
        {"pages_today": {"$lt": policy.daily_pages}},
    ]
    return [{"$or": left}]


def renewable(holder: str, now: datetime) -> dict[str, Any]:
    """`host_rules.may_renew` lets `holder` renew: it holds a live slice, the host is not
    blocked, and nobody asked for it (a request older than the grant is left to the read)."""
    return {
        "holder": holder,
        "lease_until": {"$gt": now},
        "wanted_at": None,
        "$and": [not_blocked(now)],
    }


def counted_today(pages: int, now: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
    """A filter and an `$inc` counting `pages` more sent today without reading the count:
    only on a document already counting today (another day is left to the read)."""
    if pages <= 0:
        return {}, {}
    return {"day": day_of(now)}, {"pages_today": pages}


def no_later_start(next_start: datetime) -> dict[str, Any]:
    """The host's next start is not later than `next_start` (which may then replace it: the
    later of the two stands)."""
    return {"$or": [{"next_start": None}, {"next_start": {"$lte": next_start}}]}
