"""MongoAssignmentStore: which account and which node served each batch of each run.

The old system's "DAG run → account" mapping, kept per admitted batch (`run_resources`).
Usernames and node URLs are recorded; secrets never are.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo import ASCENDING

from crawlsched.resources.rules import ACCOUNT_POOL, PROXY_POOL, SELENIUM_POOL, Lease
from crawlsched.store.counting import CountingDatabase


class MongoAssignmentStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._assignments = db.run_resources

    def create_indexes(self) -> None:
        self._assignments.create_index(
            [("run_id", ASCENDING), ("granted_at", ASCENDING)], name="run"
        )

    def record(
        self,
        run_id: str,
        dispatch_id: str,
        task: str,
        media_name: str,
        jobs: int,
        leases: Sequence[Lease],
        waited_s: float,
        now: datetime,
    ) -> None:
        by_pool = {lease.pool: lease.label for lease in leases}
        # Keyed by dispatch: a redelivered admission overwrites its own row, never adds one.
        self._assignments.update_one(
            {"_id": dispatch_id},
            {
                "$set": {
                    "run_id": run_id,
                    "task": task,
                    "media_name": media_name,
                    "jobs": jobs,
                    "account": by_pool.get(ACCOUNT_POOL),
                    "node": by_pool.get(SELENIUM_POOL),
                    "proxy": by_pool.get(PROXY_POOL),
                    "waited_s": round(waited_s, 3),
                    "granted_at": now,
                }
            },
            upsert=True,
        )

    def for_run(self, run_id: str) -> list[dict[str, Any]]:
        return list(self._assignments.find({"run_id": run_id}).sort("granted_at", ASCENDING))
