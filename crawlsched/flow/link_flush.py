"""Hand a batch's discovered pages to its run while the batch goes on.

A batch crawls its pages one after another on one thread; what they link to becomes the run's
children when the batch records and reports. Recorded only at the batch's end, a page found by
the batch's first page would wait for all the others, and the first levels of a crawl found by
discovery (1, 4, 16 pages) would leave most threads without work. So a batch that has found
pages and has pages left hands over its crawled part every `discovery_flush_s` (and every
`MIN_PART_PAGES` pages at most often): the part is
recorded and reported under the batch's dispatch id as if the batch had ended there, and the
rest of the batch goes on under a new dispatch id, in the same thread, with the same leases,
browser session and host slices.

A part is handed over early only while the run is short of work: when its batches that have
not begun hold `QUEUED_BATCHES_ENOUGH` batches' worth of pages, every thread that frees up has
work without this part's pages, and a hand-over would only cost its store commands (a look is
one count, shared by the process's batches of the run for a period). The part then waits, up
to `PART_WAIT_PERIODS` periods.

In this order, so that a crash anywhere loses nothing: the part is recorded (its jobs'
dispatch id cleared), then the rest moved to the new id (the old one now holds nothing: its
report may be counted), then the report sent. A redelivered message of the old id finds none
of its jobs and sends that report again. The rest is held by the new id, which no message
names: each part's id follows from the message's and the part's number (`part_dispatch_id`),
so the redelivery finds the rest under it and puts it back to wait at once, as the dispatch
lease's expiry would only much later, and sends each part's report again: the worker may
have died before sending one (`recover_parts`).

A batch keeps the pages it found of hosts its process holds and paces (`keepable`): they are
the pages its host's clock waits for, and handed to the run they would be planned, batched,
queued for any thread, most often one of another process, which would ask for the host. At
the hand-over the part's found pages are registered as always, then the batch claims the kept
ones for its next part (`JobClaims.keep_found`) and applies the part's report itself (`apply`,
the coordinator's code) before it crawls any: the run counts a page in before anyone can count
it off, which the queue, giving no order between two reports, would not promise. A report that
cannot be applied here goes to the coordinator, and the kept pages go back to be planned once
it is applied; a redelivery gives back those a dead worker kept before its report was applied.
Such a batch hands over when a host it keeps has no page left in it, when it would end, or
after `PART_WAIT_PERIODS`; and its hand-overs run beside its crawl (`crawl_loop`).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from crawlsched import metrics
from crawlsched.catalog import MAX_BATCH_JOBS
from crawlsched.drivers.context import CrawlBounds
from crawlsched.flow.admission import requeue
from crawlsched.flow.crawl_loop import job_url
from crawlsched.flow.crawl_progress import Progress
from crawlsched.flow.crawl_records import crawl_report, record_part
from crawlsched.flow.crawl_resources import DispatchLease, Leases
from crawlsched.flow.stop_watch import StopWatch
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning.due import derive_target
from crawlsched.planning.outcomes import PHASE_OUTCOMES
from crawlsched.resources.queueing import host_wait_key
from crawlsched.runtime import Runtime
from crawlsched.store.children import child_id
from crawlsched.store.job_claims import expiry_deadline

log = get_logger(__name__)

# A hand-over costs about what a batch's end does (results, children, outcomes and history
# recorded, the rest moved, the report counted and the run's children pass: some fifteen store
# commands): a part is at least this many pages, so that is two commands a page at most. Pages
# paced by their hosts' delays (a second each) would otherwise go out one by one and gain
# nothing: their children wait for the same host anyway.
MIN_PART_PAGES = 8
# Work enough queued that no thread needs this part's pages: this many batches' worth of pages
# in the run's batches that have not begun (the task's batch limit each).
QUEUED_BATCHES_ENOUGH = 2
# A part kept back that long is handed over all the same: a crash crawls it again, and the
# run's counts should not lag far behind its crawl.
PART_WAIT_PERIODS = 10
# A batch hands over at most this many parts: each is `MIN_PART_PAGES` pages or more, of a
# message of `MAX_BATCH_JOBS` at most and the pages it took over in its first seconds.
MAX_PARTS = 2 * MAX_BATCH_JOBS // MIN_PART_PAGES
PARTS_LOOKED_UP_AT_ONCE = 256  # part ids in one read of a redelivery's look for its rest
# A batch keeps the pages it found of hosts its process holds (`keep`) only while younger than
# this share of `crawl_time_limit_s`: past its time limit it would be cut off mid-crawl.
KEEP_FOR_SHARE = 0.5
# ... and of each host only as many pages as its delay lets it crawl in this share of the time
# left to its time limit: what it holds is crawled well before it, and the rest go to the run.
KEEP_AHEAD_SHARE = 0.8


def part_dispatch_id(dispatch_id: str, part: int) -> str:
    """The dispatch id the rest of a batch moves to at its `part`th hand-over (from 1): a
    dispatch id as any (32 hex digits), and one a redelivery of the message can work out."""
    return hashlib.sha256(f"{dispatch_id}/part/{part}".encode()).hexdigest()[:32]


class LinkFlush:
    """The batch's current part: its message (dispatch id and jobs), and when it began."""

    def __init__(
        self,
        rt: Runtime,
        message: BatchMessage,
        jobs: list[dict[str, Any]],
        leases: Leases,
        dispatch: DispatchLease,
        report: Callable[[ReportMessage], None],
        every_s: float,
        apply: Callable[[ReportMessage, int], object] | None = None,
        stop: StopWatch | None = None,
    ) -> None:
        self.rt = rt
        self.stop = stop  # a stopped or paused run's batch keeps nothing
        self.message = message
        self.jobs = jobs
        self.leases = leases
        self.dispatch = dispatch
        self.report = report
        self.every_s = every_s
        self.bounds = CrawlBounds()
        self.flushed = 0
        self.root = message.dispatch_id  # the delivered message's: its parts' ids follow
        self.part_began = time.perf_counter()
        self._looked_at = -float("inf")  # time.perf_counter() of the last look at the queue
        self._short_of_work = True  # what it said
        # Applies a part's report here, before the pages it kept are crawled (`keep`); None:
        # the batch keeps nothing.
        self.apply = apply
        alone = message.need_login or message.need_selenium  # its jobs are its leases'
        self.keeping = apply is not None and rt.settings.crawl_keep_found and not alone
        self.time_limit_at = self.part_began + rt.settings.crawl_time_limit_s
        self.keep_until = self.part_began + KEEP_FOR_SHARE * rt.settings.crawl_time_limit_s
        self.kept: list[dict[str, Any]] = []  # what the last hand-over kept, for the batch
        # (task, URL) found -> (child id, URL, host key): worked out once per batch
        self._located: dict[tuple[str, str], tuple[str, str, str]] = {}
        self._met: set[str] = set()  # child ids found by the parts handed over

    def due(
        self,
        progress: Progress,
        rest: list[dict[str, Any]],
        rest_hosts: Mapping[str, int] | None = None,
    ) -> bool:
        """Found pages, and: none left to crawl but some this batch would keep (it goes on
        with them instead of ending); or a host the batch would keep pages of has no page
        left here (`rest_hosts`: the pages of `rest` by host) and the part is a period old;
        or pages left to crawl, the part old and big enough, and the run short of work for
        the pages found that this batch would not keep (or the part kept back
        `PART_WAIT_PERIODS` already)."""
        if not (self.every_s > 0 and progress.found):
            return False
        now = time.perf_counter()
        age = now - self.part_began
        rest_hosts = rest_hosts or {}
        keep = self.keepable(progress, rest_hosts)
        if not rest:
            return bool(keep)
        if age >= self.every_s and any(host not in rest_hosts for _, _, host in keep):
            return True  # its clock would stop until the batch's next hand-over
        if not (len(progress.updates) >= MIN_PART_PAGES and age >= self.every_s):
            return False
        if age >= self.every_s * PART_WAIT_PERIODS:
            return True
        if len(keep) == len(self._fresh(progress)):
            return False  # every page found stays here: no other thread needs them
        if now - self._looked_at >= self.every_s:
            self._looked_at = now
            self._short_of_work = not self._work_queued(now)
        return self._short_of_work

    def keepable(
        self, progress: Progress, ahead: Mapping[str, int] | None = None
    ) -> list[tuple[str, str, str]]:
        """The pages found in this part that the batch would crawl itself, as (child id, URL,
        host key): not met before by this batch, of its task, of a host its process holds and
        paces (`ClusterHostPacer.keeps`), as many of each host's pages, with the `ahead` it
        holds already (by host), as its delay lets it crawl well before its time limit
        (`KEEP_AHEAD_SHARE`), while the batch may still take pages in (its
        age, its parts, a message's size) and its run is neither stopped nor paused."""
        if not self.keeping or time.perf_counter() >= self.keep_until:
            return []
        if self.flushed + 1 >= MAX_PARTS:
            return []  # a redelivery looks for the rest under the first MAX_PARTS parts' ids
        if self.stop is not None and (self.stop.stopped() or self.stop.paused()):
            return []  # what it found waits in the run, with the run
        pacer, ahead, fresh = self.rt.pacer, ahead or {}, self._fresh(progress).values()
        time_left_s = KEEP_AHEAD_SHARE * (self.time_limit_at - time.perf_counter())
        room: dict[str, int] = {}  # pages of each host it holds that it may keep
        for host in {host for _, _, host in fresh if host}:
            if pacer.keeps(host):  # (paced: its delay is above 0)
                pages = int(time_left_s / max(pacer.delay_of(host), 1e-3))
                room[host] = pages - ahead.get(host, 0)
        kept = []
        for entry in fresh:
            if room.get(entry[2], 0) > 0:
                room[entry[2]] -= 1
                kept.append(entry)
        return kept

    def _fresh(self, progress: Progress) -> dict[str, tuple[str, str, str]]:
        """The pages found in this part that no earlier part of the batch found, by child id:
        (child id, URL, host key), the key "" for a page of another task or one that has no
        host a request could go to."""
        message, fresh = self.message, {}
        for f in progress.found:
            d = f.discovery
            located = self._located.get((d.task, d.url))
            if located is None:
                cid, host = child_id(message.run_id, d.task, d.url), ""
                if d.task == message.task:
                    with contextlib.suppress(ValueError, OSError):  # (no request can go)
                        host = self.rt.pacer.key_of(d.url)
                located = self._located[(d.task, d.url)] = (cid, d.url, host)
            if located[0] not in self._met:
                fresh.setdefault(located[0], located)
        return fresh

    def _work_queued(self, now: float) -> bool:
        """Whether the run's batches that have not begun hold work enough for the threads
        that free up meanwhile (`QUEUED_BATCHES_ENOUGH`). A look is shared for a period by
        the process's batches of the same run, task and media: the answer is about the run,
        not the batch."""
        message = self.message
        key = ("work_queued", message.run_id, message.task, message.media_name)
        shared = self.rt.view_cache.get(key)
        if shared is not None and now - shared[0] < self.every_s:
            return bool(shared[1])
        task = self.rt.media_task(message.media_name, message.task) or {}
        per_batch = task.get("batch_limit") or self.rt.settings.default_batch_limit
        store = self.rt.jobs(message.collection)
        least = QUEUED_BATCHES_ENOUGH * int(per_batch)
        queued = store.queued_at_least(message.run_id, message.task, message.media_name, least)
        self.rt.view_cache[key] = (now, queued)
        return queued

    def adopt(self, docs: list[dict[str, Any]]) -> None:
        """Jobs taken over from batches of the run that had not begun (`flow/take_over.py`)
        join this part: recorded, handed over and reported with it."""
        self.jobs.extend(docs)
        taken = [encode_id(doc["_id"]) for doc in docs]
        self.message = self.message.model_copy(update={"job_ids": [*self.message.job_ids, *taken]})

    def flush(
        self,
        progress: Progress,
        rest: list[dict[str, Any]],
        rest_hosts: Mapping[str, int] | None = None,
    ) -> list[dict[str, Any]]:
        """Record and report the crawled part; the rest of `rest` this batch still holds, now
        under a new dispatch id (none when the dispatch was reclaimed meanwhile). The pages
        the part found that the batch keeps (`keepable`, with `rest_hosts` the pages of `rest`
        by host) join the new part, in `kept`."""
        rt, message = self.rt, self.message
        store = rt.jobs(message.collection)
        keep = self.keepable(progress, rest_hosts)
        self._met.update(self._fresh(progress))  # found again later, nothing to keep
        part = record_part(rt, message, progress, self.bounds, self.jobs, self.leases)
        new_id = part_dispatch_id(self.root, self.flushed + 1)
        rest_ids = [doc["_id"] for doc in rest]
        moved = store.reassign(message.dispatch_id, new_id, rest_ids)
        kept = set(rest_ids) if moved == len(rest_ids) else set(store.claimed_ids(new_id))
        self.kept = []
        room = MAX_BATCH_JOBS - len(kept)
        if keep and part.recorded and moved == len(rest_ids) and room > 0:
            deadline = expiry_deadline(rt.now(), rt.settings.dispatch_lease_s)
            held = {str(job_id) for job_id in kept}
            ids = [cid for cid, _, _ in keep if cid not in held][:room]
            self.kept = store.keep_found(ids, message.dispatch_id, new_id, deadline)
        if part.recorded:
            report = crawl_report(message, self.part_began)
            if self.kept:
                self.kept = self._counted(report, new_id)
            else:
                self.report(report)
        log.info(
            "batch_part_handed_over",
            dispatch_id=message.dispatch_id,
            new_dispatch_id=new_id,
            recorded=part.recorded,
            found=len(progress.found),
            rest=len(kept),
            kept=len(self.kept),
        )
        if self.kept:
            metrics.pages_kept(message.task, message.media_name, len(self.kept))
        pairs = zip(message.job_ids, message.decoded_job_ids(), strict=True)
        # The stages before the crawl (planning, admission) were counted with this report;
        # the next part's counts only its own crawl time.
        self.message = message.model_copy(
            update={
                "dispatch_id": new_id,
                "job_ids": [text for text, job_id in pairs if job_id in kept]
                + [encode_id(doc["_id"]) for doc in self.kept],
                "stages_ms": {},
            }
        )
        self.jobs.extend(self.kept)
        self.dispatch.dispatch_id = new_id
        self.flushed += 1
        self.part_began = time.perf_counter()
        return [doc for doc in rest if doc["_id"] in kept]

    def _counted(self, report: ReportMessage, new_id: str) -> list[dict[str, Any]]:
        """Apply the part's report here, so that its run counts the pages the batch kept
        before any of them is crawled: applied by the coordinator, it might come after the
        report of the part that crawls them, and the run could end first. Returns the kept
        pages the batch may crawl: when the report could not be applied here, it goes to the
        coordinator, and the pages their run does not count yet go back to be planned once it
        does."""
        try:
            self.apply(report, len(self.kept))
            return self.kept
        except Exception as e:
            log.warning(
                "part_report_sent_instead",
                dispatch_id=report.dispatch_id,
                error=f"{type(e).__name__}: {e}"[:300],
            )
        self.report(report)
        store = self.rt.jobs(self.message.collection)
        held = set(store.give_back_unreleased(new_id, [doc["_id"] for doc in self.kept]))
        return [doc for doc in self.kept if doc["_id"] in held]


@dataclass(frozen=True)
class PartsRecovered:
    requeued: int  # jobs of the rest put back to wait
    reports: int  # parts' reports sent again
    # What the rest waits for (its hosts, which the dead worker may hold until its slices
    # end): the caller wakes it at once, so a host already free is crawled without a tick.
    wake: frozenset[str] = frozenset()


def recover_parts(
    rt: Runtime, message: BatchMessage, report: Callable[[ReportMessage], None]
) -> PartsRecovered:
    """A redelivered message that found none of its jobs: when its worker died after handing
    parts over, the rest is held by the last part's id, which no message names. Put it back
    to wait now (`admission.requeue`: open to take-over by the run's running batches, admitted
    by the next admission pass) instead of after the dispatch lease (15 minutes by default).
    Then send each part's report again: the worker may have died between recording a part and
    sending its report, and nothing else would ever count that part on its run (the
    coordinator ignores a report it applied before).

    A message redelivered while its first worker still crawls (a dropped connection) takes the
    rest from it as well: that worker's later records find their jobs gone and count nothing,
    as for any reclaimed batch; the pages it crawls meanwhile are crawled again."""
    store = rt.jobs(message.collection)
    requeued, ended, wake = 0, [], set()
    labels = PHASE_OUTCOMES["crawl"]
    for first in range(1, MAX_PARTS + 1, PARTS_LOOKED_UP_AT_ONCE):
        last = min(first + PARTS_LOOKED_UP_AT_ONCE, MAX_PARTS + 1)
        ids = [part_dispatch_id(message.dispatch_id, part) for part in range(first, last)]
        left = store.left_under(ids, message.run_id, labels)
        ended += [dispatch_id for dispatch_id in ids if dispatch_id in left.ended]
        for dispatch_id, running in left.running.items():
            # Pages a part kept whose finder's report was not applied (the worker died in
            # between): planned once it is, as if never kept (the report is sent below).
            job_ids = store.give_back_unreleased(dispatch_id, running)
            if not job_ids:
                continue
            rest = message.model_copy(
                update={
                    "dispatch_id": dispatch_id,
                    "job_ids": [encode_id(job_id) for job_id in job_ids],
                    "lease_ids": [],
                    "stages_ms": {},  # (counted with the message's first part)
                }
            )
            reason = f"its worker died after handing a part over (message {message.dispatch_id})"
            hosts = _hosts_of(rt, message, store.load_claimed(dispatch_id, job_ids))
            if requeue(rt, rest, job_ids, reason, also_needs=hosts) is not None:
                requeued += len(job_ids)
                wake |= hosts
    # After the rests moved: a part whose rest it still held would have its report refused.
    for dispatch_id in ended:
        part = message.model_copy(update={"dispatch_id": dispatch_id, "stages_ms": {}})
        report(crawl_report(part, time.perf_counter()))
    if requeued or ended:
        log.warning(
            "batch_parts_recovered",
            dispatch_id=message.dispatch_id,
            requeued=requeued,
            reports_sent_again=len(ended),
        )
    return PartsRecovered(requeued, len(ended), frozenset(wake))


def _hosts_of(rt: Runtime, message: BatchMessage, docs: list[dict[str, Any]]) -> frozenset[str]:
    """What jobs of `message`'s kind wait for when their hosts are not ready: their hosts'
    wait keys (`queueing.host_wait_key`)."""
    media = rt.media(message.media_name)
    fields = ("target", *rt.target_fields(message.collection))
    keys = set()
    for doc in docs:
        with contextlib.suppress(ValueError, OSError):
            host = rt.pacer.key_of(job_url(doc, derive_target(doc, fields), media))
            keys.add(host_wait_key(host))
    return frozenset(keys)
