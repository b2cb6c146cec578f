"""The ticker: fire due schedules (one ticker wins each fire time) and reclaim expired holds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from crawlsched import metrics
from crawlsched.catalog import JOB_COLLECTIONS, JobState
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.messages import ReportMessage
from crawlsched.planning.outcomes import PHASE_OUTCOMES, REDO, Outcome, after_machinery_failure
from crawlsched.planning.run_names import schedule_id_of
from crawlsched.runtime import Runtime
from crawlsched.schedules.policies import FirePlan, Misfire, Overlap, plan_fires
from crawlsched.schedules.triggers import trigger_of
from crawlsched.store.jobs import ExpiredDispatch, MongoJobStore

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
    # between the two leaves the fire times in the schedule's outbox, sent again later.
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


# A fire time whose run no planner opened this long after it was committed is sent again.
RESEND_FIRE_AFTER_S = 30.0


def resend_unsent_fires(rt: Runtime, send_plan: Callable[[str, datetime], None]) -> int:
    """Send again the fire times committed but never planned (`MongoScheduleStore.commit`'s
    outbox): a ticker that died between committing and sending loses no firing. Planning a
    fire time twice is harmless (`plan_run` is idempotent per schedule and fire time)."""
    before = rt.now() - timedelta(seconds=RESEND_FIRE_AFTER_S)
    unsent = rt.schedules.unsent_fires_before(before)
    for schedule_id, fire_at in unsent:
        log.warning(
            "schedule_fire_sent_again", schedule_id=schedule_id, fire_at=fire_at.isoformat()
        )
        send_plan(schedule_id, fire_at)
    return len(unsent)


# Why a reclaimed try ended, as history rows and given-up jobs record it.
RECLAIMED = "dispatch lease expired: the worker died, hung or lost the store"


def reclaim_expired(rt: Runtime, report: Callable[[ReportMessage], None]) -> int:
    """Running jobs whose dispatch lease ran out: the machinery failed them, not the page.

    Each goes back to its run for another try after a backoff (the run keeps counting it
    outstanding), until its tries in the run are used up; then it is given up as `expired`
    with the reason and reported to its run, which ends `incomplete`. What the dead crawl
    discovered of a page is counted when that page ends (`MongoJobStore.dispatch_report`).
    Every reclaimed try gets a history row.
    """
    now = rt.now()
    reclaimed = 0
    for collection in JOB_COLLECTIONS:
        store = rt.jobs(collection)
        for expired in store.expired(now):
            reclaimed += _reclaim(rt, store, collection, expired, now, report)
    cleared = rt.leases.expire(now)
    if reclaimed or cleared:
        log.warning("expired_reclaimed", jobs=reclaimed, resource_leases=cleared)
    return reclaimed


def _reclaim(
    rt: Runtime,
    store: MongoJobStore,
    collection: str,
    expired: ExpiredDispatch,
    now: datetime,
    report: Callable[[ReportMessage], None],
) -> int:
    run_id = expired.run_id
    orphan = expired.dispatch_id.startswith("orphan-") or not run_id
    updates = [
        after_machinery_failure(
            job["_id"],
            run_id or "",
            job.get("attempt_count") or 0,
            # Tries counted in this run only: a job planned again by a later run starts afresh.
            (job.get("redo_tries") or 0) if job.get("redo_run") == run_id else 0,
            now,
            rt.redo_policy,
            RECLAIMED,
        )
        for job in expired.jobs
    ]
    if orphan:
        # No run to go back to (a document left running by hand or an old version).
        updates = [replace(u, outcome=Outcome.EXPIRED, state=JobState.FAILED, execution_date=None,
                           redo_run=None, redo_tries=0) for u in updates]  # fmt: skip
    recorded = store.record(expired.dispatch_id, updates, now)
    if not recorded:
        return 0  # its crawl recorded first: nothing was lost
    first = expired.jobs[0]
    rt.history.add(
        [
            {
                "job_id": encode_id(u.job_id),
                "run_id": run_id,
                "schedule_id": schedule_id_of(run_id or ""),
                "dispatch_id": expired.dispatch_id,
                "collection": collection,
                "task": first.get("task"),
                "media_name": first.get("media_name"),
                "started_at": None,
                "ended_at": now,
                "outcome": Outcome.EXPIRED,
                "error": RECLAIMED,
                "retried": u.outcome == REDO,
                "items_stored": 0,
            }
            for u in updates
        ]
    )
    retried = sum(1 for u in updates if u.outcome == REDO)
    metrics.jobs_finished(first.get("task", ""), first.get("media_name", ""), {REDO: retried})
    counts = store.outcomes_of(expired.dispatch_id, PHASE_OUTCOMES["expire"])
    metrics.jobs_finished(first.get("task", ""), first.get("media_name", ""), counts)
    log.warning(
        "dispatch_reclaimed",
        dispatch_id=expired.dispatch_id,
        run_id=run_id,
        retried=retried,
        given_up=sum(counts.values()),
    )
    if counts and not orphan:
        report(
            ReportMessage(
                run_id=run_id,
                dispatch_id=expired.dispatch_id,
                collection=collection,
                phase="expire",
            )
        )
    return recorded
