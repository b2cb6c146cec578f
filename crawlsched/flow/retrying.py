"""retry-failed: crawl again, in the same run, the pages that failed on their own merits.

"On their own merits" is `run_control.RETRYABLE`: the page's last try in this run ended
`failed` (an HTTP error, a refused target, a parse or driver error) or `exhausted` (its
attempts used up). Pages given up because the machinery failed them (`expired`), starved,
stopped, or discoveries a bound cut are not retried.

The run's counts stay exact through the coordinator's usual atomic counters: one keyed update
moves the pages off their failed outcomes and onto `outstanding` (and reopens a finished run),
then the pages are made pending for the run's own pass, which crawls them under new
dispatches; their reports count them off again and the run ends once more, through the same
compare-and-set, with an end event and webhook of their own (`<run>:<event>:<n>`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.errors import RunNotFound, RunRefused
from crawlsched.events import emit
from crawlsched.flow.pausing import PlanPass
from crawlsched.logs import get_logger
from crawlsched.planning.run_control import RETRYABLE, moved_counts, retry_refusal
from crawlsched.planning.run_names import FINISHED
from crawlsched.runtime import Runtime

log = get_logger(__name__)


@dataclass
class RetrySummary:
    run_id: str
    reopened: bool = False  # the run had ended and runs again
    pages: dict[str, int] = field(default_factory=dict)  # taken back, by their last outcome


def _finish_cut_short(rt: Runtime, run_id: str, plan_pass: PlanPass) -> None:
    """A retry the run counted but whose pages were never released (a crash in between):
    release them now, so the run is not left waiting for them."""
    applied = {k for k in rt.runs.applied_reports(run_id) if k.startswith("retry:")}
    for collection in JOB_COLLECTIONS:
        store = rt.held_jobs(collection)
        if store.release_tagged(store.tagged_keys(run_id) & applied, rt.now()):
            plan_pass(run_id, collection)


def retry_failed(rt: Runtime, run_id: str, plan_pass: PlanPass) -> RetrySummary:
    run = rt.runs.get(run_id)
    if run is None:
        raise RunNotFound(run_id)
    if (refusal := retry_refusal(run)) is not None:
        raise RunRefused(refusal)
    _finish_cut_short(rt, run_id, plan_pass)
    # An ended run counted every report before it ended (and dropped their keys when its end
    # was announced; `retry_refusal` refuses one whose end is still being announced).
    reported = None if run["state"] == FINISHED else rt.runs.applied_reports(run_id)
    key = f"retry:{uuid.uuid4().hex}"
    summary = RetrySummary(run_id, reopened=run["state"] == "finished")
    tagged: list[str] = []
    for collection in JOB_COLLECTIONS:
        store = rt.held_jobs(collection)
        pages = store.failed_pages(run_id, RETRYABLE, reported)
        if not pages:
            continue
        tagged.append(collection)
        for outcome, n in store.tag([p["_id"] for p in pages], run_id, key).items():
            summary.pages[outcome] = summary.pages.get(outcome, 0) + n
    if not summary.pages:
        raise RunRefused(f"run {run_id!r} has no page that failed on its own to retry")
    if rt.runs.take_back(run_id, key, moved_counts(summary.pages), rt.now()) is None:
        for collection in tagged:
            rt.held_jobs(collection).untag(key)
        fresh = rt.runs.get(run_id) or run
        raise RunRefused(retry_refusal(fresh) or f"run {run_id!r} changed meanwhile: try again")
    for collection in JOB_COLLECTIONS:
        # The run goes on again: its pages are kept until its next end (dedup reads them).
        rt.children(collection).keep_with_run(run_id)
    for collection in tagged:
        rt.held_jobs(collection).release_tagged([key], rt.now())
        plan_pass(run_id, collection)
    emit(
        rt,
        "RunRetried",
        event_id=f"{run_id}:{key}",
        run_id=run_id,
        schedule_id=run.get("schedule_id"),
        reopened=summary.reopened,
        pages=summary.pages,
    )
    log.info("run_retry_failed", run_id=run_id, reopened=summary.reopened, **summary.pages)
    return summary
