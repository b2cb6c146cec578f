"""What work reads before it starts: whether its run (or its task) was stopped or paused.

`StopWatch` reads the run's flags at once and then at most every `stop_check_s`;
`StoppedRunGuard` is the planner's dispatch behind that check; `release_stopped` gives a
batch's jobs back as stopped. Stopping a run itself is `flow/stopping.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from crawlsched.flow.pausing import hold_batch
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.outcomes import STOPPED
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
        now = self.rt.env.monotonic()
        if now - self._checked_at < self.every_s:
            return self._state
        key = ("hold_state", self.run_id, self.task)
        shared = self.rt.view_cache.get(key)
        if self._checked_at > float("-inf") and shared and now - shared[0] < self.every_s:
            self._state, self._checked_at = shared[1], shared[0]
        else:
            self._state = self.rt.runs.hold_state(self.run_id, self.task)
            self._checked_at = self.rt.env.monotonic()
            self.rt.view_cache.put(key, self._checked_at, self._state)
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
            hold_batch(self.rt, message)  # waits in its run until it is resumed
            return
        self.forward(message)
