"""Batches as the planner leaves them, and the one clock a single-thread flow test moves.

Used by the tests that drive admission and the crawl directly (no broker, one thread): the
jobs are inserted and claimed by a fresh dispatch exactly as the planner claims them, and the
message and twitter's media row name the test's own driver.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from crawlsched.catalog import JobState
from crawlsched.environment import SystemEnvironment
from crawlsched.ids import encode_id
from crawlsched.messages import BatchMessage
from crawlsched.planning.due import Category
from crawlsched.runtime import Runtime
from crawlsched.store.job_claims import ClaimRequest
from crawlsched.store.pipeline import TASKS_COLLECTION


class Clock:
    """The one clock of a test: `now()` for the runtime, `monotonic()` for the lease keeper
    and the stop check."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.t = start

    def now(self) -> datetime:
        return self.t

    def monotonic(self) -> float:
        return (self.t - self.start).total_seconds()

    def advance(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)

    def at(self, seconds: float) -> datetime:
        return self.start + timedelta(seconds=seconds)

    def env(self) -> ClockEnvironment:
        """The runtime's environment on this clock (real locks and threads)."""
        return ClockEnvironment(self)


class ClockEnvironment(SystemEnvironment):
    """The system's locks and threads, on a test's `Clock` (sleeping moves it on)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def now(self) -> datetime:
        return self.clock.now()

    def monotonic(self) -> float:
        return self.clock.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.clock.advance(seconds)


def claimed_batch(
    rt: Runtime,
    n: int,
    *,
    run_id: str,
    driver_class: str,
    login: bool = True,
    selenium: bool = True,
    crawl_limit: int = 10,
    stages_ms: dict[str, float] | None = None,
    open_to_take_over: bool = False,
) -> BatchMessage:
    """n twitter profile jobs (targets job0-…, job1-…) claimed by a fresh dispatch of the run.

    Twitter's media row names `driver_class`, and its profile task row the need flags and the
    crawl limit (the crawl takes them from the store, and refuses a message that says other)."""
    now = rt.now()
    prefix = uuid.uuid4().hex[:6]
    rt.db.childs_socialmedia.update_one(
        {"media_name": "twitter"}, {"$set": {"driver_class": driver_class}}
    )
    twitter = rt.reference.media_by_name("twitter")
    rt.db[TASKS_COLLECTION].update_one(
        {"media_name_id": twitter.get("media_name_id", twitter["_id"]), "name": "profile"},
        {"$set": {"need_login": login, "need_selenium": selenium, "crawl_limit": crawl_limit}},
    )
    rt.jobs("profiles").insert_new(
        [
            {
                "target": f"job{i}-{prefix}",
                "batch": prefix,
                "url": f"https://twitter.test/job{i}",
                "media_name": "twitter",
                "media_name_id": twitter["_id"],
                "task": "profile",
                "state": int(JobState.PENDING),
                "enabled": True,
                "execution_date": now - timedelta(seconds=1),
            }
            for i in range(n)
        ]
    )
    ids = [d["_id"] for d in rt.db.profiles.find({"batch": prefix}).sort("target", 1)]
    dispatch = uuid.uuid4().hex
    request = ClaimRequest(dispatch, ids, open_to_take_over)
    rt.jobs("profiles").claim([request], run_id, now + timedelta(hours=1))
    return BatchMessage(
        run_id=run_id,
        dispatch_id=dispatch,
        collection="profiles",
        task="profile",
        category=Category.of(login, selenium),
        media_name="twitter",
        media_id=twitter["media_name_id"],
        driver_class=driver_class,
        need_login=login,
        need_selenium=selenium,
        crawl_limit=crawl_limit,
        job_ids=[encode_id(i) for i in ids],
        **({"stages_ms": stages_ms} if stages_ms is not None else {}),
    )
