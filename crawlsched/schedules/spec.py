"""A schedule as given by an operator, checked whole before anything is stored. Pure.

A schedule fires either a sweep of job collections (the two defaults) or a target set: the jobs
of named targets in one collection (a website, a profile, a list of them). Exactly one trigger:
`interval_s`, `cron` (with `timezone`) or `at` (once). Every problem is a ValueError that names
the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.schedules.interval import IntervalSchedule
from crawlsched.schedules.notice_urls import MAX_NOTICES, parse_notice_url, url_shown
from crawlsched.schedules.policies import Misfire, Overlap
from crawlsched.schedules.triggers import CronTrigger, trigger_of

SCHEDULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
MAX_TARGETS = 10_000
MAX_CATCH_UP = 1000
TRIGGER_FIELDS = ("interval_s", "cron", "at")
# The longest interval a schedule takes: ten years (a longer one overflows date arithmetic).
MAX_INTERVAL_S = 10 * 365 * 86400
# A firing may fan out into at most this many child runs (a "multi-process run").
MAX_SHARDS = 64
# Run ends a webhook may be told of.
NOTIFY_EVENTS = ("finished", "failed", "incomplete", "stopped")
# What a webhook hears of when `notify_on` is not given: every end but a stop.
DEFAULT_NOTIFY_ON = ("finished", "failed", "incomplete")
MAX_URL_CHARS = 2000
# Fields an update may change; the rest (id, created_at, state) belong to the operations.
EDITABLE = (
    "owner",
    "collections",
    "target_collection",
    "targets",
    *TRIGGER_FIELDS,
    "timezone",
    "misfire",
    "catch_up_limit",
    "overlap",
    "shards",
    "webhook",
    "notices",
    "notify_on",
)


def _trigger_fields(given: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    chosen = [name for name in TRIGGER_FIELDS if given.get(name) is not None]
    if len(chosen) != 1:
        raise ValueError("trigger: give exactly one of interval_s, cron or at")
    if given.get("timezone") is not None and chosen != ["cron"]:
        raise ValueError("timezone: only a cron trigger takes a time zone")
    if chosen == ["interval_s"]:
        interval = given["interval_s"]
        if isinstance(interval, bool) or not isinstance(interval, int | float):
            raise ValueError(f"interval_s: must be a number of seconds, got {interval!r}")
        if not math.isfinite(interval) or not (
            IntervalSchedule.MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S
        ):
            raise ValueError(
                f"interval_s: seconds between fire times, more than 0 and at most "
                f"{MAX_INTERVAL_S} (10 years), got {interval!r}"
            )
        # The grid starts at the first fire time: nothing before it is a fire time, so a
        # schedule made due early ("fire now") never also fires at creation. Milliseconds,
        # as MongoDB stores them, so the stored grid is the one computed.
        first = now.replace(microsecond=now.microsecond // 1000 * 1000)
        first += timedelta(seconds=float(interval))
        return {"trigger": "interval", "interval_s": float(interval), "anchor": first}
    if chosen == ["cron"]:
        zone = given.get("timezone") or "UTC"
        CronTrigger(given["cron"], zone)  # raises ValueError naming cron or timezone
        return {"trigger": "cron", "cron": given["cron"], "timezone": zone}
    at = given["at"]
    if not isinstance(at, datetime) or at.tzinfo is None:
        shown = at.isoformat() if isinstance(at, datetime) else repr(at)
        raise ValueError(f"at: must be a date and time with a time zone, got {shown}")
    if at <= now:
        raise ValueError(f"at: {at.isoformat()} is in the past")
    return {"trigger": "once", "at": at}


def _what(given: Mapping[str, Any]) -> dict[str, Any]:
    targets = given.get("targets")
    if targets is None:
        collections = list(given.get("collections") or [])
        if not collections:
            raise ValueError("collections: a sweep needs at least one job collection")
        unknown = [c for c in collections if c not in JOB_COLLECTIONS]
        if unknown:
            raise ValueError(f"collections: unknown {unknown}; known: {list(JOB_COLLECTIONS)}")
        return {"kind": "sweep", "collections": collections, "targets": None}
    collection = given.get("target_collection")
    if collection not in JOB_COLLECTIONS:
        raise ValueError(f"target_collection: must be one of {list(JOB_COLLECTIONS)}")
    if not isinstance(targets, list | tuple) or not targets:
        raise ValueError("targets: give at least one target")
    if len(targets) > MAX_TARGETS:
        raise ValueError(f"targets: at most {MAX_TARGETS}, got {len(targets)}")
    if not all(isinstance(t, str) and t.strip() for t in targets):
        raise ValueError("targets: each target must be a non-empty string")
    return {
        "kind": "targets",
        "collections": [collection],
        "target_collection": collection,
        "targets": sorted(set(targets)),
    }


def _policies(given: Mapping[str, Any]) -> dict[str, Any]:
    try:
        misfire = Misfire(given.get("misfire") or Misfire.RUN_ONCE)
    except ValueError:
        raise ValueError(f"misfire: one of {[m.value for m in Misfire]}") from None
    try:
        overlap = Overlap(given.get("overlap") or Overlap.ALLOW)
    except ValueError:
        raise ValueError(f"overlap: one of {[o.value for o in Overlap]}") from None
    limit = given.get("catch_up_limit", 10)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_CATCH_UP:
        raise ValueError(f"catch_up_limit: an integer from 0 to {MAX_CATCH_UP}, got {limit!r}")
    return {"misfire": misfire.value, "overlap": overlap.value, "catch_up_limit": limit}


def _fan_out(given: Mapping[str, Any]) -> dict[str, Any]:
    shards = given.get("shards", 1)
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards: an integer from 1 to {MAX_SHARDS}, got {shards!r}")
    return {"shards": shards}


def _notices(given: Any) -> list[dict[str, Any]]:
    """Notice targets: new ones as Apprise URLs (checked, kept in `url` until the caller
    seals them), stored ones as they are (sealed: `secret` and `shown`). No URL, or only
    empty ones (an update's way to drop them all), means none."""
    if given is None:
        return []
    if not isinstance(given, list | tuple):
        raise ValueError("notices: a list of Apprise URLs")
    entries = [e for e in given if e != ""]
    if len(entries) > MAX_NOTICES:
        raise ValueError(f"notices: at most {MAX_NOTICES}, got {len(entries)}")
    checked = []
    for position, entry in enumerate(entries, start=1):
        if isinstance(entry, Mapping) and {"secret", "shown"} <= set(entry):
            checked.append(dict(entry))
            continue
        target = parse_notice_url(entry, position)
        checked.append(
            {
                "url": target.url,
                "shown": target.shown,
                "service": target.service,
                "hosts": [list(host) for host in target.hosts],
            }
        )
    return checked


def _notify(given: Mapping[str, Any]) -> dict[str, Any]:
    """Who is told of a run's end: a webhook and notice targets; an empty webhook URL, or an
    empty list of notices, (an update's way to drop them) means none."""
    webhook = given.get("webhook")
    notices = _notices(given.get("notices"))
    if not webhook and not notices:
        return {"notify": None}
    notify: dict[str, Any] = {"notices": notices} if notices else {}
    if webhook:
        notify["webhook"] = _webhook(webhook)
    on = list(given.get("notify_on") or DEFAULT_NOTIFY_ON)
    unknown = [event for event in on if event not in NOTIFY_EVENTS]
    if unknown:
        raise ValueError(f"notify_on: unknown {unknown}; one or more of {list(NOTIFY_EVENTS)}")
    return {"notify": {**notify, "on": [e for e in NOTIFY_EVENTS if e in on]}}


def _webhook(webhook: Any) -> dict[str, Any]:
    """A new webhook URL, checked (kept in `url` until the caller seals it, with the form
    output shows, `scheme://host[:port]`); a stored one as it is (`secret` and `shown`)."""
    if isinstance(webhook, Mapping) and {"secret", "shown"} <= set(webhook):
        return dict(webhook)
    if isinstance(webhook, Mapping):  # checked before, not sealed yet
        webhook = webhook.get("url")
    if not isinstance(webhook, str) or len(webhook) > MAX_URL_CHARS:
        raise ValueError(f"webhook: a URL of at most {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(webhook)
        has_host = bool(parts.hostname)
        parts.port  # noqa: B018  (a port out of range raises here)
        httpx.URL(webhook)  # what the sender will parse (it refuses `0177.0.0.1`)
    except (ValueError, httpx.InvalidURL):
        parts, has_host = None, False
    if parts is None or parts.scheme not in ("http", "https") or not has_host:
        raise ValueError("webhook: an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise ValueError("webhook: no user:password@ in the URL (it would be logged and stored)")
    return {"url": webhook, "shown": url_shown(webhook)}


def build_schedule(schedule_id: str, given: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The document of a new schedule; its first fire time is the trigger's first after now
    (an interval fires first at now + interval)."""
    if not isinstance(schedule_id, str) or not SCHEDULE_ID.match(schedule_id):
        raise ValueError(
            f"id: 1-100 letters, digits or _.:- starting with a letter or digit, "
            f"got {schedule_id!r}"
        )
    owner = given.get("owner") or "default"
    if not isinstance(owner, str) or len(owner) > 100:
        raise ValueError("owner: a string of at most 100 characters")
    doc: dict[str, Any] = {
        "_id": schedule_id,
        "owner": owner,
        **_what(given),
        **_trigger_fields(given, now),
        **_policies(given),
        **_fan_out(given),
        **_notify(given),
        "state": "active",
        "enabled": True,
        "buffered_fire_at": None,
        "created_at": now,
        "updated_at": now,
    }
    doc["next_fire_at"] = doc["anchor"] if "anchor" in doc else trigger_of(doc).next_after(now)
    return doc


def apply_update(
    current: Mapping[str, Any], changes: Mapping[str, Any], now: datetime
) -> dict[str, Any]:
    """The fields to $set for an update; the whole result is checked as if new. A changed
    trigger restarts from now; otherwise the next fire time stays."""
    unknown = [k for k in changes if k not in EDITABLE]
    if unknown:
        raise ValueError(f"{unknown[0]}: cannot be changed (editable: {', '.join(EDITABLE)})")
    # A field the stored schedule lacks (the default sweeps carry no shards) takes its default.
    merged = {k: current[k] for k in EDITABLE if current.get(k) is not None}
    notify = current.get("notify") or {}
    merged["webhook"], merged["notify_on"] = notify.get("webhook"), notify.get("on")
    merged["notices"] = notify.get("notices")
    if any(changes.get(k) is not None for k in TRIGGER_FIELDS):
        for name in (*TRIGGER_FIELDS, "timezone"):
            merged[name] = None
    if current.get("trigger") == "interval" or "trigger" not in current:
        merged["cron"] = merged["at"] = None
    merged.update({k: v for k, v in changes.items() if v is not None})
    rebuilt = build_schedule(str(current["_id"]), merged, now)
    trigger_changed = any(changes.get(k) is not None for k in (*TRIGGER_FIELDS, "timezone"))
    fields = {k: rebuilt[k] for k in rebuilt if k not in ("_id", "state", "enabled", "created_at")}
    if not trigger_changed:
        for name in ("anchor", "next_fire_at", "buffered_fire_at"):
            fields[name] = current.get(name)
    # A trigger of another kind leaves no field of the old one behind.
    for name in (*TRIGGER_FIELDS, "timezone", "anchor"):
        fields.setdefault(name, None)
    return {k: v for k, v in fields.items() if k not in ("buffered_fire_at",) or trigger_changed}


def horizon(days: float) -> timedelta:
    if not math.isfinite(days) or not 0 < days <= 31:
        raise ValueError(f"horizon: between 0 and 31 days, got {days!r}")
    return timedelta(days=days)
