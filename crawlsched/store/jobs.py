"""MongoJobStore: the planning pipeline, outcomes, expiry and insertion of jobs (its claims and
dispatch leases: `store.job_claims`; what a dispatch did: `store.dispatch_reports`).

Every write that depends on who holds a job carries its `dispatch_id` in the filter, so a
redelivered or late message can never change a job that was since handed to someone else.
Writes go in bulk: one command per batch of decisions, never one per job.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pymongo import InsertOne, UpdateOne
from pymongo.errors import BulkWriteError

from crawlsched.catalog import JobState
from crawlsched.planning.due import Category
from crawlsched.planning.outcomes import JobUpdate
from crawlsched.planning.problems import Problem, ReferenceIndex
from crawlsched.store.children import MARKER_FILTER
from crawlsched.store.counting import CountingDatabase
from crawlsched.store.dispatch_reports import DispatchReport, tally_dispatch
from crawlsched.store.job_admin import JobAdmin
from crawlsched.store.job_claims import REDO_FIELDS, REFUSALS, JobClaims
from crawlsched.store.job_indexes import JOB_INDEXES
from crawlsched.store.pipeline import (
    AUDIT_FIELDS,
    MEDIA_COLLECTION,
    TASKS_COLLECTION,
    UNDATED,
    audit_filter,
    due_filter,
    planning_pipeline,
    row_category,
)
from crawlsched.store.take_overs import BEGUN_BY, UNSTARTED, TakeOvers

# What the audit reads of the reference rows to judge a (media, task) pair.
MEDIA_JOIN_FIELDS = ("media_name", "media_name_id", "enabled")
TASK_JOIN_FIELDS = ("media_name_id", "name", "enabled")

# Rows per cursor batch while planning: a reply holds at most this many small documents.
PLANNING_BATCH = 500


@dataclass(frozen=True)
class ExpiredDispatch:
    run_id: str | None
    dispatch_id: str
    jobs: list[dict[str, Any]]


class MongoJobStore(JobClaims, TakeOvers, JobAdmin):
    def __init__(self, db: CountingDatabase, collection: str) -> None:
        self._db = db
        self.collection_name = collection
        self._jobs = db[collection]

    def create_indexes(self) -> None:
        # An earlier version's index rejected documents without a target: replace it.
        if "target_task" in self._jobs.index_information():
            self._jobs.drop_index("target_task")
        for keys, options in JOB_INDEXES:
            self._jobs.create_index(keys, **options)

    # -- planning -------------------------------------------------------------------------

    def due_tasks(
        self,
        now: datetime,
        targets: Sequence[str] | None = None,
        match: dict[str, Any] | None = None,
    ) -> list[str]:
        """Tasks with at least one due job: the others are skipped without an aggregation."""
        due = match or due_filter(now, targets=None if targets is None else list(targets))
        return sorted(t for t in self._jobs.distinct("task", due) if isinstance(t, str))

    def due_rows(
        self,
        task: str,
        now: datetime,
        target_fields: Sequence[str] = (),
        targets: Sequence[str] | None = None,
        match: dict[str, Any] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The pipeline for one task, streamed: due jobs joined, in priority order (`match`
        replaces the due filter, with the task added).

        Stopping early (a claim cap) closes the server cursor.
        """
        if match is not None:
            match = {**match, "task": task}
        cursor = self._jobs.aggregate(
            planning_pipeline(
                task, now, list(target_fields), None if targets is None else list(targets), match
            ),
            batchSize=PLANNING_BATCH,
        )
        try:
            yield from cursor
        finally:
            close = getattr(cursor, "close", None)
            if close is not None:
                close()

    def categorized(
        self, task: str, now: datetime, target_fields: Sequence[str] = ()
    ) -> dict[Category, list[dict[str, Any]]]:
        """The four lists, each in priority order (everything in memory: for small reads)."""
        lists: dict[Category, list[dict[str, Any]]] = {category: [] for category in Category}
        for row in self.due_rows(task, now, target_fields):
            lists[row_category(row)].append(row)
        return lists

    def audit(self, now: datetime) -> list[dict[str, Any]]:
        """Jobs the planning pipeline can never return, each with its `media` row (or None)
        and its `task_row`s, for `planning.problems.diagnose` to say why.

        Without a join per job: the (media, task) pairs the jobs use come from one `distinct`
        per task and are judged against the reference rows (a few, read whole); then only the
        jobs of a pair that can't plan, or whose execution date is not a date, are read.
        Jobs with no media name or no task never plan: they are read too.
        """
        base = audit_filter(now)
        reference = ReferenceIndex(
            self._db[MEDIA_COLLECTION].find({}, dict.fromkeys(MEDIA_JOIN_FIELDS, 1)),
            self._db[TASKS_COLLECTION].find({}, dict.fromkeys(TASK_JOIN_FIELDS, 1)),
        )
        stuck: list[dict[str, Any]] = [{"media_name": None}, {"task": None}, UNDATED]
        for task in self._jobs.distinct("task", base):
            for name in self._jobs.distinct("media_name", {**base, "task": {"$eq": task}}):
                if not reference.plans(name, task):
                    stuck.append({"media_name": {"$eq": name}, "task": {"$eq": task}})
        rows = []
        for doc in self._jobs.find({**base, "$or": stuck}, dict.fromkeys(AUDIT_FIELDS, 1)):
            media, task_rows = reference.join(doc.get("media_name"), doc.get("task"))
            rows.append({**doc, "media": media, "task_row": task_rows})
        return rows

    def set_aside(self, problems: Iterable[Problem], now: datetime) -> int:
        """Flag jobs that can't be planned so sweeps stop looking at them; returns how many."""
        ops = [
            UpdateOne(
                {"_id": p.job_id, "problem": None},
                {"$set": {"problem": {"reason": p.reason, "found_at": now}}},
            )
            for p in problems
        ]
        return self._jobs.bulk_write(ops, ordered=False).modified_count if ops else 0

    def clear_problems(self) -> int:
        return self._jobs.update_many(
            {"problem": {"$ne": None}}, {"$unset": {"problem": ""}}
        ).modified_count

    def problems(self) -> list[dict[str, Any]]:
        return list(
            self._jobs.find(
                {"problem": {"$ne": None}},
                {"target": 1, "task": 1, "media_name_id": 1, "problem": 1},
            )
        )

    # -- crawling -------------------------------------------------------------------------

    def load_claimed(self, dispatch_id: str, job_ids: Sequence[Any]) -> list[dict[str, Any]]:
        """The jobs this dispatch still holds: those of `job_ids` in the message's order, then
        any others it holds, which it took over from batches that had not begun (`take_over`)
        before its worker died: the message did not list them, the store says they are its."""
        held = self._jobs.find({"dispatch_id": dispatch_id, "state": 2})
        found = {doc["_id"]: doc for doc in held}
        listed = [found.pop(job_id) for job_id in job_ids if job_id in found]
        return listed + list(found.values())

    def load_and_begin(self, dispatch_id: str, job_ids: Sequence[Any]) -> list[dict[str, Any]]:
        """The jobs the dispatch holds (`load_claimed`), begun: each is then either its own and
        never taken over, or taken over before and not returned. Read first, then marked begun:
        when the write began fewer than the read found unbegun, a running batch took some over
        between the two, and the jobs are read again. A batch whose jobs were all taken over
        (most often, in a crawl paced by its hosts) costs the one read."""
        jobs = self.load_claimed(dispatch_id, job_ids)
        unstarted = {doc["_id"] for doc in jobs if doc.get(UNSTARTED)}
        copy = uuid.uuid4().hex if unstarted else ""
        if unstarted and self.begin(dispatch_id, list(unstarted), copy) < len(unstarted):
            # Not ours, of those read unbegun: the ones another copy of this message, delivered
            # at the same time, began (same dispatch id, so the read still finds them). It
            # crawls them; this copy would fetch them again, and could register children for a
            # page the other copy ended otherwise, which no count would ever include.
            jobs = [
                doc
                for doc in self.load_claimed(dispatch_id, job_ids)
                if doc["_id"] not in unstarted or doc.get(BEGUN_BY) == copy
            ]
        for doc in jobs:
            doc.pop(UNSTARTED, None)  # (begun: the read is older than the write)
        return jobs

    def record(
        self,
        dispatch_id: str,
        updates: Sequence[JobUpdate],
        now: datetime,
        also: Sequence[UpdateOne] = (),
    ) -> int:
        """Write the outcome of each job of a dispatch, in one command; returns how many took.

        `also`: upserts to the same collection that ride along in that command (seed markers,
        `MongoChildStore.marker_ops`); they insert or leave alone, so they modify nothing and
        the count stays the jobs'."""
        ops = []
        for u in updates:
            fields: dict[str, Any] = {
                "state": int(u.state),
                "attempt_count": u.attempt_count,
                "exhausted": u.exhausted,
                "last_dispatch_id": dispatch_id,
                "last_outcome": u.outcome,
                "last_error": u.error,
                "last_discovered": u.discovered,
                "last_items": dict(u.items),
                "last_cut": dict(u.cut),
                "modified_at": now,
            }
            if u.execution_date is not None:
                fields["execution_date"] = u.execution_date
            if u.recrawl is not None:
                fields["recrawl"] = dict(u.recrawl)
            unset = {"dispatch_id": "", "lease_deadline": "", REFUSALS: "", BEGUN_BY: ""}
            if u.redo_run is not None:
                fields.update(redo_run=u.redo_run, redo_tries=u.redo_tries)
            else:
                unset.update(REDO_FIELDS)
            ops.append(
                UpdateOne(
                    {"_id": u.job_id, "dispatch_id": dispatch_id}, {"$set": fields, "$unset": unset}
                )
            )
        if not ops:
            return 0
        return self._jobs.bulk_write([*ops, *also], ordered=False).modified_count

    def outcomes_of(self, dispatch_id: str, labels: Iterable[str]) -> dict[str, int]:
        """How the jobs of a dispatch ended, counting only the outcome labels asked for.

        Each reporter (crawl, admission, expiry) writes its own labels and reads back only
        those, so a redelivered message rebuilds the very report it sent before.
        """
        counts: dict[str, int] = {}
        query = {"last_dispatch_id": dispatch_id, "last_outcome": {"$in": sorted(labels)}}
        for doc in self._jobs.find(query, {"last_outcome": 1}):
            outcome = doc.get("last_outcome") or "unknown"
            counts[outcome] = counts.get(outcome, 0) + 1
        return counts

    def dispatch_report(
        self, dispatch_id: str, run_id: str, labels: Iterable[str]
    ) -> DispatchReport:
        """What the store shows a dispatch of this run did: the coordinator believes only this.

        `held` counts jobs the dispatch still holds (a genuine report is sent only after its
        dispatch let go of every job); the counts and links come from the jobs of that run whose
        last outcome was written by that dispatch, with one of the labels of its phase (one
        read, on the `dispatch` and `last_dispatch` indexes); the children are those whose
        parent page is one of those (a second read, on `parent_job`): a page's children are
        counted when its end is, whoever registered them. So a copy of a batch that ran beside
        it and registered what it found after the batch's report was applied leaves nothing
        uncounted: those children are counted when their parent page ends (recorded by
        whichever dispatch crawls it).
        """
        wanted = sorted(labels)
        ended = {"last_dispatch_id": dispatch_id, "run_id": run_id, "last_outcome": {"$in": wanted}}
        query = {"$or": [{"dispatch_id": dispatch_id}, ended]}
        fields = {
            "dispatch_id": 1,
            "last_dispatch_id": 1,
            "run_id": 1,
            "last_outcome": 1,
            "last_discovered": 1,
            "last_items": 1,
            "last_cut": 1,
        }
        seen = tally_dispatch(self._jobs.find(query, fields), dispatch_id, run_id, wanted)
        if not seen.ended:
            return seen
        of = {"parent_job": {"$in": list(seen.ended)}, "scope_run": run_id}
        children = tuple(doc["_id"] for doc in self._jobs.find(of, {"_id": 1}))
        return replace(seen, discovered=len(children), children=children)

    # -- expiry ---------------------------------------------------------------------------

    def expired(self, now: datetime, limit: int = 10_000) -> list[ExpiredDispatch]:
        """Running jobs whose dispatch lease has passed, grouped by dispatch."""
        by_dispatch: dict[str, ExpiredDispatch] = {}
        cursor = self._jobs.find(
            {"state": int(JobState.RUNNING), "lease_deadline": {"$lt": now}},
            {
                "_id": 1,
                "dispatch_id": 1,
                "run_id": 1,
                "attempt_count": 1,
                "task": 1,
                "media_name": 1,
                "redo_run": 1,
                "redo_tries": 1,
            },
        ).limit(limit)
        for doc in cursor:
            dispatch_id = doc.get("dispatch_id") or f"orphan-{doc['_id']}"
            entry = by_dispatch.setdefault(
                dispatch_id, ExpiredDispatch(doc.get("run_id"), dispatch_id, [])
            )
            entry.jobs.append(doc)
        return list(by_dispatch.values())

    # -- adding jobs ----------------------------------------------------------------------

    def insert_new(self, docs: Sequence[Mapping[str, Any]]) -> tuple[int, list[Any]]:
        """Insert jobs; a (media, target, task) that exists already is skipped, not duplicated.

        Returns (how many were inserted, the targets of the skipped duplicates).
        """
        if not docs:
            return 0, []
        ops = [
            UpdateOne(
                {"media_name_id": d["media_name_id"], "target": d["target"], "task": d["task"]},
                {"$setOnInsert": dict(d)},
                upsert=True,
            )
            for d in docs
        ]
        result = self._jobs.bulk_write(ops, ordered=False)
        inserted = set(result.upserted_ids)
        skipped = [docs[i].get("target") for i in range(len(docs)) if i not in inserted]
        return len(inserted), skipped

    def insert_preserved(self, docs: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        """Insert job documents keeping their `_id`; one that exists already (same `_id`, or
        same media, target and task) is skipped. Returns (inserted, skipped)."""
        if not docs:
            return 0, 0
        ops = [
            UpdateOne({"_id": d["_id"]}, {"$setOnInsert": dict(d)}, upsert=True)
            if "_id" in d
            else InsertOne(dict(d))
            for d in docs
        ]
        try:
            result = self._jobs.bulk_write(ops, ordered=False)
            inserted = result.upserted_count + result.inserted_count
        except BulkWriteError as e:
            duplicates = [w for w in e.details.get("writeErrors", []) if w.get("code") == 11000]
            if len(duplicates) != len(e.details.get("writeErrors", [])):
                raise
            inserted = e.details.get("nUpserted", 0) + e.details.get("nInserted", 0)
        return inserted, len(docs) - inserted

    def count_present(self, docs: Sequence[Mapping[str, Any]]) -> int:
        """How many of these job documents the store holds (by `_id` where they carry one,
        else by media, target and task): to read back a write whose answer never came."""
        by_id = [d["_id"] for d in docs if "_id" in d]
        by_key = [
            {"media_name_id": d["media_name_id"], "target": d["target"], "task": d["task"]}
            for d in docs
            if "_id" not in d
        ]
        found = self._jobs.count_documents({"_id": {"$in": by_id}}) if by_id else 0
        if by_key:
            found += self._jobs.count_documents({"$or": by_key})
        return found

    def summary(self) -> dict[str, int]:
        """Jobs per state code (`"1"` …); seed markers are not jobs (`pages_seen`)."""
        counts: dict[str, int] = {}
        pipeline = [
            {"$match": {"$nor": [MARKER_FILTER]}},
            {"$group": {"_id": "$state", "n": {"$sum": 1}}},
        ]
        for row in self._jobs.aggregate(pipeline):
            counts[str(row["_id"])] = row["n"]
        return counts

    def pages_seen(self) -> int:
        """Seed markers: planned pages a run remembers having crawled (not jobs)."""
        return self._jobs.count_documents(MARKER_FILTER)
