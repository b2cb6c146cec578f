"""The crawl of one batch message: a walk through `planning/batch_states.BatchState` (drawn
there, with how a crash in each state is recovered).

RECEIVED: the jobs the dispatch still holds are loaded and begun (none can be taken over from
now on); a redelivery that finds none puts back what its parts left behind (`recovery`).
LOADED: a stopped run's batch is released as stopped, a paused run's waits in its run; else
its media is checked against the store and it is CRAWLING (`loop`), handing parts over as it
goes. RECORDED: the last part is written; the rest is released as stopped, or PARKED to wait
for its hosts or resources. Then the leases and hosts go back (waking whoever waits for them)
and the report is sent: REPORTED.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from crawlsched.crawl.frontier import Frontier
from crawlsched.crawl.identity import identity_of, settled
from crawlsched.crawl.lanes import Lanes
from crawlsched.crawl.loop import Crawl, Loop, LoopEnd
from crawlsched.crawl.pages import locator
from crawlsched.crawl.progress import CrawledPart
from crawlsched.crawl.records import crawl_report, record_part
from crawlsched.crawl.recovery import recover_parts
from crawlsched.crawl.resources import (
    DispatchLease,
    Leases,
    ResourceLost,
    batch_browser,
    lost_resource,
)
from crawlsched.crawl.setup import batch_context, checked_media, driver_calls, robots_first
from crawlsched.drivers import registry
from crawlsched.drivers.base import jobs_at_once
from crawlsched.flow.admission import keys_of
from crawlsched.flow.pausing import hold_batch
from crawlsched.flow.stop_watch import StopWatch
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning.batch_states import BatchEvent, BatchState, next_batch_state
from crawlsched.planning.outcomes import PHASE_OUTCOMES, STOPPED
from crawlsched.resources.queueing import host_wait_key
from crawlsched.runtime import Runtime

log = get_logger(__name__)

Report = Callable[[ReportMessage], None]
Wake = Callable[[frozenset[str]], None]
WakeAt = Callable[[frozenset[str], datetime], None]
Apply = Callable[[ReportMessage, int], object]


def crawl_batch(
    rt: Runtime,
    message: BatchMessage,
    report: Report,
    wake: Wake = lambda keys: None,
    wake_at: WakeAt = lambda keys, when: None,
    first_delivery: bool = True,
    apply_report: Apply | None = None,
) -> dict[str, int]:
    """Crawl a batch message's pages, record and report them; the outcomes its report counts.
    `first_delivery`: neither redelivered by RabbitMQ nor retried. `apply_report` applies a
    report in this thread (`coordination.record_report`): with it, a batch keeps the pages it
    finds of hosts its process holds, counted by their run before it crawls them."""
    return _Delivery(rt, message, report, wake, wake_at, first_delivery, apply_report).run()


class _Delivery:
    """One delivery of a batch message, walked through its states."""

    def __init__(
        self,
        rt: Runtime,
        message: BatchMessage,
        report: Report,
        wake: Wake,
        wake_at: WakeAt,
        first_delivery: bool,
        apply: Apply | None,
    ) -> None:
        self.rt, self.message, self.first_delivery = rt, message, first_delivery
        self.report, self.wake, self.wake_at, self.apply = report, wake, wake_at, apply
        self.state = BatchState.RECEIVED
        self.started = rt.env.monotonic()
        self.written: dict[str, int] = {}  # outcomes written, when this delivery wrote all
        self.wake_keys: set[str] = set()  # what a rest put back to wait waits for
        self.jobs: list[dict[str, Any]] = []

    def move(self, event: BatchEvent) -> None:
        self.state = next_batch_state(self.state, event)

    def run(self) -> dict[str, int]:
        try:
            self._load()
            if self.state is BatchState.LOADED:
                self._begin()
        finally:
            self._let_go()
        return self._report()

    def _load(self) -> None:
        """The jobs the dispatch still holds, its own from now on: a running batch of the run
        may have taken some over before (not loaded). A batch that needs an account or a node
        is never taken from: its jobs are its leases'."""
        rt, message = self.rt, self.message
        store = rt.jobs(message.collection)
        if message.need_login or message.need_selenium or message.need_proxy:
            self.jobs = store.load_claimed(message.dispatch_id, message.decoded_job_ids())
        else:
            self.jobs = store.load_and_begin(message.dispatch_id, message.decoded_job_ids())
        if not self.jobs:
            if not self.first_delivery:
                self.wake_keys |= recover_parts(rt, message, self.report).wake
            self.move(BatchEvent.NOTHING_HELD)
            return
        if len(self.jobs) > len(message.job_ids):
            # It took jobs over before its worker died: they are its own, listed from now on.
            ids = [encode_id(doc["_id"]) for doc in self.jobs]
            self.message = message.model_copy(update={"job_ids": ids})
        self.move(BatchEvent.LOADED)

    def _begin(self) -> None:
        rt, message = self.rt, self.message
        stop = StopWatch(rt, message.run_id, message.task)
        if stop.stopped():
            # Stopped before it started: nothing is crawled, the leases go back below.
            rt.jobs(message.collection).release(message.dispatch_id, STOPPED)
            log.info("batch_stopped", dispatch_id=message.dispatch_id, jobs=len(self.jobs))
            self.move(BatchEvent.RUN_STOPPED)
        elif stop.paused():
            # Paused before it started: the jobs wait in their run, nothing ended, no report.
            hold_batch(rt, message)
            self.move(BatchEvent.RUN_PAUSED)
        else:
            media = checked_media(rt, message, self.jobs)
            self.move(BatchEvent.CRAWL)
            end, frontier = self._crawl(stop, media)
            self._end(end, frontier)

    def _crawl(self, stop: StopWatch, media: dict[str, Any]) -> tuple[LoopEnd, Frontier]:
        rt, message = self.rt, self.message
        deadlines = [doc["lease_deadline"] for doc in self.jobs if doc.get("lease_deadline")]
        dispatch = DispatchLease(
            rt, message.collection, message.dispatch_id, min(deadlines) if deadlines else None
        )
        leases = Leases(rt, message.lease_ids)
        fields = ("target", *rt.target_fields(message.collection))
        locate = locator(media, fields, rt.pacer.key_of)
        frontier = Frontier(
            rt, message, self.jobs, leases, dispatch, stop, locate, self.report, self.apply,
            released=self.wake,
        )  # fmt: skip
        try:
            leases.keep()
            identity = identity_of(rt, message, leases, media)
            context = batch_context(rt, message, leases, dispatch, frontier.bounds, identity)
            with (
                batch_browser(rt, leases, context),
                settled(rt, message, leases, identity, context),
            ):
                driver = registry.create(str(media.get("driver_class")))
                alone = message.need_login or message.need_selenium  # one account, one browser
                width = 1 if alone or not jobs_at_once(driver) else rt.settings.crawl_lanes
                crawl = Crawl(
                    frontier=frontier,
                    lanes=Lanes(rt.env, width),
                    start=driver_calls(rt, message, context, leases, dispatch, width, driver),
                    robots_first=robots_first(context),
                    lost=lambda e, opened: lost_resource(
                        rt, e, leases, opened, message.media_name, message.task
                    ),
                    dispatch_lost=lambda: dispatch.lost,
                    stopped=stop.stopped,
                    env=rt.env,
                    rt=rt,
                    refusals_allowed=rt.settings.host_refusals_per_page,
                    pending=[locate(doc) for doc in self.jobs],
                )
                frontier.again(crawl.pending)
                loop = Loop(crawl)
                try:
                    return loop.run(), frontier
                finally:
                    loop.close()
        except ResourceLost as e:
            held = set(frontier.message.decoded_job_ids())
            left = tuple(doc["_id"] for doc in self.jobs if doc["_id"] in held)
            return LoopEnd(CrawledPart(), unfinished=left, interruption=str(e)), frontier

    def _end(self, end: LoopEnd, frontier: Frontier) -> None:
        """Record the last part, then release or park what is left."""
        rt = self.rt
        # Parts handed over meanwhile were reported: what follows is the last part's.
        self.message = message = frontier.message
        if frontier.parts:
            self.started = frontier.part_began
        part = record_part(
            rt, message, end.crawled, frontier.bounds, tuple(frontier.jobs), frontier.held()
        )
        self.move(BatchEvent.LAST_PART_RECORDED)
        if part.whole and not end.stopped:
            self.written = dict(part.outcomes)
        if end.stopped:
            rt.jobs(message.collection).release(message.dispatch_id, STOPPED, list(end.stopped))
            log.info("batch_stopped", dispatch_id=message.dispatch_id, jobs=len(end.stopped))
            self.move(BatchEvent.REST_STOPPED)
        elif end.interruption:
            self.wake_keys |= frontier.give_back(
                list(end.unfinished), end.interruption, end.host_waits, end.not_before,
                end.refused, self.wake_at,
            )  # fmt: skip
            self.move(BatchEvent.REST_PARKED)

    def _let_go(self) -> None:
        """The hosts this batch held and nobody else here uses go to whoever waits for them;
        the batches waiting for a host given back here are woken; the leases go back."""
        rt, message = self.rt, self.message
        released = {host_wait_key(host) for host in rt.pacer.give_back()}
        if released | self.wake_keys:
            self.wake(frozenset(released | self.wake_keys))
        if message.lease_ids:
            rt.pools.release(message.lease_ids, rt.now())
            self.wake(keys_of(message))

    def _report(self) -> dict[str, int]:
        """The report carries no counts (the coordinator reads them from the jobs); what
        matters here is whether this dispatch ended any job. When this delivery wrote every
        outcome it knows without a read; otherwise it reads back (a redelivery after a crash
        between recording and reporting sends the same report again, and stopped jobs were
        written by another command). A first delivery that found none of its jobs wrote
        nothing, and nobody else writes a crawl's outcome under its dispatch id."""
        message = self.message
        if self.first_delivery and not self.jobs:
            counts: dict[str, int] = {}
        else:
            store = self.rt.jobs(message.collection)
            counts = self.written or store.outcomes_of(message.dispatch_id, PHASE_OUTCOMES["crawl"])
        if counts:
            self.report(crawl_report(message, self.started, self.rt.env.monotonic()))
        self.move(BatchEvent.REPORTED)
        return counts
