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

In this order, so that a crash anywhere loses nothing: the part is recorded (its jobs'
dispatch id cleared), then the rest moved to the new id (the old one now holds nothing: its
report may be counted), then the report sent. A redelivered message of the old id finds none
of its jobs and sends that report again; the rest, held by the new id and nobody crawling it,
expires with its lease and goes back to its run for another try, as any lost batch does.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from crawlsched.drivers.context import CrawlBounds
from crawlsched.flow.crawl_progress import Progress
from crawlsched.flow.crawl_records import crawl_report, record_part
from crawlsched.flow.crawl_resources import DispatchLease, Leases
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.runtime import Runtime

log = get_logger(__name__)

# A hand-over costs about what a batch's end does (a record, a move, a report and the run's
# children pass: some eight store commands): a part is at least this many pages, so that is at
# most one command a page. Pages paced by their hosts' delays (a second each) would otherwise
# go out one by one, ten commands each, and gain nothing: their children wait for the same
# host anyway.
MIN_PART_PAGES = 8


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
        self.part_began = time.perf_counter()

    def due(self, progress: Progress, rest: list[dict[str, Any]]) -> bool:
        """Found pages, pages left to crawl, and the part is old and big enough."""
        return (
            self.every_s > 0
            and bool(progress.found)
            and bool(rest)
            and len(progress.updates) >= MIN_PART_PAGES
            and time.perf_counter() - self.part_began >= self.every_s
        )

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
        new_id = uuid.uuid4().hex
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
