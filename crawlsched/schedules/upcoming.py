"""Upcoming fire times of many schedules at once. Pure: `now` is an argument.

Schedules that share a trigger (same cron and zone, same interval grid, same one-time date)
share one computation: operators copy the same few crons, and the list is the same for each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from crawlsched.schedules.triggers import trigger_of, upcoming

UPCOMING_LIMIT = 10_000  # per schedule; a 1 s interval over three days would be 259,200


def trigger_key(doc: Mapping[str, Any]) -> tuple:
    kind = doc.get("trigger", "interval")
    if kind == "cron":
        return ("cron", doc["cron"], doc.get("timezone") or "UTC")
    if kind == "once":
        return ("once", doc["at"])
    return ("interval", doc["anchor"], doc["interval_s"])


def upcoming_by_schedule(
    schedules: Iterable[Mapping[str, Any]],
    now: datetime,
    horizon: timedelta,
    limit: int = UPCOMING_LIMIT,
) -> dict[Any, list[datetime]]:
    """Fire times in (now, now + horizon] of each enabled schedule, by schedule id.

    A schedule made due early ("fire now") has its own next fire time first.
    """
    cache: dict[tuple, list[datetime]] = {}
    result: dict[Any, list[datetime]] = {}
    for doc in schedules:
        if not doc.get("enabled", True) or doc.get("next_fire_at", now) is None:
            continue
        key = trigger_key(doc)
        if key not in cache:
            cache[key] = upcoming(trigger_of(doc), now, horizon, limit)
        times = cache[key]
        first = doc.get("next_fire_at")
        if first is not None and now < first <= now + horizon and first not in times:
            times = sorted([first, *times])[:limit]
        result[doc["_id"]] = times
    return result


def upcoming_rows(
    schedules: Iterable[Mapping[str, Any]],
    now: datetime,
    horizon: timedelta,
    limit: int = UPCOMING_LIMIT,
) -> list[tuple[Any, datetime]]:
    """(schedule id, fire time) of every schedule, in time order."""
    by_schedule = upcoming_by_schedule(schedules, now, horizon, limit)
    rows = [(sid, t) for sid, times in by_schedule.items() for t in times]
    rows.sort(key=lambda row: (row[1], str(row[0])))
    return rows
