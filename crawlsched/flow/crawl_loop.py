"""The crawl of a batch's jobs, one after the other, in one driver and one context.

For each job the driver's method for the task runs; what it saved and discovered is collected
per job. A job's failure is that job's (retried later; a discovered child gets one attempt per
run, so a dead link ends as `exhausted` and never holds its run open). A failure of what the
batch runs on — account refused or rate-limited, lease lost, browser session gone — stops the
loop: the jobs not crawled go back to wait for another resource.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from crawlsched.drivers import registry
from crawlsched.drivers.base import (
    CrawlJob,
    LoginRejected,
    RateLimited,
    jobs_at_once,
    task_method,
)
from crawlsched.drivers.browser_session import is_session_lost
from crawlsched.drivers.context import CrawlContext
from crawlsched.flow.batch_hosts import (
    ask_again,
    next_job,
    ready_soon,
    set_aside,
    wait_for_hosts,
)
from crawlsched.flow.crawl_lanes import Finished, Lanes
from crawlsched.flow.crawl_progress import Progress, failed, succeeded
from crawlsched.flow.crawl_resources import DispatchLease, Leases, ResourceLost, node_lost
from crawlsched.flow.host_use import HostUse
from crawlsched.flow.resource_events import ban_account_by_lease
from crawlsched.flow.stop_watch import StopWatch
from crawlsched.flow.take_over import Adopting, TakeOver
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.due import derive_target
from crawlsched.politeness.pacer import HostNotReady
from crawlsched.resources.rules import ACCOUNT_POOL, SELENIUM_POOL
from crawlsched.runtime import Runtime

log = get_logger(__name__)

# Queued pages of a host this process is about to be done with, brought here at once to keep it
# (`_done_with_host`): a few of its delays' worth, two store commands for them all.
KEEP_HOST_PAGES = 8


def job_url(job: dict[str, Any], target: str, media: dict[str, Any] | None) -> str:
    if isinstance(job.get("url"), str) and job["url"]:
        return job["url"]
    template = (media or {}).get("url_template")
    if template:
        return template.format(handle=target)
    return target


class PartFlush(Protocol):
    """Hands the crawled part of a batch to its run while the batch goes on, keeping the
    pages it found of hosts its process holds (`link_flush.LinkFlush`)."""

    kept: list[dict]  # the pages the last hand-over kept, for the batch to crawl
    keeping: bool  # whether it may keep any: then hand-overs run beside the crawl

    def due(self, progress: Progress, rest: list[dict], rest_hosts: Mapping[str, int]) -> bool: ...

    def keepable(
        self, progress: Progress, ahead: Mapping[str, int] | None = None
    ) -> list[tuple[str, str, str]]: ...

    def flush(
        self, progress: Progress, rest: list[dict], rest_hosts: Mapping[str, int] | None = None
    ) -> list[dict]: ...


def crawl_jobs(
    rt: Runtime,
    message: BatchMessage,
    jobs: list[dict],
    context: CrawlContext,
    leases: Leases,
    stop: StopWatch,
    dispatch: DispatchLease | None = None,
    flush: PartFlush | None = None,
    released: Callable[[frozenset[str]], None] | None = None,
    part: Adopting | None = None,
) -> Progress:
    """Crawl the batch's jobs, the one whose host is ready soonest first, so a batch over many
    hosts keeps its thread busy instead of waiting for one host's delay. A host that will not
    be ready soon (held by another process, blocked, paced slower) puts its jobs aside; they
    go back to wait for it when the others are done, after asking once more for the hosts
    another process held (`_ask_again`). With `flush`, the pages found so far reach the run
    while the batch goes on: the progress returned is the last part's. A host the process no
    longer needs is given back as soon as its last job here is done (`HostUse`), and
    `released` is told, to wake whoever waits for it. Several jobs run at once when the
    driver allows it (`crawl_lanes`). With `part` (the batch's current part, which jobs can
    join), a batch whose jobs all wait for their hosts takes over jobs of hosts that are free
    from batches of its run that have not begun (`take_over`)."""
    media = rt.media(message.media_name)
    target_fields = ("target", *rt.target_fields(message.collection))
    urls = {id(doc): job_url(doc, derive_target(doc, target_fields), media) for doc in jobs}
    hosts = {key: _host_of(rt, url) for key, url in urls.items()}
    # The store's driver (`crawling.checked_media` refused a message naming another).
    driver = registry.create(str((media or {}).get("driver_class")))
    alone = message.need_login or message.need_selenium  # one account, one browser session
    taker = None
    if part is not None and not alone and rt.settings.crawl_take_over:

        def locate(doc: dict) -> tuple[str, str]:
            url = job_url(doc, derive_target(doc, target_fields), media)
            return url, _host_of(rt, url)

        taker = TakeOver(rt, part, stop, locate)
    batch = _Batch(
        rt, message, context, leases, stop, dispatch, flush, driver,
        urls, hosts, target_fields, HostUse(rt.pacer, hosts, released),
        1 if alone or not jobs_at_once(driver) else rt.settings.crawl_lanes, taker,
    )  # fmt: skip
    try:
        return _crawl_each(batch, jobs)
    finally:
        batch.use.close()


@dataclass
class _Batch:
    """What the loop over a batch's jobs works with."""

    rt: Runtime
    message: BatchMessage
    context: CrawlContext
    leases: Leases
    stop: StopWatch
    dispatch: DispatchLease | None
    flush: PartFlush | None
    driver: Any
    urls: dict[int, str]  # by id(job)
    hosts: dict[int, str]  # by id(job): its pacing key
    target_fields: tuple[str, ...]
    use: HostUse
    width: int  # jobs crawled at once (`crawl_lanes`)
    taker: TakeOver | None  # takes over jobs of batches that have not begun


def _crawl_each(b: _Batch, jobs: list[dict]) -> Progress:
    lanes = Lanes(b.width)
    loop = _Loop(b, jobs, lanes)
    try:
        return loop.run()
    finally:
        lanes.close()
        loop.close()


class _Loop:
    """The loop over a batch's jobs: it picks the next job, hands its driver call to a lane
    (`crawl_lanes`) and records each result as it comes back, in this one thread."""

    def __init__(self, b: _Batch, jobs: list[dict], lanes: Lanes) -> None:
        self.b, self.lanes = b, lanes
        self.progress = Progress()
        self.pending = list(jobs)
        self.aside: list[dict] = []  # jobs of hosts not ready within the thread's patience
        self.not_ready: dict[str, HostNotReady] = {}
        self.asked_again = False
        self.stopped = False
        self.hand_over = False  # a hand-over is due (`_hand_over` says when it runs)
        self.interrupted: list[dict] = []  # jobs in flight when the batch was interrupted
        # Crawled jobs whose host stays until the next hand-over brings the pages they found
        # of it (`PartFlush.keepable`): done with it only then.
        self.unsettled: list[dict] = []
        # A hand-over of a batch that keeps pages runs in a thread of its own while the crawl
        # goes on (`_hand_over`): its store writes would otherwise stop every host the batch
        # keeps for as long as they take.
        self.flushing: Future | None = None
        self._flusher: ThreadPoolExecutor | None = None
        self._settle_after: list[dict] = []  # jobs done with their hosts once it is done

    def run(self) -> Progress:
        b = self.b
        while True:
            self._collect_hand_over()
            self._start_what_may_start()
            if self.hand_over and self.flushing is None and self._beside():
                self._hand_over()
                continue
            if self.lanes.busy():
                self._finished(self.lanes.next_done())
                continue
            if self.flushing is not None:
                self._collect_hand_over(wait=True)  # it may bring pages to crawl
                continue
            if self.stopped:
                gone = [d["_id"] for d in self.pending + self.aside]
                return dataclasses.replace(self.progress, stopped=gone)
            if self.progress.interruption:
                left = self.interrupted + self.pending + self.aside
                self.progress.unfinished = [d["_id"] for d in left]
                return self.progress
            if self.hand_over:
                self._hand_over()
            elif not self.pending and not self.asked_again:
                self.asked_again = True
                self.pending = ask_again(self.aside, self.not_ready, b.hosts)
                b.use.again(self.pending)
            elif not self.pending:
                break
        if self.aside:
            wait_for_hosts(self.progress, self.aside, self.not_ready)
        return self.progress

    def close(self) -> None:
        """Wait for a hand-over still running (a batch's records never outlive it)."""
        if self._flusher is not None:
            self._flusher.shutdown(wait=True)

    def _beside(self) -> bool:
        """Whether the hand-over due runs beside the crawl (the batch keeps pages)."""
        return self.b.flush is not None and self.b.flush.keeping

    def _start_what_may_start(self) -> None:
        b = self.b
        while self.lanes.free() and not (
            self.stopped or (self.hand_over and not self._beside()) or self.progress.interruption
        ):
            if b.stop.stopped():
                self.stopped = True
                return
            # Its own jobs all wait for their hosts (or its last ones are in flight): rather
            # than wait, take over jobs of free hosts. A batch with nothing left ends instead,
            # and its thread takes a whole batch off the queue.
            waiting = self.pending or self.lanes.busy()
            taking = b.taker is not None and self.flushing is None  # (the part is changing)
            if taking and waiting and not ready_soon(b.rt, self.pending, b.hosts):
                self._take_over()
            if not self.pending:
                return
            doc = next_job(b.rt, self.pending, b.hosts, self.lanes.busy_hosts)
            if doc is None:
                return  # every host left is busy here: wait for a lane
            url = b.urls[id(doc)]
            after = _robots_first(
                b.context, url, doc, self.pending, self.aside, self.not_ready, b.hosts
            )
            if after is not None:
                self.pending = after
                b.use.done(self.aside)
                continue
            _seed(self.progress, doc, url)
            job = _job(doc, url, b.message, b.target_fields)
            context = b.context if self.lanes.width == 1 else b.context.fork(job)
            started = Finished(doc, b.rt.now(), context)
            crawl = functools.partial(_crawl_one, b, job, context)  # bound now: run later
            self.lanes.start(started, b.hosts[id(doc)], crawl)

    def _take_over(self) -> None:
        """Fill the free lanes with jobs of idle hosts taken over from the run's batches that
        have not begun: none of a host the batch crawls or waits for already."""
        b = self.b
        mine = {b.hosts[id(d)] for d in self.pending + self.aside}
        self._adopt(b.taker.take(self.lanes.room(), mine | set(self.lanes.busy_hosts)))

    def _finished(self, done: Finished) -> None:
        b, progress, doc = self.b, self.progress, done.doc
        if progress.interruption:
            # Whatever a job in flight did, the batch can no longer record it as it should (its
            # dispatch or a lease is gone): it goes back with the rest.
            self.interrupted.append(doc)
            return
        if isinstance(done.error, HostNotReady):
            # Not the page's failure, nor the machinery's: its host is not ready yet. Its jobs
            # wait for it; the others of the batch go on.
            self.pending = set_aside(
                done.error, doc, self.pending, self.aside, self.not_ready, b.hosts
            )
            b.use.done(self.aside)
            return
        if done.error is not None:  # one job's failure is that job's, never the batch's
            progress.interruption = _lost_resource(b.rt, done.error, b.leases, done.context)
            if progress.interruption is None:
                failed(b.rt, progress, doc, done.error, done.started_at)
                self._done_with_host(doc)
                return
        if progress.interruption is None and b.dispatch is not None and b.dispatch.lost:
            # The driver swallowed the loss: what it did for this job cannot be recorded.
            progress.interruption = f"dispatch {b.message.dispatch_id} was reclaimed"
        if progress.interruption:
            self.interrupted.append(doc)
            return
        succeeded(b.rt, progress, doc, done.context, done.started_at)
        rest, hosts = self._rest()
        if b.flush is not None and b.hosts[id(doc)] in {
            host for _, _, host in b.flush.keepable(progress, hosts)
        }:
            self.unsettled.append(doc)  # its host stays: the part found pages of it to keep
        else:
            self._done_with_host(doc)
        if b.flush is not None and b.flush.due(progress, rest, hosts):
            self.hand_over = True

    def _rest(self, in_flight: bool = False) -> tuple[list[dict], Counter]:
        """The jobs left to crawl (with those in flight), and how many of them each host has."""
        rest = self.pending + self.aside + (self.lanes.in_flight() if in_flight else [])
        return rest, Counter(self.b.hosts[id(d)] for d in rest)

    def _done_with_host(self, doc: dict) -> None:
        """`doc` will not ask for its host again. When it was this process's last job for a
        host it holds and paces (`ClusterHostPacer.worth_keeping`), the host's pages queued in
        batches that have not begun are brought into this one first (`TakeOver.take_host`):
        the host stays here, its next page in hand when its next start is due, instead of
        going back and being taken by another process for about every page."""
        b = self.b
        host = b.hosts[id(doc)]
        taking = b.taker is not None and self.flushing is None  # (the part is changing)
        if taking and host and b.rt.pacer.worth_keeping(host):
            self._adopt(b.taker.take_host(host, KEEP_HOST_PAGES))
        b.use.done([doc])

    def _adopt(self, taken: list[tuple[dict, str, str]]) -> None:
        """Jobs taken over from batches that have not begun, or kept by a hand-over, join the
        pending ones (each with its URL and host key)."""
        b = self.b
        for doc, url, host in taken:
            b.urls[id(doc)], b.hosts[id(doc)] = url, host
        b.use.again(doc for doc, _, _ in taken)
        self.pending += [doc for doc, _, _ in taken]

    def _hand_over(self) -> None:
        """Hand the crawled part over (`PartFlush`). A batch that keeps pages hands it over in
        a thread of its own while its lanes go on: the jobs in flight move to the next part
        with the rest, and what they find is the next part's. Others hand it over here, with
        no job in flight, whose outcome would belong to neither part."""
        b = self.b
        self.hand_over = False
        rest, hosts = self._rest()
        if b.flush is None or not b.flush.due(self.progress, rest, hosts):
            return
        part, self.progress = self.progress, Progress()  # the next part's
        settled, self.unsettled = self.unsettled, []
        if not self._beside():
            self._handed_over(b.flush.flush(part, rest, hosts), settled)
            return
        if self._flusher is None:
            self._flusher = ThreadPoolExecutor(1, thread_name_prefix="crawl-hand-over")
        # (with the batch's bound log context)
        flush = functools.partial(b.flush.flush, part, *self._rest(in_flight=True))
        self.flushing = self._flusher.submit(contextvars.copy_context().run, flush)
        self._settle_after = settled

    def _collect_hand_over(self, wait: bool = False) -> None:
        """Take in a hand-over that ran beside the crawl once it is done (`wait`: wait for
        it); its error is the batch's, as if it had run here."""
        if self.flushing is None or not (wait or self.flushing.done()):
            return
        held, self.flushing = self.flushing.result(), None
        self._handed_over(held, self._settle_after)

    def _handed_over(self, held_docs: list[dict], settled: list[dict]) -> None:
        """The rest this batch still holds after a hand-over (a job no longer held is
        recorded by nobody: its dispatch was reclaimed), the pages the hand-over kept, and
        the jobs whose hosts waited for them done with their hosts."""
        b = self.b
        held = {id(d) for d in held_docs}
        self.pending = [d for d in self.pending if id(d) in held]
        self.aside = [d for d in self.aside if id(d) in held]
        if b.flush.kept:
            media = b.rt.media(b.message.media_name)
            urls = [
                job_url(doc, derive_target(doc, b.target_fields), media) for doc in b.flush.kept
            ]
            self._adopt(
                [
                    (doc, url, _host_of(b.rt, url))
                    for doc, url in zip(b.flush.kept, urls, strict=True)
                ]
            )
        for doc in settled:
            self._done_with_host(doc)


def _crawl_one(b: _Batch, job: CrawlJob, context: CrawlContext) -> None:
    """One job's driver call (in a lane): what it found is in `context`."""
    context.begin(job)
    b.leases.keep()
    if b.dispatch is not None:
        b.dispatch.progress()
    task_method(b.driver, b.message.task)(job, context)


def _robots_first(
    context: CrawlContext,
    url: str,
    doc: dict,
    pending: list[dict],
    aside: list[dict],
    not_ready: dict[str, HostNotReady],
    hosts: dict[int, str],
) -> list[dict] | None:
    """Fetch the robots.txt of a site this process meets for the first time as a step of
    its own (`PoliteHttp.robots_first`): fetched inside the page's request, the thread would
    sleep the host's delay between the two while the batch's other hosts are ready. Returns
    the jobs pending after it (`doc` last: its host's next start is a delay away), or None
    when nothing was sent and `doc` is crawled now. A URL the client refuses is left to the
    page's own request, which fails as that job's."""
    http = context.http
    if http is None or not hasattr(http, "robots_first"):
        return None
    try:
        sent = http.robots_first(url)
    except HostNotReady as e:
        return set_aside(e, doc, pending, aside, not_ready, hosts)
    except Exception:
        return None
    return [*pending, doc] if sent else None


def _job(doc: dict, url: str, message: BatchMessage, target_fields: tuple[str, ...]) -> CrawlJob:
    depth = doc.get("depth") if isinstance(doc.get("depth"), int) else 0
    return CrawlJob(
        doc["_id"], derive_target(doc, target_fields), url, message.task, message.media_name,
        message.crawl_limit, document=doc, depth=depth,
    )  # fmt: skip


def _lost_resource(rt: Runtime, e: Exception, leases: Leases, context: CrawlContext) -> str | None:
    """Why the batch cannot go on when `e` is the loss of what it runs on (its account
    refused or rate-limited, its lease or browser session lost); None when `e` is the job's own
    failure."""
    if isinstance(e, ResourceLost):
        return str(e)
    if isinstance(e, LoginRejected):
        ban_account_by_lease(rt, leases.of_pool(ACCOUNT_POOL) or "", str(e))
        return f"account rejected by the site: {e}"
    if isinstance(e, RateLimited):
        rt.inventory.cool_by_lease(leases.of_pool(ACCOUNT_POOL) or "", e.until, str(e))
        return f"account rate-limited: {e}"
    if context.browser_opened and is_session_lost(e):
        node = rt.leases.resource_of(leases.of_pool(SELENIUM_POOL) or "", rt.now())
        if node is not None:
            node_lost(rt, node["url"], f"browser session lost: {type(e).__name__}")
        return f"browser session lost: {type(e).__name__}"
    return None


def _host_of(rt: Runtime, url: str) -> str:
    try:
        return rt.pacer.key_of(url)
    except (ValueError, OSError):
        return ""  # not a URL a request could go to: its crawl will say so


def _seed(progress: Progress, doc: dict, url: str) -> None:
    """A planned job's URL (not a child's): its run knows it as seen."""
    if not doc.get("scope_run"):
        progress.seed_urls.append(url)
