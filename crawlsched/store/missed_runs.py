"""MongoMissedRunStore: one row per fire time that did not run as planned, with why.

A row's id is (schedule, fire time, reason), so recording the same miss twice (a redelivered
message, two tickers) keeps one row; a starved run adds the pools that ran short to its row.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING, UpdateOne

from crawlsched.store.counting import CountingDatabase


def missed_id(schedule_id: str, fire_at: datetime, reason: str) -> str:
    return f"{schedule_id}@{fire_at.isoformat()}:{reason}"


class MongoMissedRunStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._missed = db.missed_runs

    def create_indexes(self) -> None:
        self._missed.create_index(
            [("schedule_id", ASCENDING), ("fire_at", DESCENDING)], name="by_schedule"
        )
        self._missed.create_index([("owner", ASCENDING), ("fire_at", DESCENDING)], name="owner")

    def record(
        self,
        schedule: dict[str, Any],
        misses: Iterable[tuple[datetime, str]],
        now: datetime,
        detail: str | None = None,
    ) -> int:
        """Record misses of one schedule in one command; returns how many rows were new."""
        ops = [
            UpdateOne(
                {"_id": missed_id(schedule["_id"], fire_at, str(reason))},
                {
                    "$setOnInsert": {
                        "schedule_id": schedule["_id"],
                        "owner": schedule.get("owner") or "default",
                        "fire_at": fire_at,
                        "reason": str(reason),
                        "detail": detail,
                        "recorded_at": now,
                    }
                },
                upsert=True,
            )
            for fire_at, reason in misses
        ]
        return self._missed.bulk_write(ops, ordered=False).upserted_count if ops else 0

    def record_starved(
        self, schedule: dict[str, Any], fire_at: datetime, run_id: str, pool: str, now: datetime
    ) -> bool:
        """A run of the schedule had batches starved: one row per run, the pools added to it.

        True when this call created the row (so the miss is counted once)."""
        result = self._missed.update_one(
            {"_id": missed_id(schedule["_id"], fire_at, "starved")},
            {
                "$setOnInsert": {
                    "schedule_id": schedule["_id"],
                    "owner": schedule.get("owner") or "default",
                    "fire_at": fire_at,
                    "reason": "starved",
                    "run_id": run_id,
                    "recorded_at": now,
                },
                "$addToSet": {"pools": pool},
            },
            upsert=True,
        )
        return result.upserted_id is not None

    def list(
        self, schedule_id: str | None = None, owner: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        query: dict[str, Any] = {}
        if schedule_id is not None:
            query["schedule_id"] = schedule_id
        if owner is not None:
            query["owner"] = owner
        return list(self._missed.find(query).sort("fire_at", DESCENDING).limit(limit))
