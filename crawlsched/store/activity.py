"""MongoActivityStore: the `activity` collection as its readers see it (events, newest first,
and counts by name). The outbox's writes are `crawlsched.events`'."""

from __future__ import annotations

from typing import Any

from pymongo import DESCENDING

from crawlsched.store.counting import CountingDatabase


class MongoActivityStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._activity = db.activity

    def recent(self, run_id: str | None, limit: int, skip: int = 0) -> list[dict[str, Any]]:
        query = {"run_id": run_id} if run_id else {}
        cursor = self._activity.find(query).sort([("at", DESCENDING), ("_id", DESCENDING)])
        return list(cursor.skip(skip).limit(limit))

    def counts_by_event(self) -> dict[str, int]:
        rows = self._activity.aggregate([{"$group": {"_id": "$event", "n": {"$sum": 1}}}])
        return {str(row["_id"]): row["n"] for row in rows}
