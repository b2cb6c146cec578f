"""MongoChildStore: jobs a crawl discovered, registered as children of the run that found them.

A child is a job document in its parent's collection, scoped to one run (`scope_run`): its id
is derived from (run, task, URL), so a URL found twice in a run — by two pages, two workers, or
a redelivered batch — is one job (the `_id` index is the per-run dedup). It is inserted
unreleased by the crawl that found it, naming the page that found it (`parent_job`); the
coordinator counts a page's children when it counts the page's end (the report of the
dispatch that recorded it), in the same `$inc`, and only then releases them to be planned.
So no child can be crawled, reported and counted off before the run counts it in: the run
cannot end early. And whoever registered a child — the batch that recorded its parent, or a
copy of that batch whose own record came too late — it is counted with its parent's end.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo import ReturnDocument, UpdateOne

from crawlsched.catalog import JobState
from crawlsched.drivers import job_bounds
from crawlsched.drivers.context import Discovery
from crawlsched.planning.retention import EXPIRE_AT
from crawlsched.planning.run_names import ENDED
from crawlsched.store.counting import CountingDatabase
from crawlsched.store.runs import revised

# A seed marker (`_marker`): a planned page's place among its run's children, so that the page
# found again is not planned twice. It lives in the job collection but is not a job.
MARKER_FILTER: dict[str, Any] = {"scope_run": {"$ne": None}, "depth": 0}


def child_id(run_id: str, task: str, url: str) -> str:
    digest = hashlib.sha256(f"{run_id}\n{task}\n{url}".encode()).hexdigest()[:32]
    return f"child:{digest}"


@dataclass(frozen=True)
class Found:
    """One discovery of one parent job of a batch."""

    parent_id: Any
    discovery: Discovery


@dataclass(frozen=True)
class Registered:
    new: dict[Any, int]  # parent id -> children it registered (first to find them)
    cut_pages: dict[Any, int]  # parent id -> discoveries refused by the run's page bound


class MongoChildStore:
    def __init__(self, db: CountingDatabase, collection: str) -> None:
        self._jobs = db[collection]
        self._runs = db.runs

    def register(
        self,
        run_id: str,
        dispatch_id: str,
        media: dict[str, Any],
        found: Sequence[Found],
        max_pages: int,
        now: datetime,
        seeds: Sequence[tuple[str, str]] = (),
    ) -> Registered:
        """Insert the children not yet in the run, within its page bound (at most three
        commands: which exist, reserve room on the run, insert; one when nothing was found).

        `seeds` are the (task, URL) of planned jobs this batch crawled: each gets a marker in
        the run's id space (ended, never planned, counted nowhere), so a page that links back
        to a planned page does not crawl it a second time.
        """
        by_id: dict[str, Found] = {}
        for f in found:
            by_id.setdefault(child_id(run_id, f.discovery.task, f.discovery.url), f)
        markers = {child_id(run_id, task, url): url for task, url in seeds}
        if not by_id and not markers:
            return Registered({}, {})
        # Markers are upserts that insert only what is missing: they need no read. The read
        # is for discoveries, which must not be counted new when they exist already.
        existing: set[str] = set()
        if by_id:
            asked = [*by_id, *markers]
            existing = {doc["_id"] for doc in self._jobs.find({"_id": {"$in": asked}}, {"_id": 1})}
        fresh = [(cid, f) for cid, f in by_id.items() if cid not in existing | set(markers)]
        cut: dict[Any, int] = {}
        fresh = self._within_own_bounds(run_id, fresh, cut)
        if fresh:
            # Room is reserved on the run by an atomic $inc, so concurrent batches together
            # never register more than `max_pages`; a batch whose insert then loses a race to
            # a duplicate leaves a slot unused (the bound is a ceiling, not a target).
            # An ended run takes no more: a late copy of a batch whose page another copy ended
            # (given up, say) would leave children nothing counts, plans or deletes.
            after = self._runs.find_one_and_update(
                {"_id": run_id, "state": {"$nin": list(ENDED)}},
                revised({"$inc": {"pages_reserved": len(fresh)}}),
                projection={"pages_reserved": 1},
                return_document=ReturnDocument.AFTER,
            )
            if after is None and self._runs.count_documents({"_id": run_id}, limit=1):
                after = {"pages_reserved": max_pages + len(fresh)}  # ended: no room
            reserved = (after or {}).get("pages_reserved", len(fresh))
            room = max(0, min(len(fresh), max_pages - (reserved - len(fresh))))
            for _, f in fresh[room:]:
                cut[f.parent_id] = cut.get(f.parent_id, 0) + 1
            fresh = fresh[:room]
        ops = [
            UpdateOne(
                {"_id": cid},
                {"$setOnInsert": _child_doc(run_id, dispatch_id, media, f, now)},
                upsert=True,
            )
            for cid, f in fresh
        ]
        ops += [op for cid, op in self._marker_ops(markers, run_id, now) if cid not in existing]
        new: dict[Any, int] = {}
        if ops:
            result = self._jobs.bulk_write(ops, ordered=False)
            for index in (i for i in result.upserted_ids if i < len(fresh)):
                parent = fresh[index][1].parent_id
                new[parent] = new.get(parent, 0) + 1
        return Registered(new, cut)

    def _within_own_bounds(
        self, run_id: str, fresh: list[tuple[str, Found]], cut: dict[Any, int]
    ) -> list[tuple[str, Found]]:
        """The discoveries within the `max_pages` their planned job sets for itself (counted
        on the run per planned job, reserved atomically as the run's own bound is); those
        refused are added to `cut` by parent. One command per planned job with such a bound."""
        groups: dict[str, list[int]] = {}
        for index, (_, f) in enumerate(fresh):
            if "max_pages" in f.discovery.handed_down:
                seed = job_bounds.seed_key(f.discovery.handed_down.get(job_bounds.SEED_FIELD))
                groups.setdefault(seed, []).append(index)
        refused: set[int] = set()
        for seed, indexes in groups.items():
            field = f"pages_by_seed.{seed}"
            after = self._runs.find_one_and_update(
                {"_id": run_id},
                revised({"$inc": {field: len(indexes)}}),
                projection={field: 1},
                return_document=ReturnDocument.AFTER,
            )
            reserved = ((after or {}).get("pages_by_seed") or {}).get(seed, len(indexes))
            bound = fresh[indexes[0]][1].discovery.handed_down["max_pages"]
            room = max(0, min(len(indexes), bound - (reserved - len(indexes))))
            refused.update(indexes[room:])
        for index in sorted(refused):
            parent = fresh[index][1].parent_id
            cut[parent] = cut.get(parent, 0) + 1
        return [pair for index, pair in enumerate(fresh) if index not in refused]

    def marker_ops(
        self, run_id: str, seeds: Sequence[tuple[str, str]], now: datetime
    ) -> list[UpdateOne]:
        """The writes of `register`'s seed markers, for a batch that found nothing and so
        needs no register: they can go out with another write to the same collection."""
        markers = {child_id(run_id, task, url): url for task, url in seeds}
        return [op for _, op in self._marker_ops(markers, run_id, now)]

    @staticmethod
    def _marker_ops(
        markers: dict[str, str], run_id: str, now: datetime
    ) -> list[tuple[str, UpdateOne]]:
        # Upserts that insert only what is missing: an existing marker or child is left as is.
        return [
            (cid, UpdateOne({"_id": cid}, {"$setOnInsert": _marker(run_id, url, now)},
                            upsert=True))
            for cid, url in markers.items()
        ]  # fmt: skip

    def release(self, child_ids: Sequence[Any], now: datetime) -> int:
        """The run counted these children: they may now be planned (idempotent)."""
        if not child_ids:
            return 0
        return self._jobs.update_many(
            {"_id": {"$in": list(child_ids)}, "released": False},
            {"$set": {"released": True, "released_at": now}},
        ).modified_count

    def runs_left_waiting(self, now: datetime, older_than_s: float) -> list[str]:
        """Runs with released children nobody planned for a while (a lost wake-up message)."""
        query = {
            "scope_run": {"$ne": None},
            "state": int(JobState.PENDING),
            "released": True,
            "last_outcome": None,
            "released_at": {"$lt": now - timedelta(seconds=older_than_s)},
        }
        return sorted(r for r in self._jobs.distinct("scope_run", query) if isinstance(r, str))

    def by_depth(self, run_id: str) -> list[dict[str, Any]]:
        """Per depth: discovered, outstanding (pending, waiting or running) and ended children."""
        rows: dict[int, dict[str, Any]] = {}
        pipeline = [
            {"$match": {"scope_run": run_id, "depth": {"$gte": 1}}},
            {"$group": {"_id": {"depth": "$depth", "state": "$state"}, "n": {"$sum": 1}}},
        ]
        for doc in self._jobs.aggregate(pipeline):
            depth = doc["_id"].get("depth") or 0
            row = rows.setdefault(depth, {"depth": depth, "discovered": 0, "outstanding": 0})
            row["discovered"] += doc["n"]
            if doc["_id"].get("state") in (int(JobState.PENDING), int(JobState.RUNNING)):
                row["outstanding"] += doc["n"]
        return [
            {**row, "done": row["discovered"] - row["outstanding"]}
            for _, row in sorted(rows.items())
        ]

    def expire_with_run(self, run_id: str, until: datetime) -> int:
        """Stamp the ended run's discovered jobs (and seed markers) with their expiry date, for
        the TTL index on `expire_at` (`JOB_INDEXES`). Only documents scoped to the run."""
        query = {"scope_run": run_id, EXPIRE_AT: {"$ne": until}}
        return self._jobs.update_many(query, {"$set": {EXPIRE_AT: until}}).modified_count

    def drop_unreleased(self, run_id: str) -> int:
        """Delete the ended run's children it never counted: registered by a copy of a batch
        after another copy ended their page otherwise (and its report was counted), they
        would never be planned, and would show as pages still to crawl."""
        query = {"scope_run": run_id, "released": False, "state": int(JobState.PENDING)}
        return self._jobs.delete_many(query).deleted_count

    def keep_with_run(self, run_id: str) -> int:
        """Take the expiry date off a reopened run's discovered jobs and markers: they are
        needed again until its next end stamps them anew (`expire_with_run`)."""
        query = {"scope_run": run_id, EXPIRE_AT: {"$exists": True}}
        return self._jobs.update_many(query, {"$unset": {EXPIRE_AT: ""}}).modified_count

    def of_run(
        self,
        run_id: str,
        limit: int = 50,
        skip: int = 0,
        outcome: str | None = None,
        errors: bool = False,
    ) -> list[dict[str, Any]]:
        """The run's discovered pages by depth (`outcome`: of that last outcome; `errors`:
        with an error)."""
        fields = {
            "url": 1,
            "task": 1,
            "depth": 1,
            "state": 1,
            "last_outcome": 1,
            "last_error": 1,
            "parent_job": 1,
        }
        query: dict[str, Any] = {"scope_run": run_id, "depth": {"$gte": 1}}
        if outcome is not None:
            query["last_outcome"] = outcome
        if errors:
            query["last_error"] = {"$nin": [None, ""]}
        cursor = self._jobs.find(query, fields).sort([("depth", 1), ("_id", 1)])
        return list(cursor.skip(skip).limit(limit))


def _child_doc(
    run_id: str, dispatch_id: str, media: dict[str, Any], found: Found, now: datetime
) -> dict[str, Any]:
    """A child as its upsert inserts it (its `_id` is the upsert's filter: the stores then
    apply it as a plain-equality upsert, without mongomock's general update code)."""
    d = found.discovery
    return {
        **dict(d.fields),
        **dict(d.handed_down),
        "url": d.url,
        "task": d.task,
        "media_name": media.get("media_name"),
        "media_name_id": media.get("media_name_id"),
        "state": int(JobState.PENDING),
        "enabled": True,
        "execution_date": now,
        "attempt_count": 0,
        "modified_at": now,
        "created_at": now,
        "run_id": run_id,
        "scope_run": run_id,
        "found_by": dispatch_id,
        "parent_job": found.parent_id,
        "depth": d.depth,
        "site": d.site,
        "released": False,
    }


def _marker(run_id: str, url: str, now: datetime) -> dict[str, Any]:
    """A planned page's place among the run's children: already ended, never planned (its
    `_id` is the upsert's filter)."""
    return {
        "url": url,
        "state": int(JobState.DONE),
        "scope_run": run_id,
        "released": True,
        "last_outcome": "planned",
        "depth": 0,
        "created_at": now,
    }
