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

from crawlsched.store.counting import CountingDatabase

PENDING, DELIVERED = "pending", "delivered"


class MongoDeliveryStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._deliveries = db.webhook_deliveries

    def create_indexes(self) -> None:
        self._deliveries.create_index([("run_id", 1)], name="run")

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
            {"$set": {"state": DELIVERED, "status": status, "delivered_at": now}},
        )

    def attempt_failed(self, delivery_id: str, error: str) -> None:
        self._deliveries.update_one(
            {"_id": delivery_id, "state": PENDING},
            {"$set": {"sending_until": None, "last_error": error[:300]}},
        )
