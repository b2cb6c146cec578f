"""MongoJobStore: the planning pipeline, atomic claims, releases, outcomes and expiry of jobs.

Every write that depends on who holds a job carries its `dispatch_id` in the filter, so a
redelivered or late message can never change a job that was since handed to someone else.
Writes go in bulk: one command per batch of decisions, never one per job.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING, DESCENDING, InsertOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError

from crawlsched.catalog import JobState
from crawlsched.planning.due import Category
from crawlsched.planning.outcomes import JobUpdate
from crawlsched.planning.problems import Problem, ReferenceIndex
from crawlsched.planning.retention import EXPIRE_AT
from crawlsched.store.children import MARKER_FILTER
from crawlsched.store.counting import CountingDatabase
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

JOB_INDEXES: list[tuple[list[tuple[str, int]], dict[str, Any]]] = [
    # The pipeline's $match + $sort.
    (
        [
            ("task", ASCENDING),
            ("state", ASCENDING),
            ("execution_date", ASCENDING),
            ("human_validation", DESCENDING),
            ("certitude", DESCENDING),
            ("modified_at", ASCENDING),
        ],
        {"name": "due_by_priority"},
    ),
    ([("dispatch_id", ASCENDING)], {"name": "dispatch", "sparse": True}),
    ([("last_dispatch_id", ASCENDING)], {"name": "last_dispatch", "sparse": True}),
    ([("run_id", ASCENDING)], {"name": "run", "sparse": True}),
    # A run's discovered jobs: its children pass, `run status` per depth, the ticker's sweep.
    (
        [("scope_run", ASCENDING), ("state", ASCENDING), ("task", ASCENDING)],
        {"name": "children", "sparse": True},
    ),
    ([("found_by", ASCENDING)], {"name": "found_by", "sparse": True}),
    # Discovered jobs expire after their run ended (`MongoChildStore.expire_with_run` sets the
    # date then); imported and scheduled jobs never carry the field, so never expire.
    ([(EXPIRE_AT, ASCENDING)], {"name": "expiry", "expireAfterSeconds": 0, "sparse": True}),
    ([("state", ASCENDING), ("lease_deadline", ASCENDING)], {"name": "running_by_deadline"}),
    # Jobs the machinery failed, waiting for another try in their run (the ticker's sweep).
    ([("redo_run", ASCENDING), ("execution_date", ASCENDING)], {"name": "redo", "sparse": True}),
    # One job per (media, target, task) among the jobs we write; the old system's jobs carry
    # no `target` and are left out of the index rather than rejected by it.
    (
        [("media_name_id", ASCENDING), ("target", ASCENDING), ("task", ASCENDING)],
        {
            "name": "target_task_unique",
            "unique": True,
            "partialFilterExpression": {"target": {"$type": "string"}},
        },
    ),
]


# What the audit reads of the reference rows to judge a (media, task) pair.
MEDIA_JOIN_FIELDS = ("media_name", "media_name_id", "enabled")
TASK_JOIN_FIELDS = ("media_name_id", "name", "enabled")

# Rows per cursor batch while planning: a reply holds at most this many small documents.
PLANNING_BATCH = 500


@dataclass(frozen=True)
class ClaimRequest:
    dispatch_id: str
    job_ids: Sequence[Any]


@dataclass(frozen=True)
class ExpiredDispatch:
    run_id: str | None
    dispatch_id: str
    jobs: list[dict[str, Any]]


@dataclass(frozen=True)
class DispatchReport:
    held: int  # jobs the dispatch still holds
    counts: dict[str, int]  # outcome -> jobs
    links: int  # URLs its crawls found (counted, whether or not they became children)
    discovered: int = 0  # child jobs of the run registered by this dispatch's crawls
    items: dict[str, int] = field(default_factory=dict)  # new / changed / unchanged results
    cut: dict[str, int] = field(default_factory=dict)  # discoveries refused by a bound


class MongoJobStore:
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

    # -- claims ---------------------------------------------------------------------------

    def claim(
        self,
        requests: Sequence[ClaimRequest],
        run_id: str,
        lease_deadline: datetime,
        only: Mapping[str, Any] | None = None,
    ) -> dict[str, list[Any]]:
        """Claim each batch atomically; return, per dispatch id, the jobs really claimed.

        Two commands whatever the size: one bulk of conditional updates (a job still pending or
        failed becomes running under that dispatch id), then one read of who got what. A job
        another planner claimed first simply is not in our answer. `only` adds conditions (a
        run's children: never tried, so one that ended meanwhile is not claimed again).
        """
        if not requests:
            return {}
        ops = [
            UpdateMany(
                {
                    "_id": {"$in": list(r.job_ids)},
                    "state": {"$in": [1, 3]},
                    "dispatch_id": None,
                    **(only or {}),
                },
                {
                    "$set": {
                        "state": int(JobState.RUNNING),
                        "dispatch_id": r.dispatch_id,
                        "run_id": run_id,
                        "lease_deadline": lease_deadline,
                    }
                },
            )
            for r in requests
        ]
        self._jobs.bulk_write(ops, ordered=False)
        claimed: dict[str, list[Any]] = {r.dispatch_id: [] for r in requests}
        for doc in self._jobs.find(
            {"dispatch_id": {"$in": list(claimed)}}, {"_id": 1, "dispatch_id": 1}
        ):
            claimed[doc["dispatch_id"]].append(doc["_id"])
        # Keep the planner's priority order inside each batch.
        for r in requests:
            got = set(claimed[r.dispatch_id])
            claimed[r.dispatch_id] = [job_id for job_id in r.job_ids if job_id in got]
        return claimed

    def count_claimed_for_run(self, run_id: str) -> int:
        """Jobs planned for the run (its discovered children are counted by their reports)."""
        return self._jobs.count_documents({"run_id": run_id, "scope_run": None})

    def release(
        self, dispatch_id: str, outcome: str = "starved", job_ids: Sequence[Any] | None = None
    ) -> int:
        """Give a dispatch's jobs (all, or `job_ids`) back untouched (pending, same
        attempt_count), labelled `outcome`: starved, or stopped."""
        query: dict[str, Any] = {"dispatch_id": dispatch_id, "state": int(JobState.RUNNING)}
        if job_ids is not None:
            query["_id"] = {"$in": list(job_ids)}
        return self._jobs.update_many(
            query,
            {
                "$set": {
                    "state": int(JobState.PENDING),
                    "last_dispatch_id": dispatch_id,
                    "last_outcome": outcome,
                },
                # Counted ended in its run: no longer waiting there for another try.
                "$unset": {"dispatch_id": "", "lease_deadline": "", **REDO_FIELDS},
            },
        ).modified_count

    def give_back_unsent(self, dispatch_ids: Sequence[str]) -> int:
        """Undo the claims of dispatches whose batch message never left (RabbitMQ did not
        confirm it): the jobs are pending again, in no run, as if never planned — no outcome,
        no attempt — so the planner's retry, or the next firing, claims them at once instead
        of after the dispatch lease."""
        if not dispatch_ids:
            return 0
        return self._jobs.update_many(
            {"dispatch_id": {"$in": list(dispatch_ids)}, "state": int(JobState.RUNNING)},
            {
                "$set": {"state": int(JobState.PENDING)},
                "$unset": {"dispatch_id": "", "lease_deadline": "", "run_id": ""},
            },
        ).modified_count

    def redo_runs_due(self, now: datetime) -> list[str]:
        """Runs with jobs the machinery failed whose backoff has passed: each needs a pass
        (`flow.children.plan_discovered`) to crawl them again."""
        query = {
            "redo_run": {"$ne": None},
            "state": int(JobState.PENDING),
            "execution_date": {"$lte": now},
        }
        return sorted(r for r in self._jobs.distinct("redo_run", query) if isinstance(r, str))

    def renew_dispatch(self, dispatch_id: str, lease_deadline: datetime) -> int:
        """Move a live dispatch's lease on; returns how many jobs it still holds (0: it was
        reclaimed). Matched, not modified: a renewal to the same instant still holds."""
        return self._jobs.update_many(
            {"dispatch_id": dispatch_id, "state": int(JobState.RUNNING)},
            {"$set": {"lease_deadline": lease_deadline}},
        ).matched_count

    def extend_lease(self, dispatch_id: str, lease_deadline: datetime) -> int:
        return self._jobs.update_many(
            {"dispatch_id": dispatch_id, "state": int(JobState.RUNNING)},
            {"$set": {"lease_deadline": lease_deadline}},
        ).modified_count

    # -- crawling -------------------------------------------------------------------------

    def load_claimed(self, dispatch_id: str, job_ids: Sequence[Any]) -> list[dict[str, Any]]:
        """The jobs of `job_ids` this dispatch still holds, in the message's order."""
        found = {
            doc["_id"]: doc
            for doc in self._jobs.find(
                {"_id": {"$in": list(job_ids)}, "dispatch_id": dispatch_id, "state": 2}
            )
        }
        return [found[job_id] for job_id in job_ids if job_id in found]

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
            unset = {"dispatch_id": "", "lease_deadline": ""}
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
        last outcome was written by that dispatch, with one of the labels of its phase; the
        children are counted from the children themselves, not from what the parent says.

        One read for all three: the query is the union of the three conditions, and each
        document returned is sorted into them by the same conditions, here (a document may meet
        more than one).
        """
        wanted = sorted(labels)
        ended = {"last_dispatch_id": dispatch_id, "run_id": run_id, "last_outcome": {"$in": wanted}}
        children = {"found_by": dispatch_id, "scope_run": run_id}
        query = {"$or": [{"dispatch_id": dispatch_id}, ended, children]}
        fields = {
            "dispatch_id": 1,
            "last_dispatch_id": 1,
            "run_id": 1,
            "last_outcome": 1,
            "last_discovered": 1,
            "last_items": 1,
            "last_cut": 1,
            "found_by": 1,
            "scope_run": 1,
        }
        held = discovered = links = 0
        counts: dict[str, int] = {}
        items: dict[str, int] = {}
        cut: dict[str, int] = {}
        for doc in self._jobs.find(query, fields):
            if doc.get("dispatch_id") == dispatch_id:
                held += 1
            if doc.get("found_by") == dispatch_id and doc.get("scope_run") == run_id:
                discovered += 1
            outcome = doc.get("last_outcome")
            if (
                doc.get("last_dispatch_id") != dispatch_id
                or doc.get("run_id") != run_id
                or not isinstance(outcome, str)
                or outcome not in wanted
            ):
                continue
            counts[outcome] = counts.get(outcome, 0) + 1
            found = doc.get("last_discovered")
            links += found if isinstance(found, int) and found > 0 else 0
            _add_small_counts(items, doc.get("last_items"))
            _add_small_counts(cut, doc.get("last_cut"))
        return DispatchReport(held, counts, links, discovered, items, cut)

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

    # -- admission ------------------------------------------------------------------------

    def priority_of(self, dispatch_id: str) -> dict[str, Any]:
        """The best priority among a dispatch's jobs, read from the jobs themselves."""
        best: dict[str, Any] = {}
        for doc in self._jobs.find(
            {"dispatch_id": dispatch_id, "state": int(JobState.RUNNING)},
            {"human_validation": 1, "certitude": 1, "modified_at": 1},
        ):
            key = (_number(doc.get("human_validation")), _number(doc.get("certitude")))
            if not best or key > (best["human_validation"], best["certitude"]):
                # Keep the oldest date seen so far: it is over all the jobs, not the best one.
                best = {**best, "human_validation": key[0], "certitude": key[1]}
            modified = doc.get("modified_at")
            if isinstance(modified, datetime):
                current = best.get("oldest_modified_at")
                best["oldest_modified_at"] = modified if current is None else min(current, modified)
        return best

    def claimed_ids(self, dispatch_id: str) -> list[Any]:
        return [
            doc["_id"]
            for doc in self._jobs.find(
                {"dispatch_id": dispatch_id, "state": int(JobState.RUNNING)}, {"_id": 1}
            )
        ]

    def reassign(self, dispatch_id: str, new_dispatch_id: str, job_ids: Sequence[Any]) -> int:
        """Move jobs a dispatch still holds to a new dispatch (the rest of an interrupted batch)."""
        return self._jobs.update_many(
            {
                "_id": {"$in": list(job_ids)},
                "dispatch_id": dispatch_id,
                "state": int(JobState.RUNNING),
            },
            {"$set": {"dispatch_id": new_dispatch_id}},
        ).modified_count


# A job waiting in its run for another try after a machinery failure (`outcomes.REDO`).
REDO_FIELDS = {"redo_run": "", "redo_tries": ""}

# Labels a job's item and cut counts may carry (anything else in a document is ignored).
COUNT_LABELS = frozenset(
    {"new", "changed", "unchanged", "depth", "pages", "offsite", "refused", "not_http"}
)


def _add_small_counts(into: dict[str, int], counts: Any) -> None:
    if not isinstance(counts, dict):
        return
    for label, n in counts.items():
        if label in COUNT_LABELS and isinstance(n, int) and not isinstance(n, bool) and n > 0:
            into[label] = into.get(label, 0) + min(n, 1_000_000)


def _number(value: Any) -> float:
    """A sort key's value as a number: booleans and numbers as they are, anything else 0."""
    return float(value) if isinstance(value, int | float) else 0.0


def expiry_deadline(now: datetime, lease_s: float) -> datetime:
    return now + timedelta(seconds=lease_s)
