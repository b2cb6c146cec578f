"""A job store's reads and edits for operators and recovery (`MongoJobStore` mixes it in):
one job by id, a page of jobs, a removal or a `meta` change, the pages a run gave up, and the
reclaim-everything of a standalone restart. None of them decides who crawls what."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from crawlsched.catalog import JobState
from crawlsched.planning.outcomes import Outcome
from crawlsched.store.counting import CountingCollection


class JobAdmin:
    """Mixed into `MongoJobStore`: reads and edits of its collection (`_jobs`)."""

    _jobs: CountingCollection

    def get(self, job_id: Any) -> dict[str, Any] | None:
        return self._jobs.find_one({"_id": job_id})

    def of_target(self, media_name_id: Any, target: Any, tasks: Sequence[str]) -> list[dict]:
        """The jobs of one target for these tasks, as stored."""
        query = {"media_name_id": media_name_id, "target": target, "task": {"$in": list(tasks)}}
        return list(self._jobs.find(query))

    def page(self, query: Mapping[str, Any], skip: int, limit: int) -> list[dict[str, Any]]:
        """Jobs matching `query` in id order, `limit` of them after `skip`."""
        return list(self._jobs.find(dict(query)).sort("_id", 1).skip(skip).limit(limit))

    def listed(self, query: Mapping[str, Any], skip: int, limit: int) -> list[dict[str, Any]]:
        """Jobs matching `query`: those users added first (no `scope_run`), in id order."""
        cursor = self._jobs.find(dict(query)).sort([("scope_run", 1), ("_id", 1)])
        return list(cursor.skip(skip).limit(limit))

    def count(self, query: Mapping[str, Any]) -> int:
        return self._jobs.count_documents(dict(query))

    def pages_of(self, job_ids: Sequence[Any]) -> list[dict[str, Any]]:
        """The URL and target of each of these jobs (to name the page a history row is of)."""
        return list(self._jobs.find({"_id": {"$in": list(job_ids)}}, {"url": 1, "target": 1}))

    def crawl_again_once(self, job_id: Any, now: datetime, bounds: Mapping[str, Any]) -> bool:
        """A one-off job no crawl holds is due now, with these bounds (`crawlsched crawl`)."""
        return (
            self._jobs.update_one(
                {"_id": job_id, "dispatch_id": None},
                {
                    "$set": {
                        "state": int(JobState.PENDING),
                        "execution_date": now,
                        "exhausted": False,
                        **bounds,
                    },
                    "$unset": {"problem": ""},
                },
            ).matched_count
            == 1
        )

    def remove_idle(self, job_id: Any) -> bool:
        """Delete a job no crawl holds; False when one does (or it is gone)."""
        idle = {"_id": job_id, "dispatch_id": None, "state": {"$ne": int(JobState.RUNNING)}}
        return self._jobs.delete_one(idle).deleted_count == 1

    def change(self, job_id: Any, update: Mapping[str, Any]) -> bool:
        """Apply an operator's update to one job; False when there is no such job."""
        return self._jobs.update_one({"_id": job_id}, dict(update)).matched_count == 1

    def given_up(self, run_id: str, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` jobs this run gave up (`expired`, `given_up`), with why."""
        if limit <= 0:
            return []
        query = {"run_id": run_id, "last_outcome": {"$in": [Outcome.EXPIRED, Outcome.GIVEN_UP]}}
        fields = {"url": 1, "target": 1, "task": 1, "last_error": 1}
        return list(self._jobs.find(query, fields).limit(limit))

    def expire_all_running(self, ended: datetime) -> int:
        """Every running job's dispatch lease ends at `ended` (a standalone restarted after a
        crash: no batch of the last life is running any more)."""
        running = {"state": int(JobState.RUNNING)}
        return self._jobs.update_many(running, {"$set": {"lease_deadline": ended}}).modified_count

    def ended_dispatches(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        """(run, last dispatch, last outcome) of the jobs of these runs that ended under a
        dispatch: what a restart reports again."""
        query = {"run_id": {"$in": list(run_ids)}, "last_dispatch_id": {"$ne": None}}
        fields = {"run_id": 1, "last_dispatch_id": 1, "last_outcome": 1}
        return list(self._jobs.find(query, fields))

    def counts_by(self, field: str) -> dict[str, int]:
        rows = self._jobs.aggregate([{"$group": {"_id": f"${field}", "n": {"$sum": 1}}}])
        return {str(row["_id"]): row["n"] for row in rows}
