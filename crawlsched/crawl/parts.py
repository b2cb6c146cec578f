"""A batch hands its crawled part to its run while it goes on (the frontier's `put`): the
part's outcomes recorded, the pages it found registered as the run's children, the rest moved
to the next part's dispatch id, the found pages the batch keeps claimed for that next part,
and the part reported.

In this order, so that a crash anywhere loses nothing: the part is recorded (its jobs'
dispatch id cleared), then the rest moved to the new id (the old one now holds nothing: its
report may be counted), then the kept pages claimed, then the report. A page is counted in by
its run before anyone can count it off: a part that keeps pages applies its report here
(`apply`, the coordinator's own code) before the batch crawls any of them; the queue would
give no order between that report and the report of the part that crawls them. A report that
cannot be applied here goes to the coordinator, and the kept pages go back to be planned
once it is applied.

Each part's dispatch id follows from the message's and the part's number (`part_dispatch_id`),
so a redelivered message that finds none of its jobs finds the rest its parts left behind and
puts it back to wait at once, then sends each part's report again (`recover_parts`).

`hand_over` runs beside the crawl (a batch that keeps pages) or in the loop's thread: it is
given a frozen `PartRecord` and gives back a frozen `Handed`, and shares nothing else with
the loop but the dispatch lease (`resources.DispatchLease`, behind its lock).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from crawlsched import metrics
from crawlsched.catalog import MAX_BATCH_JOBS
from crawlsched.crawl.progress import CrawledPart
from crawlsched.crawl.records import crawl_report, record_part
from crawlsched.crawl.resources import DispatchLease
from crawlsched.drivers.context import CrawlBounds
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.runtime import Runtime
from crawlsched.store.job_claims import expiry_deadline

log = get_logger(__name__)

Apply = Callable[[ReportMessage, int], object]  # apply a report here (`record_report`)


def part_dispatch_id(dispatch_id: str, part: int) -> str:
    """The dispatch id the rest of a batch moves to at its `part`th hand-over (from 1): a
    dispatch id as any (32 hex digits), and one a redelivery of the message can work out."""
    return hashlib.sha256(f"{dispatch_id}/part/{part}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class PartRecord:
    """Everything a hand-over needs, as the loop saw it when the part was due."""

    message: BatchMessage  # the part's: its dispatch id and jobs
    crawled: CrawledPart
    jobs: tuple[dict[str, Any], ...]  # the documents of every page the batch held
    bounds: CrawlBounds
    held: Mapping[str, str]  # what the batch's leases held, by pool (task history)
    rest: tuple[Any, ...]  # ids of the pages left (those in flight too, beside the crawl)
    keep: tuple[str, ...]  # child ids of the pages found that the batch keeps
    next_id: str  # the next part's dispatch id
    began: float  # monotonic: when the part began
    now: float  # monotonic: when it was handed over


@dataclass(frozen=True)
class Handed:
    """What a hand-over leaves the batch with."""

    message: BatchMessage  # the next part's: the rest still held, and the pages kept
    held: frozenset[Any]  # ids of the rest this batch still holds (the others were reclaimed)
    kept: tuple[dict[str, Any], ...]  # the found pages claimed for the next part, counted
    recorded: int


def hand_over(
    rt: Runtime,
    record: PartRecord,
    dispatch: DispatchLease,
    report: Callable[[ReportMessage], None],
    apply: Apply | None,
) -> Handed:
    message, next_id = record.message, record.next_id
    store = rt.jobs(message.collection)
    part = record_part(rt, message, record.crawled, record.bounds, record.jobs, record.held)
    dispatch.moving(next_id)
    moved = store.reassign(message.dispatch_id, next_id, list(record.rest))
    # A page not moved was reclaimed meanwhile: it is no longer this batch's to crawl.
    whole = moved == len(record.rest)
    held = set(record.rest) if whole else set(store.claimed_ids(next_id))
    dispatch.moved(next_id)
    kept: list[dict[str, Any]] = []
    room = MAX_BATCH_JOBS - len(held)
    # Kept only when every page of the part was recorded here: a page another writer ended
    # first (a copy of this message that ran beside it, an expiry sweep) is counted with that
    # writer's report, which does not count what this part found on it; its children, kept
    # and crawled here, would be counted off before the run ever counted them in.
    if record.keep and part.whole and whole and room > 0 and apply is not None:
        deadline = expiry_deadline(rt.now(), rt.settings.dispatch_lease_s)
        ids = [cid for cid in record.keep if cid not in {str(i) for i in held}][:room]
        parents = [update.job_id for update in record.crawled.updates]
        kept = store.keep_found(ids, parents, next_id, deadline)
    if part.recorded:
        done = crawl_report(message, record.began, record.now)
        if kept and apply is not None:
            kept = _counted(rt, done, next_id, kept, report, apply)
        else:
            report(done)
    log.info(
        "batch_part_handed_over",
        dispatch_id=message.dispatch_id,
        new_dispatch_id=next_id,
        recorded=part.recorded,
        found=len(record.crawled.found),
        rest=len(held),
        kept=len(kept),
    )
    if kept:
        metrics.pages_kept(message.task, message.media_name, len(kept))
    pairs = zip(message.job_ids, message.decoded_job_ids(), strict=True)
    # The stages before the crawl (planning, admission) were counted with this report; the
    # next part's counts only its own crawl time.
    following = message.model_copy(
        update={
            "dispatch_id": next_id,
            "job_ids": [text for text, job_id in pairs if job_id in held]
            + [encode_id(doc["_id"]) for doc in kept],
            "stages_ms": {},
        }
    )
    return Handed(following, frozenset(held), tuple(kept), part.recorded)


def _counted(
    rt: Runtime,
    done: ReportMessage,
    next_id: str,
    kept: list[dict[str, Any]],
    report: Callable[[ReportMessage], None],
    apply: Apply,
) -> list[dict[str, Any]]:
    """Apply the part's report here, so that its run counts the kept pages before any of them
    is crawled. Returns the kept pages the batch may crawl: when the report could not be
    applied here, it goes to the coordinator, and the pages their run does not count yet go
    back to be planned once it does."""
    try:
        apply(done, len(kept))
        return kept
    except Exception as e:
        log.warning(
            "part_report_sent_instead",
            dispatch_id=done.dispatch_id,
            error=f"{type(e).__name__}: {e}"[:300],
        )
    report(done)
    store = rt.jobs(done.collection)
    held = set(store.give_back_unreleased(next_id, [doc["_id"] for doc in kept]))
    return [doc for doc in kept if doc["_id"] in held]
