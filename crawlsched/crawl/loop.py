"""The loop over a batch's pages: one thread decides and records; lanes run the driver calls.

Its states are `planning/batch_states.LoopState` (drawn there): pages start while CRAWLING or
HANDING_OVER; a part due is recorded beside the crawl (a batch that keeps pages: HANDING_OVER)
or in this thread once the lanes are idle (PART_INLINE); a stop, the worker's own drain
(SIGTERM) or a lost resource lets the lanes finish (DRAINING); nothing left ends it. Each step
takes the next thing that happened — a page done, a part recorded, nothing left — and moves
the state by `next_loop_state`.

A page's failure is the page's (retried later; a discovered page gets one attempt per run). A
host not ready puts the page aside (it waits for its host; a host that answered it 429 or 503
too often in the run gives it up). The loss of what the batch runs on (account refused, lease
lost, browser gone) stops the loop: the pages not crawled go back to wait for another resource.

A run stopped releases the rest as stopped; a drain records the pages in flight and gives the
rest back to wait, for another worker (no lease is left for the expiry sweep to reclaim).

What crosses threads: a lane is handed a frozen job and hands back a frozen `JobDone`; a part
recorded beside the crawl is handed a frozen `PartRecord` and hands back a frozen `Handed`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from crawlsched.crawl.choosing import Aside, next_page, ready_soon
from crawlsched.crawl.frontier import Frontier
from crawlsched.crawl.lanes import Lanes
from crawlsched.crawl.pages import Page
from crawlsched.crawl.parts import Handed, PartRecord
from crawlsched.crawl.progress import Crawled, CrawledPart, JobDone
from crawlsched.environment import Done
from crawlsched.planning.batch_states import (
    LoopEvent,
    LoopState,
    next_loop_state,
    starts_pages,
    takes_over,
)
from crawlsched.politeness.pacer import HostNotReady


@dataclass(frozen=True)
class LoopEnd:
    """How the loop ended: the last part's crawl, and what is left of the batch."""

    crawled: CrawledPart
    stopped: tuple[Any, ...] = ()  # ids given back as stopped: the run was stopped
    unfinished: tuple[Any, ...] = ()  # ids to put back to wait
    interruption: str | None = None
    # The unfinished pages wait for these hosts, each ready at that moment (None: when its
    # holder gives it back).
    host_waits: Mapping[str, datetime | None] = field(default_factory=dict)
    not_before: datetime | None = None  # ... until a holder gives one back, or until then
    # Of the unfinished, those their host answered 429/503 here, and how many times.
    refused: Mapping[Any, int] = field(default_factory=dict)
    drained: bool = False  # its worker is stopping: the unfinished go back, ready at once


@dataclass
class Crawl:
    """What the loop works with (`crawl/batch.py` builds it)."""

    frontier: Frontier
    lanes: Lanes
    start: Callable[[Page], Callable[[], JobDone]]  # a page's driver call, for a lane
    robots_first: Callable[[Page], bool | None]  # True: robots.txt was read, page waits
    lost: Callable[[BaseException, bool], str | None]  # why the batch cannot go on
    dispatch_lost: Callable[[], bool]
    stopped: Callable[[], bool]
    env: Any  # also says when the worker drains (`draining()`)
    rt: Any
    refusals_allowed: int
    recorder: Any = None  # the executor a part is recorded on beside the crawl
    pending: list[Page] = field(default_factory=list)


class Loop:
    def __init__(self, crawl: Crawl) -> None:
        self.c = crawl
        self.state = LoopState.CRAWLING
        self.pending = list(crawl.pending)
        self.aside = Aside()
        self.asked_again = False
        self.stop_seen = False
        self.drain_seen = False
        self.crawled = Crawled()
        self.interruption: str | None = None
        self.interrupted: list[Page] = []  # in flight when the batch was interrupted
        self.refused: dict[Any, int] = {}  # job id -> times its host answered 429/503 here
        # Pages done whose host stays until the next part brings the pages they found of it.
        self.unsettled: list[Page] = []
        self.recording: Done | None = None  # a part recorded beside the crawl
        self.settle_after: list[Page] = []  # done with their hosts once it is recorded

    def _move(self, event: LoopEvent) -> None:
        self.state = next_loop_state(self.state, event)

    def run(self) -> LoopEnd:
        while self.state is not LoopState.ENDED:
            self._collect_part(wait=False)
            if starts_pages(self.state):
                self._start_pages()
            if self.c.lanes.busy():
                self._finished(*self.c.lanes.next_done())
            elif self.recording is not None:
                self._collect_part(wait=True)
            elif self.state is LoopState.PART_INLINE:
                self._took(self.c.frontier.put(self._record()), self._settled())
            elif self.state is LoopState.CRAWLING and not self.pending and self._ask_again():
                continue
            elif not self._part_due():
                self._move(LoopEvent.LANES_IDLE)
        return self._end()

    # -- starting pages ---------------------------------------------------------------------

    def _start_pages(self) -> None:
        c, lanes = self.c, self.c.lanes
        while lanes.room() > 0 and starts_pages(self.state):
            if c.stopped():
                self.stop_seen = True
                self._move(LoopEvent.STOP_SEEN)
                return
            if c.env.draining():
                self.drain_seen = True
                self._move(LoopEvent.STOP_SEEN)
                return
            # Its own pages all wait for their hosts (or its last ones are in flight): rather
            # than wait, take over pages of free hosts from the run's batches not begun.
            waiting = self.pending or lanes.busy()
            idle = not ready_soon(c.rt.pacer, self.pending, c.rt.now())
            if takes_over(self.state) and waiting and idle:
                mine = {p.host for p in self.pending + self.aside.pages}
                self.pending += c.frontier.take(lanes.room(), mine | set(lanes.busy_hosts))
            page = next_page(c.rt.pacer, self.pending, lanes.busy_hosts, c.rt.now())
            if page is None:
                return  # none left, or every host left is busy here: wait for a lane
            try:
                waits = c.robots_first(page)
            except HostNotReady as e:
                self._aside(e, page)
                continue
            if waits:
                self.pending.append(page)  # its host's next start is a delay away
                continue
            if not page.doc.get("scope_run"):
                # A planned page (not a child): its run knows its URL as seen, so a page
                # that links back to it does not crawl it again.
                self.crawled.seed_urls.append(page.url)
            lanes.start(page, c.start(page))

    def _ask_again(self) -> bool:
        """Once, when nothing is left: the pages put aside for hosts another process held."""
        if self.asked_again or not self.aside.pages:
            return False
        self.asked_again = True
        self.pending = self.aside.held_elsewhere()
        self.c.frontier.again(self.pending)
        return bool(self.pending)

    # -- pages done -------------------------------------------------------------------------

    def _finished(self, page: Page, done: JobDone) -> None:
        c = self.c
        if self.interruption:
            # Whatever a page in flight did, the batch can no longer record it as it should
            # (its dispatch or a lease is gone): it goes back with the rest.
            self.interrupted.append(page)
            return
        if isinstance(done.error, HostNotReady):
            self._not_ready(done.error, page, done)
            return
        if done.error is not None:
            if (why := c.lost(done.error, done.browser_opened)) is not None:
                self._interrupt(why, page)
                return
            self.crawled.failed(done, c.rt.retry_policy, c.rt.now())
            self._done_with(page)
            return
        if c.dispatch_lost():
            # The driver swallowed the loss: what it did for this page cannot be recorded.
            self._interrupt(f"dispatch {c.frontier.message.dispatch_id} was reclaimed", page)
            return
        self.crawled.succeeded(done, c.rt.now())
        rest = self._rest()
        if c.frontier.keeps_host(self.crawled, page.host, Counter(p.host for p in rest)):
            self.unsettled.append(page)  # its host stays: the part found pages of it to keep
        else:
            self._done_with(page)
        self._part_due(rest)

    def _part_due(self, rest: list[Page] | None = None) -> bool:
        """Hand the part over when it is due (only while CRAWLING: one part at a time)."""
        c = self.c
        rest = self._rest() if rest is None else rest
        if self.state is not LoopState.CRAWLING or not c.frontier.part_due(self.crawled, rest):
            return False
        if c.frontier.keeping:
            self._move(LoopEvent.PART_DUE_BESIDE)
            self._hand_over_beside()
        else:
            self._move(LoopEvent.PART_DUE_INLINE)
        return True

    def _not_ready(self, e: HostNotReady, page: Page, done: JobDone) -> None:
        """Not the page's failure, nor the machinery's: its host is not ready. Its pages wait
        for it; a page the host itself answered 429 or 503 too often in this run is given
        up, with the reason."""
        if e.answered:
            times = int(page.doc.get("host_refusals") or 0) + self.refused.get(page.job_id, 0) + 1
            if times >= self.c.refusals_allowed:
                why = f"its host answered 429/503 {times} times in this run ({e.why})"
                self.crawled.given_up(done, why[:500], self.c.rt.now())
                self._done_with(page)
                return
            self.refused[page.job_id] = self.refused.get(page.job_id, 0) + 1
        self._aside(e, page)

    def _aside(self, e: HostNotReady, page: Page) -> None:
        before = set(map(id, self.aside.pages))
        self.pending = self.aside.put(e, page, self.pending)
        for moved in self.aside.pages:
            if id(moved) not in before:
                self.c.frontier.done_with(moved, take_more=False)

    def _interrupt(self, why: str, page: Page) -> None:
        self.interruption = why
        self.interrupted.append(page)
        self._move(LoopEvent.RESOURCE_LOST)

    def _done_with(self, page: Page) -> None:
        # Pages of another batch join this one only while no part is being recorded.
        self.pending += self.c.frontier.done_with(page, take_more=takes_over(self.state))

    def _rest(self, in_flight: bool = False) -> list[Page]:
        """The pages left to crawl (with those in flight)."""
        flying = self.c.lanes.in_flight() if in_flight else []
        return self.pending + self.aside.pages + flying

    # -- parts ----------------------------------------------------------------------------

    def _record(self, in_flight: bool = False) -> PartRecord:
        record = self.c.frontier.prepare(self.crawled, self._rest(in_flight))
        self.crawled = Crawled()  # the next part's
        return record

    def _settled(self) -> list[Page]:
        settled, self.unsettled = self.unsettled, []
        return settled

    def _hand_over_beside(self) -> None:
        """Record the part in a thread of its own while the lanes go on: the pages in flight
        move to the next part with the rest, and what they find is the next part's."""
        c = self.c
        if c.recorder is None:
            c.recorder = c.env.executor(1, "crawl-hand-over")
        record = self._record(in_flight=True)
        self.settle_after = self._settled()
        self.recording = c.recorder.submit(lambda: c.frontier.put(record))

    def _collect_part(self, wait: bool) -> None:
        if self.recording is None or not (wait or self.recording.done()):
            return
        if wait and not self.recording.done():
            self.c.env.first_done([self.recording])
        handed, self.recording = self.recording.result(), None
        self._took(handed, self.settle_after)

    def _took(self, handed: Handed, settled: list[Page]) -> None:
        """What the batch still holds after a hand-over (a page no longer held is recorded by
        nobody: its dispatch was reclaimed), the pages it kept, and the pages whose hosts
        waited for them done with their hosts."""
        self._move(LoopEvent.PART_RECORDED)
        self.pending = [p for p in self.pending if p.job_id in handed.held]
        self.aside.keep(handed.held)
        self.pending += self.c.frontier.took(handed)
        for page in settled:
            self._done_with(page)

    # -- the end ----------------------------------------------------------------------------

    def _end(self) -> LoopEnd:
        crawled = self.crawled.frozen()
        if self.stop_seen and not self.interruption:
            gone = tuple(p.job_id for p in self.pending + self.aside.pages)
            return LoopEnd(crawled, stopped=gone)
        if self.interruption:
            left = tuple(p.job_id for p in self.interrupted + self.pending + self.aside.pages)
            return LoopEnd(crawled, unfinished=left, interruption=self.interruption,
                           refused=self._refused(left))  # fmt: skip
        if self.drain_seen and (self.pending or self.aside.pages):
            # They wait for their hosts: those put aside as they were told, the others only
            # until this process gives its hosts back (at the batch's end), which wakes them
            # at once. Not for a clock's tick: a worker group may drain with no clock running
            # (dramatiq stops a whole group when one of its processes dies).
            left = tuple(p.job_id for p in self.pending + self.aside.pages)
            why = "its worker was stopping (drained on SIGTERM)"
            hosts: dict[str, datetime | None] = {p.host: None for p in self.pending}
            not_before = None
            if self.aside.pages:
                _, aside_hosts, _ = self.aside.waits()
                hosts = {**aside_hosts, **hosts}
            return LoopEnd(crawled, unfinished=left, interruption=why, host_waits=hosts,
                           not_before=not_before, refused=self._refused(left),
                           drained=True)  # fmt: skip
        if not self.aside.pages:
            return LoopEnd(crawled)
        why, hosts, not_before = self.aside.waits()
        ids = tuple(p.job_id for p in self.aside.pages)
        refused = self._refused(ids)
        return LoopEnd(crawled, (), ids, why, hosts, not_before, refused)

    def _refused(self, ids: tuple[Any, ...]) -> dict[Any, int]:
        return {job_id: self.refused[job_id] for job_id in ids if job_id in self.refused}

    def close(self) -> None:
        """Wait for what still runs beside: a batch's records never outlive it."""
        self.c.lanes.close()
        if self.c.recorder is not None:
            self.c.recorder.shutdown(wait=True)
        self.c.frontier.close()
