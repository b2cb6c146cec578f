"""MongoDeliveryStore: one document per webhook notification (`webhook_deliveries`).

The document's `_id` is the delivery's idempotency key (`<run id>:<event>`): a run ends once,
so it is created once, and a redelivered message finds it `delivered` and sends nothing. A
sender *takes* the delivery for a short hold before the POST, so two copies of the message
never post at the same time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pymongo import ReturnDocument

from crawlsched.planning.retention import DEFAULT_RETENTION, EXPIRE_AT, Retention
from crawlsched.store.counting import CountingDatabase

PENDING, DELIVERED = "pending", "delivered"
# The relay leaves a delivery to its message this long (the message's own retries come
# sooner); after that, or past a failed try's backoff, the relay sends it again.
RELAY_AFTER_S = 30.0
RELAY_BACKOFF_MAX_S = 600.0


class MongoDeliveryStore:
    def __init__(self, db: CountingDatabase, retention: Retention = DEFAULT_RETENTION) -> None:
        self._deliveries = db.webhook_deliveries
        self._retention = retention

    def create_indexes(self) -> None:
        self._deliveries.create_index([("run_id", 1)], name="run")
        self._deliveries.create_index([("state", 1), ("next_try_at", 1)], name="due")
        # Set once delivered: a pending delivery is never forgotten.
        self._deliveries.create_index(EXPIRE_AT, expireAfterSeconds=0, name="expiry")

    def create(self, delivery_id: str, doc: dict[str, Any], now: datetime) -> None:
        self._deliveries.update_one(
            {"_id": delivery_id},
            {
                "$setOnInsert": {
                    **doc,
                    "state": PENDING,
                    "attempts": 0,
                    "created_at": now,
                    "sending_until": None,
                    "next_try_at": now + timedelta(seconds=RELAY_AFTER_S),
                }
            },
            upsert=True,
        )

    def get(self, delivery_id: str) -> dict[str, Any] | None:
        return self._deliveries.find_one({"_id": delivery_id})

    def take(self, delivery_id: str, now: datetime, hold_s: float) -> dict[str, Any] | None:
        """Take a pending delivery for one attempt (None: delivered, or someone is sending)."""
        return self._deliveries.find_one_and_update(
            {
                "_id": delivery_id,
                "state": PENDING,
                "$or": [{"sending_until": None}, {"sending_until": {"$lte": now}}],
            },
            {
                "$set": {"sending_until": now + timedelta(seconds=hold_s)},
                "$inc": {"attempts": 1},
            },
            return_document=ReturnDocument.AFTER,
        )

    def delivered(self, delivery_id: str, status: int, now: datetime) -> None:
        self._deliveries.update_one(
            {"_id": delivery_id},
            {
                "$set": {
                    "state": DELIVERED,
                    "status": status,
                    "delivered_at": now,
                    EXPIRE_AT: self._retention.deliveries_until(now),
                }
            },
        )

    def attempt_failed(self, delivery_id: str, error: str, now: datetime) -> None:
        doc = self._deliveries.find_one({"_id": delivery_id}, {"attempts": 1}) or {}
        tries = int(doc.get("attempts") or 1)
        backoff = min(RELAY_BACKOFF_MAX_S, RELAY_AFTER_S * 2.0 ** min(tries - 1, 16))
        self._deliveries.update_one(
            {"_id": delivery_id, "state": PENDING},
            {
                "$set": {
                    "sending_until": None,
                    "last_error": error[:300],
                    "next_try_at": now + timedelta(seconds=backoff),
                }
            },
        )

    def due(self, now: datetime, limit: int = 100) -> list[str]:
        """Pending deliveries whose next try is due and that nobody is sending."""
        query = {
            "state": PENDING,
            "next_try_at": {"$lte": now},
            "$or": [{"sending_until": None}, {"sending_until": {"$lte": now}}],
        }
        return [d["_id"] for d in self._deliveries.find(query, {"_id": 1}).limit(limit)]

    def counts_by_state(self) -> dict[str, int]:
        rows = self._deliveries.aggregate([{"$group": {"_id": "$state", "n": {"$sum": 1}}}])
        return {str(row["_id"]): row["n"] for row in rows}
