"""MongoRunStore: per-run counters that finish each run exactly once.

A run is one firing of a schedule. Its `outstanding` count goes up when planning closes (by the
number of jobs claimed for it) and when a crawl discovers children, and down when a dispatch
reports; each report is applied at most once (its key is remembered on the run, checked and
recorded in the same atomic update). A run finishes when planning is closed and nothing is
outstanding; the state change is a compare-and-set, so exactly one caller sees it happen.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bson import ObjectId
from pymongo import DESCENDING, ReturnDocument

from crawlsched.planning.run_names import (
    ENDED,
    FINISHED,
    PLANNING,
    RUNNING,
    is_stopping,
    parent_run_id,
)
from crawlsched.store.counting import CountingDatabase
from crawlsched.store.report_tallies import key_of_field, read_tally, report_inc, tally, tally_field
from crawlsched.store.run_reads import REVISION, RunReads


def revised(update: dict[str, Any]) -> dict[str, Any]:
    """`update` that also sets the run's revision anew: every writer of runs goes through it."""
    return {**update, "$set": {**update.get("$set", {}), REVISION: ObjectId()}}


class MongoRunStore(RunReads):
    def __init__(self, db: CountingDatabase) -> None:
        self._db = db
        self._runs = db.runs

    def create_indexes(self) -> None:
        self._runs.create_index([("created_at", DESCENDING)], name="recent")
        self._runs.create_index([("state", 1)], name="state")
        self._runs.create_index([("parent_id", 1)], name="parent", sparse=True)
        self._runs.create_index([("announce", 1)], name="announce", sparse=True)
        # Runs written before revisions existed take one, so their rows are reused too (a run
        # without one is read and encoded on every page). One value for all is enough: what
        # must differ is a run's revisions over time.
        self._runs.update_many({REVISION: {"$exists": False}}, {"$set": {REVISION: ObjectId()}})

    def open(
        self,
        run_id: str,
        schedule_id: str,
        fire_at: datetime,
        now: datetime,
        parent_id: str | None = None,
    ) -> dict:
        return self._runs.find_one_and_update(
            {"_id": run_id},
            {
                "$setOnInsert": {
                    "schedule_id": schedule_id,
                    "parent_id": parent_id,
                    "fire_at": fire_at,
                    "state": PLANNING,
                    "planning": True,
                    "outstanding": 0,
                    "planned": 0,
                    "counts": {},
                    "stages_ms": {},
                    "reports": [],
                    "created_at": now,
                    REVISION: ObjectId(),
                }
            },
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )

    def close_planning(
        self,
        run_id: str,
        planned: int,
        stats: Mapping[str, Any],
        now: datetime,
        children: int | None = None,
    ) -> dict | None:
        """Close planning once: adds `planned` to outstanding in the same atomic write.

        A parent run of `children` child runs waits for its children instead of its jobs: its
        outstanding count goes up by the number of children, each of which takes one off when
        it ends (`child_ended`).
        """
        return self._runs.find_one_and_update(
            {"_id": run_id, "planning": True},
            revised(
                {
                    "$set": {
                        "planning": False,
                        "state": RUNNING,
                        "planned": planned,
                        "planned_at": now,
                        "plan_stats": dict(stats),
                        "children": children or 0,
                    },
                    "$inc": {"outstanding": planned if children is None else children},
                }
            ),
            return_document=ReturnDocument.AFTER,
        )

    def report(
        self,
        run_id: str,
        report_key: str,
        counts: Mapping[str, int],
        discovered: int = 0,
        stages_ms: Mapping[str, float] | None = None,
        links: int = 0,
        items: Mapping[str, int] | None = None,
        cut: Mapping[str, int] | None = None,
    ) -> dict | None:
        """Apply one report; None when it was applied before (or the run is unknown).

        Child jobs discovered by the reporting crawl (`discovered`) are added in the same `$inc`
        that takes the parent off, so the outstanding count can never touch zero in between.
        `links` are URLs the crawl found: counted for the run, not waited for; `items` its
        results by new / changed / unchanged, `cut` the discoveries a bound refused.

        What a key counted is kept on the run (`tally.<key>`), so a report of the same key that
        finds more ended in its dispatch counts just the difference: a copy of a batch,
        delivered beside another, may end pages under the dispatch id after the other copy's
        report was counted, and they would otherwise never be counted (the run would wait for
        them for ever).
        """
        field = tally_field(report_key)
        counted = tally(counts, discovered)
        inc = report_inc(counts, discovered)
        for stage, ms in (stages_ms or {}).items():
            inc[f"stages_ms.{stage}"] = ms
        for label, n in (items or {}).items():
            inc[f"items.{label}"] = n
        for label, n in (cut or {}).items():
            inc[f"cut.{label}"] = n
        inc["links_discovered"] = links
        # An ended run takes no report (every report it waited for was applied before it
        # ended); its keys are dropped when its end is announced, so this is also what keeps
        # a late duplicate from being counted twice. (`reports`: keys older versions kept.)
        first = self._runs.find_one_and_update(
            {
                "_id": run_id,
                "state": {"$nin": list(ENDED)},
                field: {"$exists": False},
                "reports": {"$ne": report_key},
            },
            revised({"$inc": inc, "$set": {field: counted}}),
            return_document=ReturnDocument.AFTER,
        )
        if first is not None:
            return first
        while True:  # a failed compare-and-set means another report of the key got in
            run = self._runs.find_one({"_id": run_id}, {"state": 1, field: 1})
            applied = read_tally(run, report_key)
            if run is None or run.get("state") in ENDED or applied is None:
                return None
            more = {o: n - applied[0].get(o, 0) for o, n in counts.items()}
            more = {o: n for o, n in more.items() if n > 0}
            more_discovered = max(0, discovered - applied[1])
            if not more and not more_discovered:
                return None  # a duplicate: nothing ended since
            merged = {o: max(n, applied[0].get(o, 0)) for o, n in {**applied[0], **counts}.items()}
            late = self._runs.find_one_and_update(
                {"_id": run_id, "state": {"$nin": list(ENDED)}, field: tally(*applied)},
                revised(
                    {
                        "$inc": report_inc(more, more_discovered),
                        "$set": {field: tally(merged, max(discovered, applied[1]))},
                    }
                ),
                return_document=ReturnDocument.AFTER,
            )
            if late is not None:
                return late

    def record_shortage(
        self, run_id: str, dispatch_id: str, jobs: int, reason: str, now: datetime
    ) -> None:
        """A batch of this run starved: which pool ran short, for `run status` and alerts."""
        self._runs.update_one(
            {"_id": run_id, "shortages.dispatch_id": {"$ne": dispatch_id}},
            revised(
                {
                    "$push": {
                        "shortages": {
                            "dispatch_id": dispatch_id,
                            "jobs": jobs,
                            "reason": reason,
                            "at": now,
                        }
                    }
                }
            ),
        )

    def add_stage_time(self, run_id: str, stage: str, ms: float) -> None:
        self._runs.update_one({"_id": run_id}, revised({"$inc": {f"stages_ms.{stage}": ms}}))

    def child_ended(self, parent_id: str, child_id: str, counts: Mapping[str, int]) -> dict | None:
        """A child run ended: one child off the parent's outstanding count, its job counts
        added to the parent's. Applied once per child (None when applied before)."""
        inc: dict[str, int] = {"outstanding": -1}
        for outcome, n in counts.items():
            inc[f"counts.{outcome}"] = n
        key = f"child:{child_id}"
        return self._runs.find_one_and_update(
            {"_id": parent_id, "state": {"$nin": list(ENDED)}, "reports": {"$ne": key}},
            revised({"$inc": inc, "$push": {"reports": key}}),
            return_document=ReturnDocument.AFTER,
        )

    def finish(
        self,
        run_id: str,
        now: datetime,
        state: str = FINISHED,
        result: str = "",
        timeline: Mapping[str, Any] | None = None,
    ) -> bool:
        """True for exactly one caller: the one whose compare-and-set ended the run.

        `timeline` is what the run's page reads from rows retention may delete later (its
        pages per second, per depth): frozen onto the run in the same write."""
        ended: dict[str, Any] = {
            "state": state,
            "result": result or state,
            "finished_at": now,
            # The outbox mark, in the same write as the end: until `announced` clears
            # it, the relay knows the end event, webhook and parent count may be owed.
            "announce": "pending",
        }
        if timeline is not None:
            ended["timeline"] = dict(timeline)
        update = self._runs.update_one(
            {"_id": run_id, "state": RUNNING, "planning": False, "outstanding": {"$lte": 0}},
            revised(
                {
                    "$set": ended,
                    # A run reopened by retry-failed ends again: each end has an id of its own.
                    "$inc": {"ends": 1},
                    "$unset": {"paused": ""},
                }
            ),
        )
        return update.modified_count == 1

    def announced(self, run_id: str, given_up: list[dict] | None = None) -> None:
        """Everyone who must hear of this run's end has it in their outbox. The pages it gave
        up are named on the run from now on (its discovered pages expire), and what only a
        running run needs goes (its report keys: an ended run takes no report, and the
        dispatches older versions noted as reclaimed), so a kept run costs its counts, not its
        history."""
        self._runs.update_one(
            {"_id": run_id},
            revised(
                {
                    "$unset": {"announce": "", "reports": "", "tally": "", "reclaimed": ""},
                    "$set": {"given_up": given_up or []},
                }
            ),
        )

    def unannounced(self, ended_before: datetime, limit: int = 100) -> list[dict]:
        """Ended runs whose announcement a crash may have cut short."""
        query = {"announce": "pending", "finished_at": {"$lt": ended_before}}
        fields = {"reports": 0, "tally": 0, "reclaimed": 0, REVISION: 0}
        return list(self._runs.find(query, fields).limit(limit))

    def request_stop(self, run_id: str, now: datetime, task: str | None = None) -> dict | None:
        """Mark a run (or one task of it) stopping; None if it has ended or does not exist.

        Crawl actors read this between jobs, the planner before each dispatch, the
        gatekeepers before each admission.
        """
        change: dict[str, Any] = (
            {"$set": {"stop_requested": True, "stop_requested_at": now}}
            if task is None
            else {"$addToSet": {"stopped_tasks": task}, "$set": {"stop_requested_at": now}}
        )
        return self._runs.find_one_and_update(
            {"_id": run_id, "state": {"$in": [PLANNING, RUNNING]}},
            revised(change),
            projection={"reports": 0, "tally": 0, REVISION: 0},
            return_document=ReturnDocument.AFTER,
        )

    def stopping(self, run_id: str, task: str) -> bool:
        """Whether work of `task` in this run must stop (one small read).

        A child run also stops with its parent: a stop that came while the parent was still
        planning flagged the parent before the children existed.
        """
        return self.hold_state(run_id, task) == "stop"

    def hold_state(self, run_id: str, task: str) -> str | None:
        """ "stop" when work of `task` in this run must stop, "pause" when it must wait, else
        None: one small read of the run and its parent (a parent's flag holds its children)."""
        ids = [run_id, parent] if (parent := parent_run_id(run_id)) else [run_id]
        docs = list(
            self._runs.find(
                {"_id": {"$in": ids}},
                {"stop_requested": 1, "stopped_tasks": 1, "state": 1, "paused": 1},
            )
        )
        if any(is_stopping(doc, task) for doc in docs):
            return "stop"
        return "pause" if any(doc.get("paused") for doc in docs) else None

    def set_paused(self, run_id: str, now: datetime) -> dict | None:
        """Flag an open run paused; None if it was paused already, has ended or is stopping."""
        return self._runs.find_one_and_update(
            {
                "_id": run_id,
                "state": {"$in": [PLANNING, RUNNING]},
                "paused": {"$ne": True},
                "stop_requested": {"$ne": True},
            },
            revised({"$set": {"paused": True, "paused_at": now}}),
            projection={"reports": 0, "tally": 0, REVISION: 0},
            return_document=ReturnDocument.AFTER,
        )

    def clear_paused(self, run_id: str, now: datetime) -> dict | None:
        """Lift a pause; None if the run was not paused."""
        return self._runs.find_one_and_update(
            {"_id": run_id, "paused": True},
            revised({"$unset": {"paused": ""}, "$set": {"resumed_at": now}}),
            projection={"reports": 0, "tally": 0, REVISION: 0},
            return_document=ReturnDocument.AFTER,
        )

    def applied_reports(self, run_id: str) -> set[str]:
        doc = self._runs.find_one({"_id": run_id}, {"reports": 1, "tally": 1}) or {}
        keys = {r for r in doc.get("reports", []) if isinstance(r, str)}
        tallies = doc.get("tally") if isinstance(doc.get("tally"), dict) else {}
        return keys | {key_of_field(k) for k in tallies}

    def take_back(
        self, run_id: str, key: str, inc: Mapping[str, int], now: datetime
    ) -> dict | None:
        """Take failed pages back into a running or finished run, once per `key`: their counts
        off their outcomes and onto `outstanding` (`run_control.moved_counts`), in one atomic
        update that also reopens a finished run. None when the run cannot take them (ended
        otherwise, planning, stopping, its end not yet announced) or the key was applied."""
        return self._runs.find_one_and_update(
            {
                "_id": run_id,
                "state": {"$in": [RUNNING, FINISHED]},
                "planning": False,
                "stop_requested": {"$ne": True},
                "announce": {"$exists": False},
                "reports": {"$ne": key},
            },
            revised(
                {
                    "$set": {"state": RUNNING, "retried_at": now},
                    # What its end froze and named is of that end: the next end sets them anew.
                    "$unset": {"result": "", "finished_at": "", "given_up": "", "timeline": ""},
                    "$inc": {**inc, "retries": 1},
                    "$push": {"reports": key},
                }
            ),
            projection={"reports": 0, "tally": 0, REVISION: 0},
            return_document=ReturnDocument.AFTER,
        )
