"""MongoActivityStore: the `activity` collection as its readers see it (events, newest first,
and counts by name). The outbox's writes are `crawlsched.events`'."""

from __future__ import annotations

from typing import Any

from pymongo import DESCENDING

from crawlsched.planning.retention import EXPIRE_AT
from crawlsched.store.counting import CountingDatabase


class MongoActivityStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._activity = db.activity

    def create_indexes(self) -> None:
        self._activity.create_index([("at", -1)], name="recent")
        # The outbox: one document per event id; the relay reads the pending ones.
        self._activity.create_index(
            [("event_id", 1)],
            name="event_id",
            unique=True,
            partialFilterExpression={"event_id": {"$type": "string"}},
        )
        self._activity.create_index(
            [("outbox", 1), ("publish_after", 1)], name="outbox", sparse=True
        )
        # Events expire once stored (stub broker) or published (RabbitMQ): events.py.
        self._activity.create_index(EXPIRE_AT, expireAfterSeconds=0, name="expiry")

    def recent(self, run_id: str | None, limit: int, skip: int = 0) -> list[dict[str, Any]]:
        query = {"run_id": run_id} if run_id else {}
        cursor = self._activity.find(query).sort([("at", DESCENDING), ("_id", DESCENDING)])
        return list(cursor.skip(skip).limit(limit))

    def counts_by_event(self) -> dict[str, int]:
        rows = self._activity.aggregate([{"$group": {"_id": "$event", "n": {"$sum": 1}}}])
        return {str(row["_id"]): row["n"] for row in rows}
