"""MongoHistoryStore: one row per job execution (`task_history`), and corrections to them.

Rows are written by the crawl actor, all the rows of a batch in one `insert_many`. A correction
changes the outcome, error or a note of one row, a list of rows, or every row with a given
outcome, and appends what it set, when and why to each row's `corrections`: the audit trail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from bson import ObjectId
from bson.errors import InvalidId
from pymongo import ASCENDING, DESCENDING

from crawlsched.planning.retention import DEFAULT_RETENTION, EXPIRE_AT, Retention
from crawlsched.store.counting import CountingDatabase

# What a correction may change; the facts of the execution (times, account, node) stay.
CORRECTABLE = ("outcome", "error", "note")


def row_id(text: str) -> ObjectId:
    try:
        return ObjectId(text)
    except (InvalidId, TypeError):
        raise ValueError(f"not a history row id: {text!r}") from None


class MongoHistoryStore:
    def __init__(self, db: CountingDatabase, retention: Retention = DEFAULT_RETENTION) -> None:
        self._history = db.task_history
        self._retention = retention

    def create_indexes(self) -> None:
        self._history.create_index(
            [("schedule_id", ASCENDING), ("started_at", DESCENDING)], name="schedule"
        )
        self._history.create_index([("job_id", ASCENDING), ("started_at", DESCENDING)], name="job")
        self._history.create_index([("run_id", ASCENDING)], name="run")
        self._history.create_index([("outcome", ASCENDING)], name="outcome")
        self._history.create_index(EXPIRE_AT, expireAfterSeconds=0, name="expiry")

    def add(self, rows: Sequence[Mapping[str, Any]]) -> int:
        if not rows:
            return 0
        return len(self._history.insert_many([self._expiring(r) for r in rows]).inserted_ids)

    def _expiring(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The row with its expiry: its retention counted from the execution's end (a row
        that names no end is kept)."""
        ended_at = row.get("ended_at")
        if not isinstance(ended_at, datetime):
            return dict(row)
        return {**row, EXPIRE_AT: self._retention.history_until(ended_at)}

    def for_schedule(self, schedule_id: str, limit: int = 100) -> list[dict[str, Any]]:
        return self._list({"schedule_id": schedule_id}, limit)

    def for_job(self, job_id: str, limit: int = 100) -> list[dict[str, Any]]:
        return self._list({"job_id": job_id}, limit)

    def for_run(self, run_id: str, limit: int = 10_000) -> list[dict[str, Any]]:
        return self._list({"run_id": run_id}, limit)

    def ends_of(self, run_id: str) -> list[dict[str, Any]]:
        """Each execution of a run, its times, outcome and error only: what its timeline
        counts."""
        fields = {"_id": 0, "started_at": 1, "ended_at": 1, "outcome": 1, "retried": 1}
        fields |= {"error": 1, "error_kind": 1, "http_status": 1}
        return list(self._history.find({"run_id": run_id}, fields))

    def _list(self, query: dict[str, Any], limit: int) -> list[dict[str, Any]]:
        return list(self._history.find(query).sort("started_at", DESCENDING).limit(limit))

    def page(
        self, filters: Mapping[str, Any], limit: int = 100, skip: int = 0
    ) -> list[dict[str, Any]]:
        """Rows matching every given field (schedule_id, run_id, job_id, outcome), newest
        first."""
        query = {k: v for k, v in filters.items() if v is not None}
        cursor = self._history.find(query).sort([("started_at", DESCENDING), ("_id", DESCENDING)])
        return list(cursor.skip(skip).limit(limit))

    def get(self, row: ObjectId) -> dict[str, Any] | None:
        return self._history.find_one({"_id": row})

    def outcome_totals(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for row in self._history.aggregate([{"$group": {"_id": "$outcome", "n": {"$sum": 1}}}]):
            totals[str(row["_id"])] = row["n"]
        return totals

    def existing(self, ids: Sequence[ObjectId]) -> list[ObjectId]:
        return [d["_id"] for d in self._history.find({"_id": {"$in": list(ids)}}, {"_id": 1})]

    def correct(
        self,
        changes: Mapping[str, Any],
        reason: str,
        now: datetime,
        ids: Sequence[ObjectId] | None = None,
        outcome: str | None = None,
    ) -> int:
        """Set `changes` on the rows `ids`, or on every row whose outcome is `outcome`."""
        unknown = sorted(set(changes) - set(CORRECTABLE))
        if unknown or not changes:
            raise ValueError(f"a correction sets some of {CORRECTABLE}, got {sorted(changes)}")
        if (ids is None) == (outcome is None):
            raise ValueError("correct either rows by id or all rows with an outcome")
        query = {"_id": {"$in": list(ids)}} if ids is not None else {"outcome": outcome}
        audit = {"at": now, "set": dict(changes), "reason": reason}
        return self._history.update_many(
            query, {"$set": dict(changes), "$push": {"corrections": audit}}
        ).modified_count
