"""MongoHeldJobStore: a run's pages put back to wait in their run (a pause), or taken back to
be crawled again (retry-failed).

Both use the run's own pass (`flow.children.plan_discovered`): a job with `redo_run` set to its
run, pending and due, is planned by that run only (`pipeline.redo_filter`) and never by a
sweep. Holding changes no count: the run still waits for the page. Taking a failed page back
is done in three steps, each safe to repeat: tag the pages (`retry_key`; `redo_run` already
keeps sweeps off them, and they stay failed so no pass plans them yet), count them onto the
run in one keyed update, then make them pending.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from crawlsched.catalog import JobState
from crawlsched.store.counting import CountingDatabase


class MongoHeldJobStore:
    def __init__(self, db: CountingDatabase, collection: str) -> None:
        self._jobs = db[collection]

    def hold(self, dispatch_id: str, run_id: str) -> int:
        """Give a dispatch's jobs back to wait in their run, untouched (no outcome, no
        attempt, no try of the run counted); returns how many."""
        return self._jobs.update_many(
            {"dispatch_id": dispatch_id, "state": int(JobState.RUNNING)},
            {
                "$set": {"state": int(JobState.PENDING), "redo_run": run_id},
                "$unset": {"dispatch_id": "", "lease_deadline": ""},
            },
        ).modified_count

    def held(self, run_id: str) -> int:
        """Jobs waiting in the run for its pass (held by a pause, or due for another try)."""
        return self._jobs.count_documents({"redo_run": run_id, "state": int(JobState.PENDING)})

    def failed_pages(
        self, run_id: str, outcomes: Sequence[str], reported: Iterable[str] | None
    ) -> list[dict[str, Any]]:
        """The run's pages whose last try failed on its own merits, held by no dispatch, and
        whose failure the run has already counted (the report of the dispatch that wrote it
        was applied: moving a count the run has not seen yet would count it twice). `reported`
        None: the run has ended and its end was announced, so it counted every report (and
        dropped their keys)."""
        seen = None if reported is None else set(reported)
        query = {
            "run_id": run_id,
            "state": int(JobState.FAILED),
            "last_outcome": {"$in": list(outcomes)},
            "dispatch_id": None,
        }
        fields = {"_id": 1, "last_outcome": 1, "last_dispatch_id": 1}
        return [
            doc
            for doc in self._jobs.find(query, fields)
            if seen is None or f"{doc.get('last_dispatch_id')}:crawl" in seen
        ]

    def tag(self, job_ids: Sequence[Any], run_id: str, key: str) -> dict[str, int]:
        """Tag failed pages for the retry `key`; returns what was tagged, by outcome."""
        self._jobs.update_many(
            {"_id": {"$in": list(job_ids)}, "state": int(JobState.FAILED), "dispatch_id": None},
            {"$set": {"retry_key": key, "redo_run": run_id}},
        )
        counts: dict[str, int] = {}
        for doc in self._jobs.find({"retry_key": key}, {"last_outcome": 1}):
            outcome = str(doc.get("last_outcome"))
            counts[outcome] = counts.get(outcome, 0) + 1
        return counts

    def untag(self, key: str) -> int:
        """The run refused the retry: the pages are failed pages of no retry again."""
        return self._jobs.update_many(
            {"retry_key": key}, {"$unset": {"retry_key": "", "redo_run": ""}}
        ).modified_count

    def release_tagged(self, keys: Iterable[str], now: datetime) -> int:
        """Make the pages of applied retries pending in their run, due now, one more attempt
        allowed (an exhausted page is no longer flagged; failing again exhausts it again)."""
        keys = list(keys)
        if not keys:
            return 0
        return self._jobs.update_many(
            {"retry_key": {"$in": keys}},
            {
                "$set": {"state": int(JobState.PENDING), "execution_date": now, "exhausted": False},
                "$unset": {"retry_key": "", "redo_tries": ""},
            },
        ).modified_count

    def tagged_keys(self, run_id: str) -> set[str]:
        """Retry keys still on pages of this run (a retry cut short before its release)."""
        found = self._jobs.distinct("retry_key", {"redo_run": run_id, "retry_key": {"$ne": None}})
        return {k for k in found if isinstance(k, str)}
