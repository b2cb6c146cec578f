"""A job store's claims and dispatch leases: who holds which job, until when, and giving jobs
back. Every write carries the holder's `dispatch_id` in its filter, so a late or redelivered
message can never change a job that was since handed to someone else."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo import UpdateMany

from crawlsched.catalog import JobState
from crawlsched.store.counting import CountingCollection
from crawlsched.store.take_overs import UNSTARTED

# A job waiting in its run for another try after a machinery failure (`outcomes.REDO`).
REDO_FIELDS = {"redo_run": "", "redo_tries": ""}
# How often the page's host answered it 429 or 503 in this try of its run (cleared with its
# outcome): past `CRAWLSCHED_HOST_REFUSALS_PER_PAGE` the run gives the page up.
REFUSALS = "host_refusals"


@dataclass(frozen=True)
class PartsLeft:
    """What the dispatches of a batch's parts left behind (`JobClaims.left_under`)."""

    running: dict[str, list[Any]]  # dispatch id -> its running jobs
    ended: set[str]  # the dispatch ids under which jobs of the run ended


@dataclass(frozen=True)
class ClaimRequest:
    dispatch_id: str
    job_ids: Sequence[Any]
    # A batch with no account and no node to lease: until it begins, a running batch of its
    # run may take its jobs over (`TakeOvers.take_over`).
    open_to_take_over: bool = False


class JobClaims:
    """Mixed into `MongoJobStore`: the claims and leases of its collection (`_jobs`)."""

    _jobs: CountingCollection

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
                _claimed_as(r, run_id, lease_deadline),
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

    def confirm_sent(self, dispatch_ids: Sequence[str], lease_deadline: datetime) -> int:
        """The batches of `dispatch_ids` left (RabbitMQ confirmed them): their jobs, claimed
        for a short while only, get the whole dispatch lease. `$max`: a crawl that already
        began and renewed keeps its later deadline."""
        if not dispatch_ids:
            return 0
        return self._jobs.update_many(
            {"dispatch_id": {"$in": list(dispatch_ids)}, "state": int(JobState.RUNNING)},
            {"$max": {"lease_deadline": lease_deadline}},
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

    def left_under(
        self, dispatch_ids: Sequence[str], run_id: str, labels: Collection[str]
    ) -> PartsLeft:
        """What `dispatch_ids` left: the running jobs of each, and those under which a job of
        the run ended with one of `labels` (one read, on the `dispatch` and `last_dispatch`
        indexes)."""
        ids = list(dispatch_ids)
        running = {"dispatch_id": {"$in": ids}, "state": int(JobState.RUNNING)}
        ended = {
            "last_dispatch_id": {"$in": ids},
            "run_id": run_id,
            "last_outcome": {"$in": sorted(labels)},
        }
        fields = {
            "_id": 1,
            "dispatch_id": 1,
            "state": 1,
            "last_dispatch_id": 1,
            "run_id": 1,
            "last_outcome": 1,
        }
        left = PartsLeft({}, set())
        for doc in self._jobs.find({"$or": [running, ended]}, fields):
            # Sorted by the same conditions (a document may meet both).
            if doc.get("dispatch_id") in ids and doc.get("state") == int(JobState.RUNNING):
                left.running.setdefault(doc["dispatch_id"], []).append(doc["_id"])
            ended_under = doc.get("last_dispatch_id")
            if (
                ended_under in ids
                and doc.get("run_id") == run_id
                and doc.get("last_outcome") in labels
            ):
                left.ended.add(ended_under)
        return left

    def count_refusals(self, dispatch_id: str, refused: Mapping[Any, int]) -> int:
        """The host answered each of these pages 429 or 503 so many times more (pages
        `dispatch_id` holds): one command per distinct count, almost always one."""
        modified = 0
        by_times: dict[int, list[Any]] = {}
        for job_id, times in refused.items():
            if times > 0:
                by_times.setdefault(times, []).append(job_id)
        for times, job_ids in sorted(by_times.items()):
            modified += self._jobs.update_many(
                {"_id": {"$in": job_ids}, "dispatch_id": dispatch_id},
                {"$inc": {REFUSALS: times}},
            ).modified_count
        return modified

    def claimed_ids(self, dispatch_id: str) -> list[Any]:
        return [
            doc["_id"]
            for doc in self._jobs.find(
                {"dispatch_id": dispatch_id, "state": int(JobState.RUNNING)}, {"_id": 1}
            )
        ]

    def reassign(
        self,
        dispatch_id: str,
        new_dispatch_id: str,
        job_ids: Sequence[Any],
        open_to_take_over: bool = False,
    ) -> int:
        """Move jobs a dispatch still holds to a new dispatch (the rest of an interrupted batch).
        `open_to_take_over`: the new dispatch waits to begin again, and until it does a running
        batch of its run may take its jobs over (`take_over`)."""
        moved: dict[str, Any] = {"dispatch_id": new_dispatch_id}
        if open_to_take_over:
            moved[UNSTARTED] = True
        return self._jobs.update_many(
            {
                "_id": {"$in": list(job_ids)},
                "dispatch_id": dispatch_id,
                "state": int(JobState.RUNNING),
            },
            {"$set": moved},
        ).modified_count


def _claimed_as(r: ClaimRequest, run_id: str, lease_deadline: datetime) -> dict[str, Any]:
    claimed = {
        "state": int(JobState.RUNNING),
        "dispatch_id": r.dispatch_id,
        "run_id": run_id,
        "lease_deadline": lease_deadline,
    }
    if r.open_to_take_over:
        return {"$set": {**claimed, UNSTARTED: True}}
    return {"$set": claimed, "$unset": {UNSTARTED: ""}}


def _number(value: Any) -> float:
    """A sort key's value as a number: booleans and numbers as they are, anything else 0."""
    return float(value) if isinstance(value, int | float) else 0.0


def expiry_deadline(now: datetime, lease_s: float) -> datetime:
    return now + timedelta(seconds=lease_s)
