"""Runs: list them, one run, what it waits for and discovered, its timeline and the items it
stored; start one now, stop, pause, resume and retry what failed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from crawlsched.control import Senders
from crawlsched.control.pages import page_of, sliced
from crawlsched.encoding import plain
from crawlsched.errors import RunNotFound, RunRefused, ScheduleNotFound
from crawlsched.flow import run_timeline, schedule_ops, views
from crawlsched.logs import get_logger
from crawlsched.runtime import Runtime

log = get_logger(__name__)

# What a child run's row carries: enough for a runs table.
CHILD_RUN_FIELDS = (
    "state", "result", "planning", "planned", "outstanding", "counts", "paused", "stop_requested",
)  # fmt: skip


def require(rt: Runtime, run_id: str) -> dict[str, Any]:
    run = rt.runs.get(run_id)
    if run is None:
        raise RunNotFound(run_id)
    return run


def page(
    rt: Runtime,
    limit: int = 100,
    offset: int = 0,
    state: str | None = None,
    schedule_id: str | None = None,
    empty: bool = False,
) -> dict[str, Any]:
    """Runs, newest first (`empty`: also those that planned nothing)."""
    return page_of(rt.runs.page(limit + 1, offset, state, schedule_id, empty), limit, offset)


def view(rt: Runtime, run_id: str) -> dict[str, Any]:
    """One run: its counts, what waits for it, its child runs and pages per depth."""
    return plain(views.run_details(rt, require(rt, run_id)))


def timeline(rt: Runtime, run_id: str) -> dict[str, Any]:
    return plain(run_timeline.timeline(rt, require(rt, run_id)))


def resources(rt: Runtime, run_id: str, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """Which account and node served each batch of the run, and how long it waited."""
    require(rt, run_id)
    return sliced(rt.assignments.for_run(run_id), limit, offset)


def children(
    rt: Runtime,
    run_id: str,
    limit: int = 100,
    offset: int = 0,
    outcome: str | None = None,
    errors: bool = False,
) -> dict[str, Any]:
    """The run's child runs (multi-process), then the pages its crawls discovered: only those
    whose last try ended with `outcome`, or (`errors`) with an error, when asked."""
    run = require(rt, run_id)
    child_runs = [
        {"kind": "run", "run_id": c["_id"], **{k: c[k] for k in CHILD_RUN_FIELDS if k in c}}
        for c in rt.runs.children_of(run_id)
    ]
    if outcome is not None or errors:
        child_runs = []  # the filters are the pages'
    if offset + limit + 1 <= len(child_runs):
        return page_of(child_runs[offset : offset + limit + 1], limit, offset)
    skip_jobs = max(offset - len(child_runs), 0)
    jobs = views.children_rows(rt, run["_id"], limit + 1, skip_jobs, outcome, errors)
    rows = child_runs[offset:] + [{"kind": "job", **j} for j in jobs]
    return page_of(rows[: limit + 1], limit, offset)


def items(
    rt: Runtime,
    run_id: str,
    since: datetime | str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> dict[str, Any]:
    """What the run's crawls stored, every data model, oldest first by when it was last seen
    (`since`: seen then or later; a crawl's export asks again from the last it saw)."""
    require(rt, run_id)
    if isinstance(since, str):
        try:
            since = datetime.fromisoformat(since)
        except ValueError:
            raise ValueError(f"since: not an ISO date and time: {since!r}") from None
    found = rt.results.of_run(run_id, since, offset + limit + 1)
    found.sort(key=lambda d: (d.get("last_seen") or datetime.min, str(d.get("model")), d["key"]))
    return page_of(found[offset : offset + limit + 1], limit, offset)


def start(rt: Runtime, senders: Senders, schedule_id: str) -> dict[str, Any]:
    """A one-time run of a schedule, now; its next fire time does not move."""
    if rt.schedules.get(schedule_id) is None:
        raise ScheduleNotFound(schedule_id)
    run_id = schedule_ops.run_now(rt, schedule_id, senders.planner())
    return {"run_id": run_id, "schedule_id": schedule_id}


def _stopped(summary: Any, task: str | None) -> dict[str, Any]:
    return {
        "stopping": summary.runs,
        "task": task,
        "released_batches": summary.released_batches,
        "released_jobs": summary.released_jobs,
        "ended": summary.ended,
    }


def stop(rt: Runtime, senders: Senders, run_id: str, task: str | None = None) -> dict[str, Any]:
    """Stop a run and its children, or one task of them."""
    from crawlsched.flow.stopping import stop_run

    require(rt, run_id)
    return _stopped(stop_run(rt, run_id, task, senders.notify), task)


def stop_children(rt: Runtime, senders: Senders, run_id: str) -> dict[str, Any]:
    from crawlsched.flow.stopping import stop_children as stop_them

    require(rt, run_id)
    summary = stop_them(rt, run_id, senders.notify)
    if not summary.runs:
        raise RunRefused(f"run {run_id!r} has no running children to stop")
    return _stopped(summary, None)


def pause(rt: Runtime, run_id: str) -> dict[str, Any]:
    from crawlsched.flow.pausing import pause_run

    require(rt, run_id)
    summary = pause_run(rt, run_id)
    return {
        "paused": summary.runs,
        "already_paused": summary.already,
        "held_batches": summary.held_batches,
        "held_jobs": summary.held_jobs,
    }


def _plan_pass(senders: Senders) -> Any:
    """The sender of a run's own pass; without one the ticker's next sweep plans the run's
    waiting pages."""
    if senders.plan_pass is not None:
        return senders.plan_pass

    def by_the_ticker(run_id: str, collection: str) -> None:
        log.info("run_pass_left_to_ticker", run_id=run_id, collection=collection)

    return by_the_ticker


def resume(rt: Runtime, senders: Senders, run_id: str) -> dict[str, Any]:
    """Lift a pause: what waited is planned again (`waiting_jobs`); `outstanding`: the pages
    the run still waits for, whether they waited or were under way."""
    from crawlsched.flow.pausing import resume_run

    require(rt, run_id)
    summary = resume_run(rt, run_id, _plan_pass(senders), senders.notify)
    run = rt.runs.get(run_id) or {}
    return {
        "resumed": summary.runs,
        "was_paused": not summary.already,
        "waiting_jobs": summary.held_jobs,
        "outstanding": max(run.get("outstanding", 0), 0),
        "pass_sent": senders.plan_pass is not None,
    }


def retry_failed(rt: Runtime, senders: Senders, run_id: str) -> dict[str, Any]:
    """Crawl again, in the same run, the pages whose last try failed on their own."""
    from crawlsched.flow.retrying import retry_failed as retry

    require(rt, run_id)
    summary = retry(rt, run_id, _plan_pass(senders))
    return {
        "run_id": run_id,
        "reopened": summary.reopened,
        "pages": summary.pages,
        "pass_sent": senders.plan_pass is not None,
    }
