"""Upcoming fire times of many schedules at once. Pure: `now` is an argument.

Schedules that share a trigger (same cron and zone, same interval grid, same one-time date)
share one computation: operators copy the same few crons, and the list is the same for each.
A long-lived process (the API) also keeps what it computed in a `FireTimeCache`: a list stays
the answer until its first time passes, or its horizon's end moves past the next fire time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from crawlsched.schedules.triggers import Trigger, trigger_of, upcoming

UPCOMING_LIMIT = 10_000  # per schedule; a 1 s interval over three days would be 259,200


def trigger_key(doc: Mapping[str, Any]) -> tuple:
    kind = doc.get("trigger", "interval")
    if kind == "cron":
        return ("cron", doc["cron"], doc.get("timezone") or "UTC")
    if kind == "once":
        return ("once", doc["at"])
    return ("interval", doc["anchor"], doc["interval_s"])


@dataclass(frozen=True)
class FireTimes:
    """A trigger's fire times in (at, at + horizon], at most `limit`, and `beyond`: its first
    fire time after those (None when it never fires again; not needed when the list is full)."""

    at: datetime
    times: list[datetime]
    beyond: datetime | None

    @classmethod
    def compute(cls, trigger: Trigger, now: datetime, horizon: timedelta, limit: int) -> FireTimes:
        times = upcoming(trigger, now, horizon, limit)
        # No fire time lies between the last listed and now + horizon unless the list is full.
        beyond = None if len(times) >= limit else trigger.next_after(now + horizon)
        return cls(now, times, beyond)

    def holds_at(self, now: datetime, horizon: timedelta, limit: int) -> bool:
        """Whether `times` is also the answer at `now` (for the same horizon and limit).

        It is while no fire time has passed since `at` (none lies in (at, now]): the times
        after `now` are then those after `at`. The listed ones all still fall in the horizon;
        a full list needs no more, and one that is not full gains none while `beyond` stays
        outside (now, now + horizon]."""
        first = self.times[0] if self.times else self.beyond
        if now < self.at or (first is not None and now >= first):
            return False
        return len(self.times) >= limit or self.beyond is None or self.beyond > now + horizon


class FireTimeCache:
    """`FireTimes` by (trigger, horizon, limit), at most `capacity`, the oldest stored dropped
    first. Safe to share between threads: an entry is replaced whole, never changed."""

    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self._capacity = capacity
        self._entries: dict[Hashable, FireTimes] = {}
        self._lock = threading.Lock()

    def times(
        self,
        key: Hashable,
        make: Callable[[], Trigger],
        now: datetime,
        horizon: timedelta,
        limit: int,
    ) -> list[datetime]:
        """The fire times of the trigger `key` names (`make` builds it on a miss)."""
        kept = self._entries.get((key, horizon, limit))
        if kept is not None and kept.holds_at(now, horizon, limit):
            return kept.times
        fresh = FireTimes.compute(make(), now, horizon, limit)
        with self._lock:
            self._entries.pop((key, horizon, limit), None)  # stored again: the newest
            self._entries[(key, horizon, limit)] = fresh
            while len(self._entries) > self._capacity:
                del self._entries[next(iter(self._entries))]
        return fresh.times


def upcoming_by_schedule(
    schedules: Iterable[Mapping[str, Any]],
    now: datetime,
    horizon: timedelta,
    limit: int = UPCOMING_LIMIT,
    known: FireTimeCache | None = None,
) -> dict[Any, list[datetime]]:
    """Fire times in (now, now + horizon] of each enabled schedule, by schedule id; a trigger's
    times are taken from `known` while they hold, and stored there.

    A schedule made due early ("fire now") has its own next fire time first.
    """
    cache: dict[tuple, list[datetime]] = {}
    result: dict[Any, list[datetime]] = {}
    for doc in schedules:
        if not doc.get("enabled", True) or doc.get("next_fire_at", now) is None:
            continue
        key = trigger_key(doc)
        if key not in cache:
            if known is None:
                cache[key] = upcoming(trigger_of(doc), now, horizon, limit)
            else:
                cache[key] = known.times(key, partial(trigger_of, doc), now, horizon, limit)
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
    known: FireTimeCache | None = None,
) -> list[tuple[Any, datetime]]:
    """(schedule id, fire time) of every schedule, in time order."""
    by_schedule = upcoming_by_schedule(schedules, now, horizon, limit, known)
    rows = [(sid, t) for sid, times in by_schedule.items() for t in times]
    rows.sort(key=lambda row: (row[1], str(row[0])))
    return rows
