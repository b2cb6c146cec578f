"""MongoResultStore: crawl results upserted by natural key, counted new, changed or unchanged.

Each data model has its collection (`catalog.MODEL_COLLECTIONS`); a document is identified by
(model id, key) and carries a hash of its content. A batch's documents are written in one bulk
per model after one read of the stored hashes, so the crawl knows which items are new (first
seen), changed (content differs) or unchanged (only `last_seen` moves) — the run counts them,
and a driver asks `is_new` before an expensive follow-up fetch.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING, UpdateOne

from crawlsched.catalog import MODEL_COLLECTIONS
from crawlsched.store.counting import CountingDatabase

# Fields the store writes itself: a driver's document cannot set them.
BOOKKEEPING = frozenset(
    {
        "_id", "key", "model_id", "model", "media_name", "job_id", "run_id", "task",
        "content_hash", "first_seen", "last_seen", "crawled_by",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Item:
    """One document a job saved."""

    job_id: Any
    model: str
    doc: dict[str, Any]


def content_hash(doc: dict[str, Any]) -> str:
    """A stable hash of what a document says (bookkeeping fields left out)."""
    content = {k: v for k, v in doc.items() if k not in BOOKKEEPING}
    text = json.dumps(content, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class MongoResultStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._db = db

    def of_run(self, run_id: str, since: datetime | None, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` documents of each data model the run's crawls stored (seen `since` or
        later), oldest first by when they were last seen."""
        query: dict[str, Any] = {"run_id": run_id}
        if since is not None:
            query["last_seen"] = {"$gte": since}
        found: list[dict[str, Any]] = []
        for collection in sorted(set(MODEL_COLLECTIONS.values())):
            cursor = self._db[collection].find(query, {"_id": 0, "content_hash": 0})
            found += list(cursor.sort([("last_seen", 1), ("key", 1)]).limit(limit))
        return found

    def create_indexes(self) -> None:
        for collection in set(MODEL_COLLECTIONS.values()):
            self._db[collection].create_index(
                [("model_id", ASCENDING), ("key", ASCENDING)], unique=True, name="natural_key"
            )
            self._db[collection].create_index([("run_id", ASCENDING)], name="run", sparse=True)
            self._db[collection].create_index([("last_seen", DESCENDING)], name="recent")

    def save(
        self,
        items: Sequence[Item],
        model_ids: dict[str, Any],
        context: dict[str, Any],
        now: datetime,
    ) -> dict[Any, Counter]:
        """Upsert a batch's items; returns, per job id, how many were new, changed, unchanged.

        `context` tags every document (media_name, run_id, task, crawled_by).
        """
        per_job: dict[Any, Counter] = {}
        by_model: dict[str, list[Item]] = {}
        for item in items:
            by_model.setdefault(item.model, []).append(item)
        for model, group in by_model.items():
            model_id = model_ids.get(model)
            collection = self._db[MODEL_COLLECTIONS[model]]
            keys = list({item.doc["key"] for item in group})
            stored = {
                doc["key"]: doc.get("content_hash")
                for doc in collection.find(
                    {"model_id": model_id, "key": {"$in": keys}}, {"key": 1, "content_hash": 1}
                )
            }
            ops = []
            for item in group:
                key = item.doc["key"]
                digest = content_hash(item.doc)
                kind = (
                    "new" if key not in stored else "unchanged" if stored[key] == digest
                    else "changed"
                )  # fmt: skip
                stored[key] = digest  # a key saved twice in one batch is new only once
                per_job.setdefault(item.job_id, Counter())[kind] += 1
                tags = {**context, "job_id": item.job_id, "last_seen": now, "model": model}
                if kind == "unchanged":
                    change: dict[str, Any] = {"$set": tags}
                else:
                    content = {k: v for k, v in item.doc.items() if k not in BOOKKEEPING}
                    change = {
                        "$set": {**content, **tags, "content_hash": digest},
                        "$setOnInsert": {"first_seen": now},
                    }
                ops.append(UpdateOne({"model_id": model_id, "key": key}, change, upsert=True))
            collection.bulk_write(ops, ordered=False)
        return per_job

    def exists(self, model: str, model_id: Any, key: str) -> bool:
        collection = self._db[MODEL_COLLECTIONS[model]]
        return collection.find_one({"model_id": model_id, "key": key}, {"_id": 1}) is not None

    def find(
        self,
        model: str,
        run_id: str | None = None,
        job_id: Any = None,
        limit: int = 50,
        skip: int = 0,
    ) -> list[dict[str, Any]]:
        """Stored documents of a model, newest first (of one run or job when given)."""
        query: dict[str, Any] = {}
        if run_id is not None:
            query["run_id"] = run_id
        if job_id is not None:
            query["job_id"] = job_id
        cursor = self._db[MODEL_COLLECTIONS[model]].find(query, {"content_hash": 0})
        cursor = cursor.sort([("last_seen", DESCENDING), ("key", ASCENDING)])
        return list(cursor.skip(skip).limit(limit))
