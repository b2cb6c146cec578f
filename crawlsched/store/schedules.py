"""MongoScheduleStore: schedules, their operations, and due fire times committed by
compare-and-set on `next_fire_at`, so exactly one ticker fires each time whatever the number of
tickers and clocks."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError

from crawlsched.catalog import TARGET_KINDS
from crawlsched.errors import ScheduleExists, ScheduleNotFound, ScheduleStateError
from crawlsched.schedules.policies import FirePlan
from crawlsched.store.counting import CountingDatabase

# Runs in these states hold a schedule's "previous run still running" for the overlap policy.
ACTIVE_RUN_STATES = ["planning", "running"]


def default_sweeps(now: datetime) -> list[dict[str, Any]]:
    """The two sweeps of the original system: profiles every 5 minutes, websites every 15."""
    return [
        {
            "_id": f"sweep-{kind.collection}",
            "kind": "sweep",
            "collections": [kind.collection],
            "interval_s": kind.sweep_interval_s,
            "anchor": now,
            "next_fire_at": now,
            "enabled": True,
        }
        for kind in TARGET_KINDS.values()
    ]


class MongoScheduleStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._schedules = db.schedules
        self._runs = db.runs

    def create_indexes(self) -> None:
        self._schedules.create_index(
            [("enabled", ASCENDING), ("next_fire_at", ASCENDING)], name="due"
        )
        self._schedules.create_index([("owner", ASCENDING)], name="owner")
        # The fire times committed and not yet planned (the ticker's look at every tick).
        self._schedules.create_index(
            [("unsent_fires", ASCENDING)], name="unsent_fires", sparse=True
        )
        self._schedules.create_index(
            [("buffered_fire_at", ASCENDING)], name="buffered", sparse=True
        )
        self._runs.create_index(
            [("schedule_id", ASCENDING), ("state", ASCENDING)], name="schedule_state"
        )

    def ensure_defaults(self, now: datetime) -> int:
        """Insert the default sweeps if missing; never moves an existing schedule."""
        added = 0
        for doc in default_sweeps(now):
            result = self._schedules.update_one(
                {"_id": doc["_id"]}, {"$setOnInsert": doc}, upsert=True
            )
            added += 1 if result.upserted_id is not None else 0
        return added

    def due(self, now: datetime) -> list[dict[str, Any]]:
        return list(self._schedules.find({"enabled": True, "next_fire_at": {"$lte": now}}))

    def commit(self, schedule: dict[str, Any], plan: FirePlan) -> bool:
        """Apply a fire plan if no other ticker has moved the schedule since we read it.

        The filter holds both fields the plan was computed from, so of two tickers that read
        the same schedule exactly one writes; the loser plans nothing and records nothing. The
        fire times go into `unsent_fires` in the same write (an outbox): until a planner opens
        their run (`fire_planned`), the ticker sends them again (`unsent_fires_before`), so a
        ticker that dies between this write and its send loses no firing.
        """
        push = {"$push": {"unsent_fires": {"$each": list(plan.fire)}}} if plan.fire else {}
        result = self._schedules.update_one(
            {
                "_id": schedule["_id"],
                "next_fire_at": schedule["next_fire_at"],
                "buffered_fire_at": schedule.get("buffered_fire_at"),
            },
            {
                "$set": {
                    "next_fire_at": plan.next_fire_at,
                    "buffered_fire_at": plan.buffered,
                    "last_fired_at": plan.fire[-1] if plan.fire else schedule.get("last_fired_at"),
                    # A one-time schedule that has fired (or missed) is spent.
                    **(
                        {"enabled": False, "state": "done"}
                        if plan.next_fire_at is None and plan.buffered is None
                        else {}
                    ),
                },
                "$inc": {"fired": len(plan.fire), "missed": len(plan.missed)},
                **push,
            },
        )
        return result.modified_count == 1

    def fire_planned(self, schedule_id: str, fire_at: datetime) -> None:
        """A planner opened the run of this fire time: it no longer needs sending."""
        self._schedules.update_one({"_id": schedule_id}, {"$pull": {"unsent_fires": fire_at}})

    def unsent_fires_before(self, before: datetime) -> list[tuple[str, datetime]]:
        """Fire times committed before `before` whose run no planner has opened (a ticker
        died between committing and sending them, or the message was lost)."""
        query = {"unsent_fires": {"$elemMatch": {"$lt": before}}}
        found = []
        for doc in self._schedules.find(query, {"unsent_fires": 1}):
            found += [(doc["_id"], at) for at in doc["unsent_fires"] if at < before]
        return found

    def buffered(self) -> list[dict[str, Any]]:
        """Enabled schedules holding a fire time back until their previous run ends."""
        return list(self._schedules.find({"enabled": True, "buffered_fire_at": {"$ne": None}}))

    def previous_running(self, schedule_id: str) -> bool:
        return (
            self._runs.find_one(
                {"schedule_id": schedule_id, "state": {"$in": ACTIVE_RUN_STATES}}, {"_id": 1}
            )
            is not None
        )

    # -- operations -----------------------------------------------------------------------

    def insert(self, doc: dict[str, Any]) -> None:
        try:
            self._schedules.insert_one(doc)
        except DuplicateKeyError:
            raise ScheduleExists(doc["_id"]) from None

    def require(self, schedule_id: str, operation: str, allowed: tuple[str, ...]) -> dict:
        """The schedule, if its state allows `operation`; else a one-line error."""
        doc = self.get(schedule_id)
        if doc is None:
            raise ScheduleNotFound(schedule_id)
        state = doc.get("state", "active")
        if state not in allowed:
            raise ScheduleStateError(schedule_id, state, operation)
        return doc

    def transition(
        self, doc: dict[str, Any], operation: str, fields: dict[str, Any]
    ) -> dict[str, Any]:
        """Set `fields` if the schedule is still in the state it was read in (else it changed
        under us: say so rather than overwrite)."""
        state = doc.get("state", "active")
        state_filter: Any = state if "state" in doc else {"$in": [None, "active"]}
        result = self._schedules.update_one(
            {"_id": doc["_id"], "state": state_filter, "next_fire_at": doc.get("next_fire_at")},
            {"$set": fields},
        )
        if result.matched_count != 1:
            raise ScheduleStateError(doc["_id"], "being changed by someone else", operation)
        return {**doc, **fields}

    def for_owner(self, owner: str | None, include_deleted: bool = False) -> list[dict]:
        query: dict[str, Any] = {} if include_deleted else {"state": {"$ne": "deleted"}}
        if owner is not None:
            query["owner"] = owner
        return list(self._schedules.find(query).sort("_id", ASCENDING))

    def fire_now(self, schedule_id: str, now: datetime) -> int:
        """Make a schedule due immediately (the demo and `crawlsched sweep now`)."""
        return self._schedules.update_one(
            {"_id": schedule_id}, {"$set": {"next_fire_at": now - timedelta(microseconds=1)}}
        ).matched_count

    def get(self, schedule_id: str) -> dict[str, Any] | None:
        return self._schedules.find_one({"_id": schedule_id})

    def all(self) -> list[dict[str, Any]]:
        return list(self._schedules.find({}))
