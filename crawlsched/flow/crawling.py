"""The crawl of one batch: load what this dispatch still holds, run the driver, record, report.

A batch that needs a Selenium node runs in one browser session on the leased node, opened for
the whole batch and quit at the end. Leases are renewed while the batch runs. When the batch
loses what it runs on — a lease revoked or expired, the node's session gone, the account
rejected or rate-limited by the site — the jobs it has not crawled are not failed: they go back
to wait for another resource (`admission.requeue`), and the resource is marked accordingly.

After the loop the crawled part is recorded (`crawl_records.record_part`: results, then
children, then outcomes), and the dispatch reported. A batch that finds pages also hands them
to its run while it goes on (`link_flush.LinkFlush`), each handed part recorded and reported
under a dispatch id of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from crawlsched.catalog import kind_of_collection
from crawlsched.drivers.base import Account
from crawlsched.drivers.context import CrawlBounds, CrawlContext
from crawlsched.flow.admission import keys_of, requeue
from crawlsched.flow.crawl_loop import crawl_jobs
from crawlsched.flow.crawl_progress import Progress
from crawlsched.flow.crawl_records import bounds_of, crawl_report, record_part
from crawlsched.flow.crawl_resources import DispatchLease, Leases, ResourceLost, batch_browser
from crawlsched.flow.link_flush import LinkFlush, recover_parts
from crawlsched.flow.pausing import hold_batch
from crawlsched.flow.stop_watch import StopWatch
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.messages import BadMessage, BatchMessage, ReportMessage
from crawlsched.planning.outcomes import PHASE_OUTCOMES, STOPPED
from crawlsched.resources.queueing import host_wait_key
from crawlsched.resources.rules import ACCOUNT_POOL
from crawlsched.runtime import Runtime

log = get_logger(__name__)


def _context(
    rt: Runtime, message: BatchMessage, leases: Leases, dispatch: DispatchLease
) -> CrawlContext:
    media = rt.media(message.media_name) or {}
    account = None
    if account_lease := leases.of_pool(ACCOUNT_POOL):
        found = rt.leases.credentials(account_lease, rt.now())
        account = Account(*found) if found else None
    secret_hosts = tuple(media.get("secret_hosts") or ())
    model_ids = rt.model_ids()
    tasks = set(kind_of_collection(message.collection).tasks) & set(
        rt.media_tasks(message.media_name)
    )
    return CrawlContext(
        open_http=lambda: rt.polite_http(
            account, secret_hosts, on_request=dispatch.progress, politeness=media.get("politeness")
        ),
        account=account,
        secret_hosts=secret_hosts,
        allowed_networks=rt.allowed_networks,
        crawl_limit=message.crawl_limit,
        bounds=bounds_of(rt, media),
        tasks=tasks,
        is_new=lambda model, key: not rt.results.exists(model, model_ids.get(model), key),
    )


def disagreement(
    message: BatchMessage,
    media: dict[str, Any] | None,
    jobs: list[dict],
    task_row: dict[str, Any] | None = None,
) -> str | None:
    """Why the batch's message disagrees with the store (its media row, its task row and its
    jobs), or None.

    The crawl runs the store's driver for the store's media: a message that names another
    driver, another media id, or jobs of another media is refused, so whoever can publish a
    crawl message cannot pick the code that runs or the media a job is crawled as. Nor can it
    say a task needs no account or no browser when the store says it does (it would be
    admitted without the lease the gatekeeper grants), or raise the task's crawl limit."""
    if media is None:
        return f"no media named {message.media_name!r} in the store"
    if task_row is None:
        return f"media {message.media_name!r} has no task {message.task[:40]!r} in the store"
    needs = (bool(task_row.get("need_login")), bool(task_row.get("need_selenium")))
    if needs != (message.need_login, message.need_selenium):
        return (
            f"task {message.task!r} of {message.media_name!r} needs login={needs[0]}, "
            f"selenium={needs[1]} in the store, not login={message.need_login}, "
            f"selenium={message.need_selenium}"
        )
    if message.crawl_limit > int(task_row.get("crawl_limit") or 0):
        return (
            f"crawl limit {message.crawl_limit} is over the store's "
            f"{task_row.get('crawl_limit')} for task {message.task!r} of {message.media_name!r}"
        )
    if media.get("media_name_id", media.get("_id")) != message.media_id:
        return f"media {message.media_name!r} has another id in the store"
    if media.get("driver_class") != message.driver_class:
        return (
            f"media {message.media_name!r} is crawled by {media.get('driver_class')!r} in the "
            f"store, not {message.driver_class[:40]!r}"
        )
    others = sum(1 for doc in jobs if doc.get("media_name") != message.media_name)
    if others:
        return f"{others} of the batch's jobs belong to another media than {message.media_name!r}"
    return None


def checked_media(rt: Runtime, message: BatchMessage, jobs: list[dict]) -> dict[str, Any]:
    """The batch's media row, read from the store; BadMessage (dead-lettered: the jobs come
    back through dispatch expiry) when the message disagrees with it."""
    media = rt.media(message.media_name)
    reason = disagreement(message, media, jobs, rt.media_task(message.media_name, message.task))
    if reason is not None:
        media = rt.media(message.media_name, fresh=True)  # the cached rows may be stale
        task_row = rt.media_task(message.media_name, message.task)
        reason = disagreement(message, media, jobs, task_row)
    if reason is not None or media is None:
        raise BadMessage(f"batch {message.dispatch_id} refused: {reason}")
    return media


def _run(
    rt: Runtime,
    message: BatchMessage,
    jobs: list[dict],
    leases: Leases,
    stop: StopWatch,
    report: Callable[[ReportMessage], None],
    wake: Callable[[frozenset[str]], None],
    apply_report: Callable[[ReportMessage, int], object] | None = None,
) -> tuple[Progress, CrawlContext | None, LinkFlush]:
    """The batch's crawl; its last part's progress, and the flush that knows that part's
    message (its dispatch id, once parts were handed over). A host given back mid-batch wakes
    the batches waiting for it at once."""
    deadlines = [doc["lease_deadline"] for doc in jobs if doc.get("lease_deadline")]
    dispatch = DispatchLease(
        rt, message.collection, message.dispatch_id, min(deadlines) if deadlines else None
    )
    every_s = rt.settings.discovery_flush_s
    flush = LinkFlush(rt, message, jobs, leases, dispatch, report, every_s, apply_report, stop)
    try:
        leases.keep()
        context = _context(rt, message, leases, dispatch)
        flush.bounds = context.bounds
        with batch_browser(rt, leases, context):
            progress = crawl_jobs(
                rt, message, jobs, context, leases, stop, dispatch, flush,
                released=lambda hosts: wake(frozenset(host_wait_key(h) for h in hosts)),
                part=flush,
            )  # fmt: skip
            return progress, context, flush
    except ResourceLost as e:
        held = set(flush.message.decoded_job_ids())
        unfinished = [doc["_id"] for doc in jobs if doc["_id"] in held]
        return Progress(unfinished=unfinished, interruption=str(e)), None, flush


def _wait_for_host(
    rt: Runtime,
    message: BatchMessage,
    progress: Progress,
    wake_at: Callable[[frozenset[str], datetime], None],
) -> set[str]:
    """Put the rest of an interrupted batch back to wait; for hosts not ready, named by their
    keys (woken when one is given back) and not before the first is ready (blocked, paced).
    A wake-up is also asked for the moment one host is sure to be free (a holder's slice end,
    a block's end), so a batch never waits for a holder that died or for the clock. Returns the
    keys to wake at once: hosts given back before the batch parked (their release woke
    nobody)."""
    needs = frozenset(host_wait_key(host) for host in progress.host_waits)
    requeue(
        rt,
        message,
        progress.unfinished,
        progress.interruption or "",
        not_before=progress.not_before,
        also_needs=needs,
    )
    if not needs:
        return set()
    now = rt.now()
    when = progress.not_before
    if when is None:
        # Read, not taken from the refusal: a holder that gave the host back since woke nobody.
        holder = rt.pacer.holder
        ends = [rt.hosts.wait_for(host, holder, now) or now for host in progress.host_waits]
        when = min(ends)
    if when <= now:
        return set(needs)
    wake_at(needs, when)
    return set()


def _own_jobs(
    rt: Runtime,
    message: BatchMessage,
    first_delivery: bool,
    report: Callable[[ReportMessage], None],
) -> tuple[list[dict[str, Any]], frozenset[str]]:
    """The message's jobs, its own from now on: a running batch of the run may have taken some
    over before (`take_over`); those are not loaded. (A batch that needs an account or a node
    is never taken from: its jobs are its leases'.) A redelivery that finds none looks for
    what its parts left behind: their rest, and their reports (`link_flush.recover_parts`);
    with the keys to wake for that rest."""
    store = rt.jobs(message.collection)
    if message.need_login or message.need_selenium:
        jobs = store.load_claimed(message.dispatch_id, message.decoded_job_ids())
    else:
        jobs = store.load_and_begin(message.dispatch_id, message.decoded_job_ids())
    if not jobs and not first_delivery:
        return jobs, recover_parts(rt, message, report).wake
    return jobs, frozenset()


def crawl_batch(
    rt: Runtime,
    message: BatchMessage,
    report: Callable[[ReportMessage], None],
    wake: Callable[[frozenset[str]], None] = lambda keys: None,
    wake_at: Callable[[frozenset[str], datetime], None] = lambda keys, when: None,
    first_delivery: bool = True,
    apply_report: Callable[[ReportMessage, int], object] | None = None,
) -> dict[str, int]:
    """Crawl a batch message's jobs, record and report them. `first_delivery`: neither
    redelivered by RabbitMQ nor retried; a message that was, and finds none of its jobs,
    looks for what its parts left behind (`link_flush.recover_parts`). `apply_report` applies
    a report here (`coordination.record_report`): with it, a batch crawls the pages it found
    of hosts its process holds itself (`link_flush.LinkFlush.keepable`)."""
    started = time.perf_counter()
    store = rt.jobs(message.collection)
    written: dict[str, int] = {}  # outcomes this delivery wrote, when it wrote all it crawled
    host_waits: set[str] = set()  # keys to wake: what a rest put back to wait waits for
    try:
        jobs, host_waits = _own_jobs(rt, message, first_delivery, report)
        host_waits = set(host_waits)
        if len(jobs) > len(message.job_ids):
            # It took jobs over before its worker died: they are its own, listed from now on.
            message = message.model_copy(update={"job_ids": [encode_id(d["_id"]) for d in jobs]})
        stop = StopWatch(rt, message.run_id, message.task)
        if jobs and stop.stopped():
            # Stopped before it started: nothing is crawled, the leases go back below.
            store.release(message.dispatch_id, STOPPED)
            log.info("batch_stopped", dispatch_id=message.dispatch_id, jobs=len(jobs))
        elif jobs and stop.paused():
            # Paused before it started: the jobs wait in their run, nothing ended, no report.
            hold_batch(rt, message)
        elif jobs:
            checked_media(rt, message, jobs)
            leases = Leases(rt, message.lease_ids)
            progress, context, flush = _run(
                rt, message, jobs, leases, stop, report, wake, apply_report
            )
            # Parts handed over meanwhile were reported: what follows is the last part's.
            message = flush.message
            if flush.flushed:
                started = flush.part_began
            bounds = context.bounds if context else CrawlBounds()
            part = record_part(rt, message, progress, bounds, jobs, leases)
            if part.whole and not progress.stopped:
                written = dict(part.outcomes)
            if progress.stopped:
                store.release(message.dispatch_id, STOPPED, progress.stopped)
                stopped = len(progress.stopped)
                log.info("batch_stopped", dispatch_id=message.dispatch_id, jobs=stopped)
            if progress.interruption:
                host_waits |= _wait_for_host(rt, message, progress, wake_at)
    finally:
        # The hosts this batch held and nobody else here uses go to whoever waits for them;
        # the batches waiting for a host given back here are woken.
        released = {host_wait_key(host) for host in rt.pacer.give_back()}
        if released | host_waits:
            wake(frozenset(released | host_waits))
        if message.lease_ids:
            rt.pools.release(message.lease_ids, rt.now())
            wake(keys_of(message))
    # The report carries no counts (the coordinator reads them from the jobs); what matters
    # here is whether this dispatch ended any job. When this delivery wrote every outcome it
    # knows that without a read. Otherwise read back: a redelivery after a crash between
    # recording and reporting must send the same report again (the coordinator drops the
    # duplicate), and stopped jobs were written by another command. A first delivery that found
    # none of its jobs (a running batch took them all over) wrote nothing, and no one else
    # writes a crawl's outcome under its dispatch id: nothing to read back.
    if first_delivery and not jobs:
        counts: dict[str, int] = {}
    else:
        counts = written or store.outcomes_of(message.dispatch_id, PHASE_OUTCOMES["crawl"])
    if counts:
        report(crawl_report(message, started))
    return counts
