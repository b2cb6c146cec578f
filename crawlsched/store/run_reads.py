"""What a run store answers readers: one run, a run's child runs, pages of runs newest first
(with their revisions, for the API's cache of encoded rows), and the runs not yet ended."""

from __future__ import annotations

from typing import Any

from bson import ObjectId
from pymongo import DESCENDING

from crawlsched.planning.run_names import ENDED, RUNNING
from crawlsched.store.counting import CountingCollection, CountingDatabase

# Every write of a run sets a new revision (an ObjectId, unique even to a run deleted and
# opened again), so what a reader made of a run (the API's encoded rows of a page) stays the
# run's for as long as its revision does. Readers that answer callers leave it out.
REVISION = "rev"
# A list's row: an ended run's frozen timeline (its series and pages per depth, `GET
# /v1/runs/{run}/timeline`) would be most of each row's size.
SUMMARY = {"reports": 0, "tally": 0, "timeline": 0, REVISION: 0}


class RunReads:
    """Mixed into `MongoRunStore`: its reads of the `runs` collection (`_runs`)."""

    _runs: CountingCollection
    _db: CountingDatabase

    def write_mark(self) -> tuple[object, int] | None:
        """Differs after any write of a run (`CountingDatabase.write_mark`); None: unknown."""
        return self._db.write_mark("runs")

    def children_of(self, run_id: str) -> list[dict]:
        fields = {"reports": 0, "tally": 0, REVISION: 0}
        return list(self._runs.find({"parent_id": run_id}, fields).sort("_id", 1))

    def get(self, run_id: str) -> dict | None:
        return self._runs.find_one(
            {"_id": run_id}, {"reports": 0, "tally": 0, "reclaimed": 0, REVISION: 0}
        )

    def recent(self, limit: int = 20, empty: bool = True) -> list[dict]:
        return self.page(limit=limit, empty=empty)

    def page(
        self,
        limit: int = 20,
        skip: int = 0,
        state: str | None = None,
        schedule_id: str | None = None,
        empty: bool = True,
    ) -> list[dict]:
        """Runs, newest first, optionally of one state or schedule. `empty=False` leaves out
        the runs that planned nothing (a sweep firing with nothing due): planning closed with
        no job and no child run."""
        return list(self._page(SUMMARY, limit, skip, state, schedule_id, empty))

    def page_revisions(
        self,
        limit: int = 20,
        skip: int = 0,
        state: str | None = None,
        schedule_id: str | None = None,
        empty: bool = True,
    ) -> list[tuple[str, ObjectId | None]]:
        """The ids and revisions of what `page` reads (None: a run written before revisions)."""
        cursor = self._page({REVISION: 1}, limit, skip, state, schedule_id, empty)
        return [(doc["_id"], doc.get(REVISION)) for doc in cursor]

    def _page(
        self,
        fields: dict[str, Any],
        limit: int,
        skip: int,
        state: str | None,
        schedule_id: str | None,
        empty: bool,
    ) -> Any:
        """The cursor of a page of runs, newest first (`page`, `page_revisions`)."""
        cursor = self._runs.find(page_query(state, schedule_id, empty), fields)
        return cursor.sort("created_at", DESCENDING).skip(skip).limit(limit)

    def summaries(self, run_ids: list[str]) -> dict[str, tuple[ObjectId | None, dict]]:
        """By id, each run's revision and the run as `page` reads it, both of one read."""
        fields = {"reports": 0, "tally": 0, "timeline": 0}
        found = self._runs.find({"_id": {"$in": run_ids}}, fields)
        return {doc["_id"]: (doc.pop(REVISION, None), doc) for doc in found}

    def unfinished(self) -> list[dict]:
        query = {"state": {"$nin": list(ENDED)}}
        return list(self._runs.find(query, {"reports": 0, "tally": 0, REVISION: 0}))

    def stalled(self, limit: int = 100) -> list[dict]:
        """Running runs with nothing outstanding and planning closed: their end is owed."""
        query = {"state": RUNNING, "planning": False, "outstanding": {"$lte": 0}}
        return list(self._runs.find(query, {"reports": 0, "tally": 0, REVISION: 0}).limit(limit))

    def unfinished_ids(self) -> list[str]:
        return [r["_id"] for r in self._runs.find({"state": {"$nin": list(ENDED)}}, {"_id": 1})]

    def planning_open(self) -> list[dict]:
        """Top-level runs not ended whose planning never closed (a planner died mid-pass)."""
        query = {"planning": True, "state": {"$nin": list(ENDED)}, "parent_id": None}
        return list(self._runs.find(query, {"schedule_id": 1, "fire_at": 1}))

    def counts_by(self, field: str) -> dict[str, int]:
        rows = self._runs.aggregate([{"$group": {"_id": f"${field}", "n": {"$sum": 1}}}])
        return {str(row["_id"]): row["n"] for row in rows}


def page_query(state: str | None, schedule_id: str | None, empty: bool) -> dict[str, Any]:
    query: dict[str, Any] = {}
    if state is not None:
        query["state"] = state
    if schedule_id is not None:
        query["schedule_id"] = schedule_id
    if not empty:
        query["$or"] = [{"planning": True}, {"planned": {"$gt": 0}}, {"children": {"$gt": 0}}]
    return query
