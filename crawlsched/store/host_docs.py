"""What a host's document in `hosts` says, for the pure rules: its state, the policy in force
on it, and its day's page count after more pages."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from crawlsched.resources import host_rules
from crawlsched.resources.host_rules import HostPolicy, HostState

STATE_FIELDS = (
    "holder",
    "lease_until",
    "lease_granted_at",
    "wanted_at",
    "next_start",
    "blocked_until",
    "blocked_reason",
    "backoff_tries",
    "day",
    "pages_today",
)


def state_of(doc: dict[str, Any] | None) -> HostState:
    if not doc:
        return HostState()
    return HostState(**{k: doc[k] for k in STATE_FIELDS if doc.get(k) is not None})


def effective_policy(doc: dict[str, Any] | None, policy: HostPolicy) -> HostPolicy:
    """The caller's policy with the host's own limits over it, raised by its Crawl-delay."""
    doc = doc or {}
    merged = host_rules.merge_policy(policy, doc.get("policy"))
    return merged.with_crawl_delay(doc.get("crawl_delay_s"))


def counted_pages(doc: dict[str, Any], pages: int, now: datetime) -> dict[str, Any]:
    counted = state_of(doc).counted(pages, now)
    return {"day": counted.day, "pages_today": counted.pages_today}
