"""Stopping a run, one task of a run, or a run's children.

A stop is a flag on the run (`stop_requested`, or a task in `stopped_tasks`), never a message
chasing work around: everything that could start work reads it first. The planner reads it
before dispatching claimed batches, the gatekeepers before leasing anything for a batch that
waited, the crawl actor at the start of a batch and between jobs (at most every
`stop_check_s`). Work that sees it gives its jobs back untouched (pending, same attempt count)
labelled `stopped`, which count as ended for the run. Batches waiting for a resource are
released by the stop itself. The run then ends through the usual compare-and-set, as
`stopped`, so it is reported stopped exactly once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from crawlsched.errors import RunAlreadyEnded, RunNotFound
from crawlsched.flow.children import stop_children_of
from crawlsched.flow.coordination import Notify, finish_if_done
from crawlsched.flow.stop_watch import release_stopped
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.run_names import ENDED
from crawlsched.runtime import Runtime

log = get_logger(__name__)


@dataclass
class StopSummary:
    runs: list[str]
    released_batches: int = 0
    released_jobs: int = 0
    ended: list[str] = field(default_factory=list)


def stop_run(
    rt: Runtime, run_id: str, task: str | None = None, notify: Notify | None = None
) -> StopSummary:
    """Stop a run and its children (or only `task` in them)."""
    run = rt.runs.get(run_id)
    if run is None:
        raise RunNotFound(run_id)
    if run["state"] in ENDED:
        raise RunAlreadyEnded(run_id, run["state"])
    targets = [c["_id"] for c in rt.runs.children_of(run_id) if c["state"] not in ENDED]
    return _stop(rt, [*targets, run_id], task, notify)


def stop_children(rt: Runtime, run_id: str, notify: Notify | None = None) -> StopSummary:
    """Stop every child of a run that has not ended; the parent ends when they have."""
    if rt.runs.get(run_id) is None:
        raise RunNotFound(run_id)
    children = [c["_id"] for c in rt.runs.children_of(run_id) if c["state"] not in ENDED]
    return _stop(rt, [*children, run_id] if children else [], None, notify, parent_too=False)


def _stop(
    rt: Runtime,
    run_ids: list[str],
    task: str | None,
    notify: Notify | None,
    parent_too: bool = True,
) -> StopSummary:
    now = rt.now()
    to_flag = run_ids if parent_too else run_ids[:-1]
    summary = StopSummary(runs=[r for r in to_flag if rt.runs.request_stop(r, now, task)])
    for run_id in summary.runs:
        for doc in rt.waiting.for_run(run_id):
            if task is not None and doc.get("task") != task:
                continue
            token = uuid.uuid4().hex
            taken = rt.waiting.take(doc["_id"], token, now)
            if taken is None:
                continue  # being admitted right now: the gatekeeper sees the stop
            release_stopped(rt, BatchMessage.parse(taken["message"]))
            rt.waiting.remove(doc["_id"], token)
            summary.released_batches += 1
            summary.released_jobs += doc.get("jobs", 0)
    if task is None:
        for run_id in summary.runs:
            stop_children_of(rt, run_id, notify)
    end = {"notify": notify} if notify else {}
    for run_id in run_ids:  # children first: a child's end may end its parent
        fresh = rt.runs.get(run_id)
        if fresh is not None and finish_if_done(rt, fresh, **end):
            summary.ended.append(run_id)
    log.info("run_stop_requested", runs=summary.runs, task=task, jobs=summary.released_jobs)
    return summary
