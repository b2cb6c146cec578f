"""The ticker: fire due schedules (one ticker wins each fire time) and reclaim expired holds."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.logs import get_logger
from crawlsched.messages import ReportMessage
from crawlsched.planning.outcomes import PHASE_OUTCOMES, Outcome, after_failure
from crawlsched.runtime import Runtime

log = get_logger(__name__)


def fire_due(rt: Runtime, send_plan: Callable[[str, datetime], None]) -> int:
    now = rt.now()
    fired = 0
    for schedule in rt.schedules.due(now):
        fire_at = rt.schedules.advance(schedule, now)
        if fire_at is None:
            continue  # another ticker won this fire time
        log.info("schedule_fired", schedule_id=schedule["_id"], fire_at=fire_at.isoformat())
        send_plan(schedule["_id"], fire_at)
        fired += 1
    return fired


def reclaim_expired(rt: Runtime, report: Callable[[ReportMessage], None]) -> int:
    """Jobs whose dispatch lease ran out count one failed attempt (so a job that kills its
    worker every time ends exhausted instead of looping) and are reported to their run."""
    now = rt.now()
    reclaimed = 0
    for collection in JOB_COLLECTIONS:
        store = rt.jobs(collection)
        for expired in store.expired(now):
            updates = [
                after_failure(
                    job["_id"],
                    job.get("attempt_count") or 0,
                    now,
                    rt.retry_policy,
                    "dispatch lease expired (worker died or hung)",
                    outcome=Outcome.EXPIRED,
                )
                for job in expired.jobs
            ]
            reclaimed += store.record(expired.dispatch_id, updates, now)
            counts = store.outcomes_of(expired.dispatch_id, PHASE_OUTCOMES["expire"])
            if counts and expired.run_id and not expired.dispatch_id.startswith("orphan-"):
                report(
                    ReportMessage(
                        run_id=expired.run_id,
                        dispatch_id=expired.dispatch_id,
                        collection=collection,
                        phase="expire",
                    )
                )
    cleared = rt.leases.expire(now)
    if reclaimed or cleared:
        log.warning("expired_reclaimed", jobs=reclaimed, resource_leases=cleared)
    return reclaimed
