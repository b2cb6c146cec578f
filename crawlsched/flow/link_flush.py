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
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crawlsched.catalog import MAX_BATCH_JOBS
from crawlsched.drivers.context import CrawlBounds
from crawlsched.flow.admission import requeue
from crawlsched.flow.crawl_progress import Progress
from crawlsched.flow.crawl_records import crawl_report, record_part
from crawlsched.flow.crawl_resources import DispatchLease, Leases
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning.outcomes import PHASE_OUTCOMES
from crawlsched.runtime import Runtime

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
    ) -> None:
        self.rt = rt
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

    def due(self, progress: Progress, rest: list[dict[str, Any]]) -> bool:
        """Found pages, pages left to crawl, the part old and big enough, and the run short
        of work (or the part kept back `PART_WAIT_PERIODS` already)."""
        now = time.perf_counter()
        age = now - self.part_began
        if not (
            self.every_s > 0
            and bool(progress.found)
            and bool(rest)
            and len(progress.updates) >= MIN_PART_PAGES
            and age >= self.every_s
        ):
            return False
        if age >= self.every_s * PART_WAIT_PERIODS:
            return True
        if now - self._looked_at >= self.every_s:
            self._looked_at = now
            self._short_of_work = not self._work_queued(now)
        return self._short_of_work

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

    def flush(self, progress: Progress, rest: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Record and report the crawled part; the rest of `rest` this batch still holds, now
        under a new dispatch id (none when the dispatch was reclaimed meanwhile)."""
        rt, message = self.rt, self.message
        store = rt.jobs(message.collection)
        part = record_part(rt, message, progress, self.bounds, self.jobs, self.leases)
        new_id = part_dispatch_id(self.root, self.flushed + 1)
        rest_ids = [doc["_id"] for doc in rest]
        moved = store.reassign(message.dispatch_id, new_id, rest_ids)
        kept = set(rest_ids) if moved == len(rest_ids) else set(store.claimed_ids(new_id))
        if part.recorded:
            self.report(crawl_report(message, self.part_began))
        log.info(
            "batch_part_handed_over",
            dispatch_id=message.dispatch_id,
            new_dispatch_id=new_id,
            recorded=part.recorded,
            found=len(progress.found),
            rest=len(kept),
        )
        pairs = zip(message.job_ids, message.decoded_job_ids(), strict=True)
        # The stages before the crawl (planning, admission) were counted with this report;
        # the next part's counts only its own crawl time.
        self.message = message.model_copy(
            update={
                "dispatch_id": new_id,
                "job_ids": [text for text, job_id in pairs if job_id in kept],
                "stages_ms": {},
            }
        )
        self.dispatch.dispatch_id = new_id
        self.flushed += 1
        self.part_began = time.perf_counter()
        return [doc for doc in rest if doc["_id"] in kept]


@dataclass(frozen=True)
class PartsRecovered:
    requeued: int  # jobs of the rest put back to wait
    reports: int  # parts' reports sent again


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
    requeued, ended = 0, []
    labels = PHASE_OUTCOMES["crawl"]
    for first in range(1, MAX_PARTS + 1, PARTS_LOOKED_UP_AT_ONCE):
        last = min(first + PARTS_LOOKED_UP_AT_ONCE, MAX_PARTS + 1)
        ids = [part_dispatch_id(message.dispatch_id, part) for part in range(first, last)]
        left = store.left_under(ids, message.run_id, labels)
        ended += [dispatch_id for dispatch_id in ids if dispatch_id in left.ended]
        for dispatch_id, job_ids in left.running.items():
            rest = message.model_copy(
                update={
                    "dispatch_id": dispatch_id,
                    "job_ids": [encode_id(job_id) for job_id in job_ids],
                    "lease_ids": [],
                    "stages_ms": {},  # (counted with the message's first part)
                }
            )
            reason = f"its worker died after handing a part over (message {message.dispatch_id})"
            if requeue(rt, rest, job_ids, reason) is not None:
                requeued += len(job_ids)
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
    return PartsRecovered(requeued, len(ended))
