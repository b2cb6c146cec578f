"""MongoScheduleStore: due schedules, advanced by compare-and-set so one ticker fires each time."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING

from crawlsched.catalog import TARGET_KINDS
from crawlsched.schedules.interval import IntervalSchedule
from crawlsched.store.counting import CountingDatabase


def default_sweeps(now: datetime) -> list[dict[str, Any]]:
    """The two sweeps of the original system: profiles every 5 minutes, websites every 15."""
    return [
        {
            "_id": f"sweep-{kind.collection}",
            "kind": "sweep",
            "collections": [kind.collection],
            "interval_s": kind.sweep_interval_s,
            "anchor": now,
            "next_fire_at": now,
            "enabled": True,
        }
        for kind in TARGET_KINDS.values()
    ]


class MongoScheduleStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._schedules = db.schedules

    def create_indexes(self) -> None:
        self._schedules.create_index(
            [("enabled", ASCENDING), ("next_fire_at", ASCENDING)], name="due"
        )

    def ensure_defaults(self, now: datetime) -> int:
        """Insert the default sweeps if missing; never moves an existing schedule."""
        added = 0
        for doc in default_sweeps(now):
            result = self._schedules.update_one(
                {"_id": doc["_id"]}, {"$setOnInsert": doc}, upsert=True
            )
            added += 1 if result.upserted_id is not None else 0
        return added

    def due(self, now: datetime) -> list[dict[str, Any]]:
        return list(self._schedules.find({"enabled": True, "next_fire_at": {"$lte": now}}))

    def advance(self, schedule: dict[str, Any], now: datetime) -> datetime | None:
        """Move `next_fire_at` past `now` if nobody else has; return the fire time we won."""
        fire_at = schedule["next_fire_at"]
        timing = IntervalSchedule(schedule["anchor"], schedule["interval_s"])
        result = self._schedules.update_one(
            {"_id": schedule["_id"], "next_fire_at": fire_at},
            {
                "$set": {"next_fire_at": timing.next_after(now), "last_fired_at": fire_at},
                "$inc": {"fired": 1, "missed": timing.missed_between(fire_at, now)},
            },
        )
        return fire_at if result.modified_count == 1 else None

    def fire_now(self, schedule_id: str, now: datetime) -> int:
        """Make a schedule due immediately (the demo and `crawlsched sweep now`)."""
        return self._schedules.update_one(
            {"_id": schedule_id}, {"$set": {"next_fire_at": now - timedelta(microseconds=1)}}
        ).matched_count

    def get(self, schedule_id: str) -> dict[str, Any] | None:
        return self._schedules.find_one({"_id": schedule_id})

    def all(self) -> list[dict[str, Any]]:
        return list(self._schedules.find({}))
