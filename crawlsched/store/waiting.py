"""MongoWaitingStore: batches waiting for an account or a Selenium node (`waiting_batches`).

A waiting batch keeps its jobs claimed (state running, its dispatch id); this document holds its
crawl message until a gatekeeper admits it. An admission pass *takes* a document first (a
compare-and-set with a short hold), so two passes never admit the same batch; a pass that dies
holding one lets go when the hold runs out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING, ReturnDocument

from crawlsched.resources.queueing import WaitingBatch
from crawlsched.store.counting import CountingDatabase

# Long enough for one admission (a few reads and writes), short enough that a crashed pass
# delays its batch only briefly.
TAKE_HOLD_S = 60.0


def _free(now: datetime) -> dict[str, Any]:
    """Not being admitted right now, and not waiting for a host to be ready."""
    return {
        "$and": [
            {"$or": [{"taken_until": None}, {"taken_until": {"$lte": now}}]},
            {"$or": [{"not_before": None}, {"not_before": {"$lte": now}}]},
        ]
    }


def as_waiting_batch(doc: Mapping[str, Any]) -> WaitingBatch:
    return WaitingBatch(
        dispatch_id=doc["_id"],
        run_id=doc["run_id"],
        media_name=doc["media_name"],
        needs=frozenset(doc["needs"]),
        task=str(doc.get("task") or ""),
        enqueued_at=doc["enqueued_at"],
        wait_until=doc["wait_until"],
        human_validation=float(doc.get("human_validation") or 0),
        certitude=float(doc.get("certitude") or 0),
        oldest_modified_at=doc.get("oldest_modified_at"),
    )


class MongoWaitingStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._waiting = db.waiting_batches

    def create_indexes(self) -> None:
        self._waiting.create_index([("needs", ASCENDING)], name="needs")
        self._waiting.create_index([("wait_until", ASCENDING)], name="wait_until")
        self._waiting.create_index([("run_id", ASCENDING)], name="run")

    def park(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """Add a waiting batch; a redelivered park finds the first one and changes nothing."""
        return self._waiting.find_one_and_update(
            {"_id": doc["_id"]},
            {"$setOnInsert": {**doc, "taken_by": None, "taken_until": None, "last_short": None}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )

    def candidates(self, keys: Iterable[str] | None, now: datetime) -> list[dict[str, Any]]:
        """Batches not being admitted right now that need any of `keys` (None: every key)."""
        query: dict[str, Any] = _free(now)
        if keys is not None:
            query = {"needs": {"$in": sorted(set(keys))}, **query}
        return list(self._waiting.find(query, {"message": 0}))

    def anyone_waiting(self, keys: Iterable[str]) -> bool:
        """Whether any batch, taken or not, waits for one of `keys`: a new batch that needs
        one of them must then wait its turn behind it."""
        keys = sorted(set(keys))
        return (
            bool(keys) and self._waiting.find_one({"needs": {"$in": keys}}, {"_id": 1}) is not None
        )

    def take(self, dispatch_id: str, token: str, now: datetime) -> dict[str, Any] | None:
        return self._waiting.find_one_and_update(
            {"_id": dispatch_id, **_free(now)},
            {
                "$set": {
                    "taken_by": token,
                    "taken_until": now + timedelta(seconds=TAKE_HOLD_S),
                },
                "$inc": {"takes": 1},
            },
            return_document=ReturnDocument.AFTER,
        )

    def untake(self, dispatch_id: str, token: str, short: str | None) -> None:
        """Put a taken batch back to wait, noting which pool it found short."""
        self._waiting.update_one(
            {"_id": dispatch_id, "taken_by": token},
            {"$set": {"taken_by": None, "taken_until": None, "last_short": short}},
        )

    def remove(self, dispatch_id: str, token: str) -> bool:
        return self._waiting.delete_one({"_id": dispatch_id, "taken_by": token}).deleted_count == 1

    def overdue(self, now: datetime) -> list[dict[str, Any]]:
        return list(self._waiting.find({"wait_until": {"$lte": now}, **_free(now)}, {"message": 0}))

    def drop_run(self, run_id: str) -> int:
        """Forget an ended run's waiting batches: its jobs have all ended, so none can hold one
        (a batch parked by a worker killed before its jobs' lease ran out is left behind)."""
        return self._waiting.delete_many({"run_id": run_id}).deleted_count

    def for_run(self, run_id: str) -> list[dict[str, Any]]:
        return list(self._waiting.find({"run_id": run_id}, {"message": 0}))

    def all(self) -> list[dict[str, Any]]:
        return list(self._waiting.find({}, {"message": 0}))
