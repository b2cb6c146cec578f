"""MongoResultStore: crawl results upserted by natural key, so a re-crawl never duplicates."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, UpdateOne

from crawlsched.catalog import TASK_RESULTS
from crawlsched.store.counting import CountingDatabase


class MongoResultStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._db = db

    def create_indexes(self) -> None:
        for collection in {sink.collection for sink in TASK_RESULTS.values()}:
            self._db[collection].create_index(
                [("model_id", ASCENDING), ("key", ASCENDING)], unique=True, name="natural_key"
            )

    def save(
        self,
        task: str,
        model_id: Any,
        found: Sequence[tuple[Any, dict[str, Any]]],
        now: datetime,
        worker_id: str = "",
    ) -> int:
        """Upsert (job id, item) pairs of one batch in one command; returns items written."""
        ops = []
        for job_id, item in found:
            data = {k: v for k, v in item.items() if k != "key"}
            ops.append(
                UpdateOne(
                    {"model_id": model_id, "key": item["key"]},
                    {
                        "$set": {
                            **data,
                            "job_id": job_id,
                            "task": task,
                            "crawled_at": now,
                            "crawled_by": worker_id,
                        },
                        "$setOnInsert": {"first_seen_at": now},
                    },
                    upsert=True,
                )
            )
        if not ops:
            return 0
        collection = TASK_RESULTS[task].collection
        result = self._db[collection].bulk_write(ops, ordered=False)
        return result.upserted_count + result.modified_count
