"""The coordinator: apply each dispatch's report once; end the run when nothing is left.

A report is a claim, not a fact. What it counts is read from the jobs: those of its run whose
last outcome was written by its dispatch, with an outcome of its phase. A report for a dispatch
that still holds jobs, that finished no job of that run, or for a run that does not exist is
refused (dead-lettered by the actor), so a forged or foreign report changes nothing.

A run ends exactly once (a compare-and-set): finished (succeeded, failed when jobs ran and none
succeeded, or incomplete when the machinery made it give pages up) or stopped. The write that
ends it also marks it to be announced; the announcement — its event, a webhook delivery and
notices when its schedule asks for them, one child off its parent — goes to outboxes that
relays drain until delivered, and is repeated by the relay if a crash cut it short
(`relay_announcements`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from crawlsched import metrics
from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.errors import ReportRejected
from crawlsched.events import emit
from crawlsched.flow import run_timeline
from crawlsched.flow.notifying import plan_deliveries
from crawlsched.flow.views import gave_up, given_up_of
from crawlsched.logs import get_logger
from crawlsched.messages import ReportMessage
from crawlsched.planning.outcomes import PHASE_OUTCOMES
from crawlsched.planning.run_control import end_event_id
from crawlsched.planning.run_end import run_end
from crawlsched.planning.run_names import ENDED, is_done
from crawlsched.runtime import Runtime

log = get_logger(__name__)

Notify = Callable[[str], None]  # sends the delivery of one webhook by its id
PlanChildren = Callable[[str, str], None]  # asks for the children pass of (run, collection)


def _no_notify(delivery_id: str) -> None:
    log.info("webhook_not_sent_no_notifier", delivery_id=delivery_id)


def finish_if_done(rt: Runtime, run: dict[str, Any], notify: Notify = _no_notify) -> bool:
    if not is_done(run):
        return False
    counts = run.get("counts", {})
    end = run_end(counts, bool(run.get("stop_requested")))
    # Frozen before the compare-and-set, while the run's history and children still exist;
    # a caller that loses the race computed it for nothing (rare: two last reports at once).
    frozen = run_timeline.freeze(rt, run)
    now = rt.now()
    if not rt.runs.finish(run["_id"], now, end.state, end.result, timeline=frozen):
        return False
    metrics.run_finished()
    log.info("run_ended", run_id=run["_id"], result=end.result, planned=run.get("planned"))
    rt.waiting.drop_run(run["_id"])
    ended = {
        **run,
        "state": end.state,
        "result": end.result,
        "finished_at": now,
        "ends": run.get("ends", 0) + 1,
    }
    announce(rt, ended, notify)
    return True


# A run whose end was not announced this long after it ended is announced by the relay.
ANNOUNCE_AFTER_S = 10.0


def announce(rt: Runtime, run: dict[str, Any], notify: Notify = _no_notify) -> None:
    """Put a run's end in every outbox: its event, its webhook delivery, its parent's count.

    Each part is idempotent (the event and the delivery have ids derived from the run, a child
    counts off its parent once), so the relay may repeat all of it after a crash that cut it
    short; the run's `announce` mark, set by the write that ended it, is cleared last."""
    counts = run.get("counts", {})
    end = run_end(counts, bool(run.get("stop_requested")))
    # Named on the run by the first announcement of this end (its pages may have expired
    # since); a run reopened by retry-failed forgets it (`reopen`).
    given_up = run.get("given_up")
    if given_up is None:
        given_up = given_up_of(rt, run) if gave_up(counts) else []
    # A run reopened by retry-failed ends again: that end is a new event, with an id of its own.
    event_id = end_event_id(run["_id"], end.event, run.get("ends", 1))
    emit(
        rt,
        end.event,
        event_id=event_id,
        run_id=run["_id"],
        schedule_id=run.get("schedule_id"),
        parent_id=run.get("parent_id"),
        result=end.result,
        planned=run.get("planned", 0),
        counts=counts,
        discovered=run.get("discovered", 0),
        items=run.get("items", {}),
        cut=run.get("cut", {}),
        given_up=given_up,
    )
    for delivery_id in plan_deliveries(rt, run, end, event_id, given_up):
        notify(delivery_id)
    _count_child_ended(rt, run, notify)
    _let_pages_expire(rt, run)
    rt.runs.announced(run["_id"], given_up)


def _let_pages_expire(rt: Runtime, run: dict[str, Any]) -> None:
    """The run's discovered pages are no longer needed (its end is counted, the dedup is per
    run): they expire after the retention, counted from the run's end. Imported jobs are
    never stamped. Repeated by the relay with the same date, so harmless twice."""
    until = rt.retention.discovered_until(run["finished_at"])
    for collection in JOB_COLLECTIONS:
        children = rt.children(collection)
        if dropped := children.drop_unreleased(run["_id"]):
            log.warning("uncounted_children_dropped", run_id=run["_id"], jobs=dropped)
        children.expire_with_run(run["_id"], until)


def relay_announcements(rt: Runtime, notify: Notify = _no_notify) -> int:
    """Announce the ends a crash cut short (their `announce` mark is still set)."""
    before = rt.now() - timedelta(seconds=ANNOUNCE_AFTER_S)
    runs = rt.runs.unannounced(before)
    for run in runs:
        log.warning("run_end_announced_late", run_id=run["_id"])
        announce(rt, run, notify)
    return len(runs)


def _count_child_ended(rt: Runtime, run: dict[str, Any], notify: Notify) -> None:
    """Take an ended child off its parent (once per child) and end the parent if it is done."""
    if parent_id := run.get("parent_id"):
        parent = rt.runs.child_ended(parent_id, run["_id"], run.get("counts", {}))
        if parent is not None:
            finish_if_done(rt, parent, notify)


def _no_children_pass(run_id: str, collection: str) -> None:
    log.info("children_pass_not_sent", run_id=run_id, collection=collection)


def record_report(
    rt: Runtime,
    report: ReportMessage,
    notify: Notify = _no_notify,
    plan_children: PlanChildren = _no_children_pass,
    kept: int = 0,
) -> bool:
    """Returns True if this report ended its run; raises ReportRejected for a false one.

    The children of the pages that ended in the dispatch are counted in the same atomic update
    that counts those pages off, then released and planned: a redelivered report (a crash
    after the count) does the release and asks for the pass again, both idempotent. `kept`:
    children the batch that found them holds already, to crawl itself (`crawl/parts.py`);
    when they are all of them, no pass is asked for.
    """
    store = rt.jobs(report.collection)
    seen = store.dispatch_report(report.dispatch_id, report.run_id, PHASE_OUTCOMES[report.phase])
    if seen.held:
        raise ReportRejected(report.report_key, f"its dispatch still holds {seen.held} jobs")
    if not seen.counts:
        raise ReportRejected(
            report.report_key, f"no job of run {report.run_id[:100]!r} ended in that dispatch"
        )
    run = rt.runs.report(
        report.run_id,
        report.report_key,
        seen.counts,
        discovered=seen.discovered,
        stages_ms=report.stages_ms,
        links=seen.links,
        items=seen.items,
        cut=seen.cut,
    )
    if seen.discovered and (run is not None or rt.runs.get(report.run_id) is not None):
        rt.children(report.collection).release(seen.children, rt.now())
        if seen.discovered > kept:
            plan_children(report.run_id, report.collection)
    if run is None:
        ended = rt.runs.get(report.run_id)
        if ended is None:
            raise ReportRejected(report.report_key, "no such run")
        metrics.report_ignored()
        log.info("report_ignored_duplicate", report_key=report.report_key)
        # A redelivery after a crash between a child's end and its parent's count: count it
        # now (idempotent per child).
        if ended["state"] in ENDED:
            _count_child_ended(rt, ended, notify)
            return False
        # A redelivery after a crash between the count and the end: end it now (one
        # compare-and-set ends a run, so only one caller ever does).
        return finish_if_done(rt, ended, notify)
    return finish_if_done(rt, run, notify)


def finish_stalled(rt: Runtime, notify: Notify = _no_notify) -> int:
    """End the runs whose count reached zero with no end written: the process that applied
    their last report died between the count and the end, and nothing was left to redeliver
    (a report applied in a crawl's own thread, `crawl/parts.py`)."""
    ended = sum(finish_if_done(rt, run, notify) for run in rt.runs.stalled())
    if ended:
        log.warning("stalled_runs_ended", runs=ended)
    return ended
