"""Several jobs of one batch crawled at once by one worker thread.

A batch is crawled by one thread of a worker; fetched one page after another, a batch of 50
pages of one site keeps one request in flight while the site would take 16, and the pages a
children pass cuts into few large batches leave most threads without work. The loop in
`crawl_loop` stays the one place that decides and records (which job next, what a job's
outcome means, hand-overs, stops): it only hands the driver call of each job to a lane, up to
`CRAWLSCHED_CRAWL_LANES` at once, and takes their results back one by one as they finish.

Lanes are threads of a pool that lives as long as the batch. Politeness is not theirs to keep:
every request of every lane goes through the process's pacer like any thread's. With one lane,
the job runs in the loop's own thread, as it always did.
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Finished:
    """A job a lane is done with: its document, when it began, the context it used, and the
    exception it raised (None when it succeeded)."""

    doc: dict
    started_at: Any
    context: Any
    error: BaseException | None = None


@dataclass
class Lanes:
    width: int
    _pool: ThreadPoolExecutor | None = None
    _running: dict[Future, tuple[Finished, str]] = field(default_factory=dict)
    _done: list[Finished] = field(default_factory=list)  # one lane: run in place
    busy_hosts: Counter = field(default_factory=Counter)  # hosts of the jobs in flight

    def free(self) -> bool:
        return self.room() > 0

    def room(self) -> int:
        """How many more jobs could start now."""
        return self.width - len(self._running) - len(self._done)

    def busy(self) -> bool:
        return bool(self._running or self._done)

    def in_flight(self) -> list[dict]:
        """The documents of the jobs started and not yet taken back (`next_done`)."""
        return [job.doc for job, _ in self._running.values()] + [job.doc for job in self._done]

    def start(self, job: Finished, host: str, crawl: Callable[[], None]) -> None:
        """Run `crawl` for `job` (in place with one lane; else in a lane of the pool)."""
        if self.width == 1:
            job.error = _run(crawl)
            self._done.append(job)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.width, thread_name_prefix="crawl-lane")
        # The lane logs with the batch's bound log context.
        future = self._pool.submit(contextvars.copy_context().run, _run, crawl)
        self._running[future] = (job, host)
        self.busy_hosts[host] += 1

    def next_done(self) -> Finished:
        """The next job done: waits for one when none is."""
        if self._done:
            return self._done.pop(0)
        done, _ = wait(list(self._running), return_when=FIRST_COMPLETED)
        future = next(iter(done))
        job, host = self._running.pop(future)
        self.busy_hosts[host] -= 1
        if self.busy_hosts[host] <= 0:
            del self.busy_hosts[host]
        job.error = future.result()
        return job

    def close(self) -> None:
        """Wait for the lanes still running (a batch's jobs never outlive it)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _run(crawl: Callable[[], None]) -> BaseException | None:
    try:
        crawl()
    except Exception as e:  # the loop decides what it means
        return e
    return None
