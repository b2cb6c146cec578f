"""Several pages of one batch crawled at once.

A batch is crawled by one thread of a worker; fetched one page after another, a batch of 50
pages of one site keeps one request in flight while the site would take 16. The loop
(`crawl/loop.py`) stays the one place that decides and records: it hands each page's driver
call to a lane, up to `CRAWLSCHED_CRAWL_LANES` at once, and takes the results back one by one.

A lane is given a frozen job and gives back a frozen `progress.JobDone`; nothing else passes
between a lane and the loop. Politeness is not the lanes' to keep: every request goes through
the process's pacer like any thread's. With one lane the call runs in the loop's own thread.
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Callable

from crawlsched.crawl.pages import Page
from crawlsched.crawl.progress import JobDone
from crawlsched.environment import Done, Environment


class Lanes:
    """Owned by the loop's thread: only it calls these methods."""

    def __init__(self, env: Environment, width: int) -> None:
        self.width = width
        self._env = env
        self._pool = env.executor(width, "crawl-lane") if width > 1 else None
        self._running: dict[Done, Page] = {}
        self._done: list[tuple[Page, JobDone]] = []  # one lane: run in place
        self.busy_hosts: Counter[str] = Counter()  # hosts of the pages in flight

    def room(self) -> int:
        """How many more pages could start now."""
        return self.width - len(self._running) - len(self._done)

    def busy(self) -> bool:
        return bool(self._running or self._done)

    def in_flight(self) -> list[Page]:
        return [*self._running.values(), *(page for page, _ in self._done)]

    def start(self, page: Page, call: Callable[[], JobDone]) -> None:
        if self._pool is None:
            self._done.append((page, call()))
            return
        # The lane logs with the batch's bound log context (copied here, in the loop's thread).
        context = contextvars.copy_context()
        future = self._pool.submit(lambda: context.run(call))
        self._running[future] = page
        self.busy_hosts[page.host] += 1

    def next_done(self) -> tuple[Page, JobDone]:
        """The next page done: waits for one when none is."""
        if self._done:
            return self._done.pop(0)
        done = self._env.first_done(self._running)
        # The first started of those done: a set's order is no order to replay a run by.
        future = next(f for f in self._running if f in done)
        page = self._running.pop(future)
        self.busy_hosts[page.host] -= 1
        if self.busy_hosts[page.host] <= 0:
            del self.busy_hosts[page.host]
        return page, future.result()

    def close(self) -> None:
        """Wait for the lanes still running (a batch's pages never outlive it)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
