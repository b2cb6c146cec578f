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

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from crawlsched.errors import RunAlreadyEnded, RunNotFound
from crawlsched.flow.coordination import Notify, finish_if_done
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.outcomes import STOPPED
from crawlsched.planning.run_names import ENDED
from crawlsched.runtime import Runtime

log = get_logger(__name__)


class StopWatch:
    """Whether a run (or its task) was stopped, or paused: read at once, then at most every
    `stop_check_s`, so that checking between jobs costs few reads per job. A stop is final;
    a pause may be lifted, and is read again like any state.

    The reads between jobs are shared by the batches of one run and task in the process
    (`rt.view_cache`): four threads crawling the same run make one read a second, not four.
    The first read of a batch is its own, so a batch never starts on what another batch read
    before a stop."""

    def __init__(self, rt: Runtime, run_id: str, task: str) -> None:
        self.rt, self.run_id, self.task = rt, run_id, task
        self.every_s = rt.settings.stop_check_s
        self._checked_at = float("-inf")
        self._state: str | None = None

    def _read(self) -> str | None:
        if self._state == "stop":
            return self._state
        now = time.monotonic()
        if now - self._checked_at < self.every_s:
            return self._state
        key = ("hold_state", self.run_id, self.task)
        shared = self.rt.view_cache.get(key)
        if self._checked_at > float("-inf") and shared and now - shared[0] < self.every_s:
            self._state, self._checked_at = shared[1], shared[0]
        else:
            self._state = self.rt.runs.hold_state(self.run_id, self.task)
            self._checked_at = time.monotonic()
            self.rt.view_cache[key] = (self._checked_at, self._state)
        return self._state

    def stopped(self) -> bool:
        return self._read() == "stop"

    def paused(self) -> bool:
        return self._read() == "pause"


def release_stopped(rt: Runtime, message: BatchMessage) -> dict[str, Any] | None:
    """Give a batch's jobs back as stopped and count them on its run (once per dispatch).

    Returns the run after the count, or None if this dispatch was counted before.
    """
    store = rt.jobs(message.collection)
    store.release(message.dispatch_id, STOPPED)
    counts = store.outcomes_of(message.dispatch_id, {STOPPED})
    if not counts:
        return None
    log.info("batch_stopped", dispatch_id=message.dispatch_id, run_id=message.run_id, **counts)
    return rt.runs.report(message.run_id, f"{message.dispatch_id}:stop", counts)


@dataclass
class StoppedRunGuard:
    """The planner's dispatch, unless the run (or the batch's task) was stopped or paused
    meanwhile."""

    rt: Runtime
    run_id: str
    forward: Callable[[BatchMessage], None]
    _watches: dict[str, StopWatch] = field(default_factory=dict)

    def dispatch(self, message: BatchMessage) -> None:
        if message.task not in self._watches:
            self._watches[message.task] = StopWatch(self.rt, self.run_id, message.task)
        # The parent's flag: a stop of the whole run reaches its children through it.
        if self._watches[message.task].stopped():
            release_stopped(self.rt, message)  # planning is open: the run ends after it closes
            return
        if self._watches[message.task].paused():
            from crawlsched.flow.pausing import hold_batch  # it imports coordination too

            hold_batch(self.rt, message)  # waits in its run until it is resumed
            return
        self.forward(message)


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
        from crawlsched.flow.children import stop_children_of  # it imports this module

        for run_id in summary.runs:
            stop_children_of(rt, run_id, notify)
    end = {"notify": notify} if notify else {}
    for run_id in run_ids:  # children first: a child's end may end its parent
        fresh = rt.runs.get(run_id)
        if fresh is not None and finish_if_done(rt, fresh, **end):
            summary.ended.append(run_id)
    log.info("run_stop_requested", runs=summary.runs, task=task, jobs=summary.released_jobs)
    return summary
