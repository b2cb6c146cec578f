"""A job store's take-overs: a running batch takes pages over from its run's batches that have
not begun, and keeps the pages it found. Every write carries the dispatch ids it expects in its
filter, so a page has one owner whatever the order of the writes (`crawl/taking.py`,
`crawl/parts.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from crawlsched.catalog import JobState
from crawlsched.store.counting import CountingCollection

# A claimed job whose batch has not begun: a running batch of the same run, media and task may
# take it over (`take_over`). Only batches that need no account and no node are open to it.
UNSTARTED = "unstarted"
# Which copy of a batch's message began a job it could have lost to a take-over (`begin`).
BEGUN_BY = "begun_by"


class TakeOvers:
    """Mixed into `MongoJobStore`: the take-overs of its collection (`_jobs`)."""

    _jobs: CountingCollection

    # -- taking over the jobs of a batch that has not begun --------------------------------

    def begin(self, dispatch_id: str, job_ids: Sequence[Any], by: str = "") -> int:
        """The batch begins: from now on its jobs are its own (none may be taken over). How
        many of `job_ids` it began (the others were taken over, or had begun). `by` names this
        copy of the batch's message in `begun_by`: two copies delivered at once share the
        dispatch id, and each crawls only what it began."""
        return self._jobs.update_many(
            {
                "_id": {"$in": list(job_ids)},
                "dispatch_id": dispatch_id,
                "state": int(JobState.RUNNING),
                UNSTARTED: True,
            },
            {"$unset": {UNSTARTED: ""}, "$set": {BEGUN_BY: by}},
        ).modified_count

    def open_to_take_over(
        self, run_id: str, task: str, media_name: str, not_of: str, limit: int
    ) -> list[dict[str, Any]]:
        """Up to `limit` jobs of the run's batches (not `not_of`) that have not begun, for
        this task and media, drawn at random: the first ones in the store's order would be the
        same few hosts look after look, while the pages of other hosts sit behind them."""
        query = {**_queued(run_id, task, media_name), "dispatch_id": {"$ne": not_of}}
        return list(self._jobs.aggregate([{"$match": query}, {"$sample": {"size": limit}}]))

    def queued_of_host(
        self, run_id: str, task: str, media_name: str, not_of: str, url_pattern: str, limit: int
    ) -> list[dict[str, Any]]:
        """Up to `limit` jobs of the run's batches (not `not_of`) that have not begun, whose
        URL matches `url_pattern` (case-insensitively: `host_grouping.origin_url_pattern`):
        the pages of one host a process holds, for it to crawl next (the `queued` index
        narrows the search to the run's queued jobs)."""
        query = {
            **_queued(run_id, task, media_name),
            "dispatch_id": {"$ne": not_of},
            "url": {"$regex": url_pattern, "$options": "i"},
        }
        return list(self._jobs.find(query).limit(limit))

    def queued_at_least(self, run_id: str, task: str, media_name: str, least: int) -> bool:
        """Whether the run's batches that have not begun hold at least `least` jobs of this
        task and media: work for threads that free up, without the pages a batch is about to
        hand over. A count that stops at `least`."""
        query = _queued(run_id, task, media_name)
        return self._jobs.count_documents(query, limit=least) >= least

    def take_over(
        self, job_ids: Sequence[Any], dispatch_id: str, lease_deadline: datetime
    ) -> list[Any]:
        """Move jobs whose batch has not begun to the running `dispatch_id`; the ones it got
        (a batch that began meanwhile keeps its own). Their batch's message, when it comes,
        finds only what is left to it."""
        ids = list(job_ids)
        if not ids:
            return []
        moved = self._jobs.update_many(
            {"_id": {"$in": ids}, "state": int(JobState.RUNNING), UNSTARTED: True},
            {
                "$set": {"dispatch_id": dispatch_id, "lease_deadline": lease_deadline},
                "$unset": {UNSTARTED: ""},
            },
        ).modified_count
        if moved == len(set(ids)):
            return ids  # all of them (the usual case): no need to read which
        query = {"_id": {"$in": ids}, "dispatch_id": dispatch_id, "state": int(JobState.RUNNING)}
        return [doc["_id"] for doc in self._jobs.find(query, {"_id": 1})]

    def keep_found(
        self,
        child_ids: Sequence[Any],
        parents: Sequence[Any],
        dispatch_id: str,
        lease_deadline: datetime,
    ) -> list[dict[str, Any]]:
        """Claim, for the running `dispatch_id`, the children of `child_ids` that pages of
        `parents` found (the part of the same batch just recorded) and nothing else took:
        pending, held by nobody, not yet released. Returns them as the store has them now (two
        commands). Their run counts them only once their parents' report is applied: the
        caller crawls none before that (`crawl/parts.py`)."""
        ids = list(child_ids)
        if not ids or not parents:
            return []
        self._jobs.update_many(
            {
                "_id": {"$in": ids},
                "parent_job": {"$in": list(parents)},
                "released": False,
                "state": int(JobState.PENDING),
                "dispatch_id": None,
                "last_outcome": None,
            },
            {
                "$set": {
                    "state": int(JobState.RUNNING),
                    "dispatch_id": dispatch_id,
                    "lease_deadline": lease_deadline,
                }
            },
        )
        # Only what this claim took: a page found again may be one the dispatch held already.
        query = {
            "_id": {"$in": ids},
            "dispatch_id": dispatch_id,
            "state": int(JobState.RUNNING),
            "parent_job": {"$in": list(parents)},
        }
        return list(self._jobs.find(query))

    def give_back_unreleased(self, dispatch_id: str, job_ids: Sequence[Any]) -> list[Any]:
        """Of `job_ids`, held by `dispatch_id`: the children their run does not count yet
        (their finder's report not applied) go back to be planned once it is (pending, held by
        nobody, as they were registered). Returns the ids the dispatch still holds."""
        ids = list(job_ids)
        if not ids:
            return []
        self._jobs.update_many(
            {"_id": {"$in": ids}, "dispatch_id": dispatch_id, "released": False},
            {
                "$set": {"state": int(JobState.PENDING), "dispatch_id": None},
                "$unset": {"lease_deadline": ""},
            },
        )
        query = {"_id": {"$in": ids}, "dispatch_id": dispatch_id, "state": int(JobState.RUNNING)}
        return [doc["_id"] for doc in self._jobs.find(query, {"_id": 1})]


def _queued(run_id: str, task: str, media_name: str) -> dict[str, Any]:
    """The run's jobs of this task and media in batches that have not begun (the `queued`
    index serves it)."""
    return {
        "run_id": run_id,
        "state": int(JobState.RUNNING),
        UNSTARTED: True,
        "task": task,
        "media_name": media_name,
    }
