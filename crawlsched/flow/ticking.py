"""The ticker: fire due schedules (one ticker wins each fire time) and reclaim expired holds."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from crawlsched import metrics
from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.logs import get_logger
from crawlsched.messages import ReportMessage
from crawlsched.planning.outcomes import PHASE_OUTCOMES, Outcome, after_failure
from crawlsched.runtime import Runtime
from crawlsched.schedules.policies import FirePlan, Misfire, Overlap, plan_fires
from crawlsched.schedules.triggers import trigger_of

log = get_logger(__name__)

# Schedules written before policies existed: fire the latest late time once (what the ticker
# always did) and never hold a run back.
DEFAULT_MISFIRE = Misfire.RUN_ONCE
DEFAULT_OVERLAP = Overlap.ALLOW


def fire_due(rt: Runtime, send_plan: Callable[[str, datetime], None]) -> int:
    """Fire every due schedule; one that fails is logged with its id and the rest go on."""
    now = rt.now()
    fired = 0
    for schedule in rt.schedules.due(now):
        fired += _guarded(schedule, lambda s: fire_schedule(rt, s, now, send_plan))
    for schedule in rt.schedules.buffered():
        fired += _guarded(schedule, lambda s: release_buffered(rt, s, send_plan))
    return fired


def _guarded(schedule: dict[str, Any], handle: Callable[[dict[str, Any]], int]) -> int:
    try:
        return handle(schedule)
    except Exception:
        # One broken schedule (bad document, a store hiccup) must not stop the others.
        log.exception("schedule_fire_failed", schedule_id=schedule.get("_id"))
        return 0


def decide(rt: Runtime, schedule: dict[str, Any], now: datetime) -> FirePlan:
    overlap = Overlap(schedule.get("overlap") or DEFAULT_OVERLAP)
    running = overlap != Overlap.ALLOW and rt.schedules.previous_running(schedule["_id"])
    return plan_fires(
        trigger_of(schedule),
        schedule["next_fire_at"],
        now,
        grace=rt.settings.misfire_grace,
        misfire=Misfire(schedule.get("misfire") or DEFAULT_MISFIRE),
        catch_up_limit=int(schedule.get("catch_up_limit", 10)),
        overlap=overlap,
        previous_running=running,
        buffered=schedule.get("buffered_fire_at"),
    )


def fire_schedule(
    rt: Runtime, schedule: dict[str, Any], now: datetime, send_plan: Callable[[str, datetime], None]
) -> int:
    plan = decide(rt, schedule, now)
    return _apply(rt, schedule, plan, now, send_plan)


def release_buffered(
    rt: Runtime, schedule: dict[str, Any], send_plan: Callable[[str, datetime], None]
) -> int:
    """The fire time an overlap held back goes as soon as the previous run has ended."""
    if rt.schedules.previous_running(schedule["_id"]):
        return 0
    plan = FirePlan(fire=[schedule["buffered_fire_at"]], next_fire_at=schedule["next_fire_at"])
    return _apply(rt, schedule, plan, rt.now(), send_plan)


def _apply(
    rt: Runtime,
    schedule: dict[str, Any],
    plan: FirePlan,
    now: datetime,
    send_plan: Callable[[str, datetime], None],
) -> int:
    # Commit first, then send: a ticker that loses the compare-and-set sends nothing. A crash
    # between the two loses those fire times; a send is never doubled.
    if not rt.schedules.commit(schedule, plan):
        return 0
    if plan.missed:
        rt.missed_runs.record(schedule, plan.missed, now)
        for _, reason in plan.missed:
            metrics.missed_runs(str(reason))
    if plan.truncated:
        log.warning("schedule_misses_truncated", schedule_id=schedule["_id"])
    for fire_at in plan.fire:
        log.info("schedule_fired", schedule_id=schedule["_id"], fire_at=fire_at.isoformat())
        send_plan(schedule["_id"], fire_at)
        metrics.schedule_fired()
    return len(plan.fire)


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
            first = expired.jobs[0]
            metrics.jobs_finished(first.get("task", ""), first.get("media_name", ""), counts)
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
