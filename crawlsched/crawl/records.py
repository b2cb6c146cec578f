"""What a crawled part of a batch writes, in this order: results upserted by natural key
(counted new, changed, unchanged per job), discovered URLs registered as the run's children,
then the jobs' outcomes and their task history. A page is never recorded done before the pages
it found are registered, and a redelivery after a crash anywhere here finds the same children
again.

A batch records its crawl in parts (`crawl/parts.py`): each hand-over, and its end.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crawlsched import metrics
from crawlsched.crawl.progress import CrawledPart
from crawlsched.drivers.context import CrawlBounds
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning.recrawl import after_crawl
from crawlsched.planning.run_names import schedule_id_of
from crawlsched.resources.rules import ACCOUNT_POOL, PROXY_POOL, SELENIUM_POOL
from crawlsched.runtime import Runtime
from crawlsched.store.children import Registered


@dataclass(frozen=True)
class RecordedPart:
    """What one record of a part wrote: how many outcomes took, counted by outcome, and
    whether every one of them took (none was recorded first by an expiry sweep)."""

    recorded: int = 0
    outcomes: Mapping[str, int] = field(default_factory=dict)
    whole: bool = False


def record_part(
    rt: Runtime,
    message: BatchMessage,
    part: CrawledPart,
    bounds: CrawlBounds,
    jobs: tuple[dict[str, Any], ...],
    held: Mapping[str, str],
) -> RecordedPart:
    """Keep the part's results and children, then record its jobs' outcomes under the
    message's dispatch, count them and write their task history (`held`: what the batch's
    leases held, by pool).

    A job's outcome is written once per dispatch (the write clears its dispatch id). A copy of
    this batch's message that ran beside it (sent again after a lost publisher confirm)
    records nothing here, so it counts and logs nothing either."""
    store = rt.jobs(message.collection)
    updates, markers = keep_results(rt, message, part, bounds, jobs)
    recorded = store.record(message.dispatch_id, updates, rt.now(), also=markers)
    if not recorded:
        return RecordedPart()
    outcomes = Counter(update.outcome for update in updates)
    if recorded < len(updates):
        # Some jobs were recorded by another writer first (an expiry sweep that reclaimed
        # them, which counted them): count only what took here.
        outcomes = Counter(store.outcomes_of(message.dispatch_id, outcomes))
    metrics.jobs_finished(message.task, message.media_name, outcomes)
    record_history(rt, message, part.executions, held)
    return RecordedPart(recorded, dict(outcomes), recorded == len(updates))


def record_history(
    rt: Runtime,
    message: BatchMessage,
    executions: tuple[dict[str, Any], ...],
    held: Mapping[str, str],
) -> None:
    """All the part's task history rows in one insert. Who served the batch is what its
    leases held when they were last renewed."""
    if not executions:
        return
    common = {
        "run_id": message.run_id,
        "schedule_id": schedule_id_of(message.run_id),
        "dispatch_id": message.dispatch_id,
        "collection": message.collection,
        "task": message.task,
        "media_name": message.media_name,
        "account": held.get(ACCOUNT_POOL),
        "node": held.get(SELENIUM_POOL),
        "proxy": held.get(PROXY_POOL),
        "worker": rt.worker_id,
    }
    rt.history.add([{**common, **row} for row in executions])


def bounds_of(rt: Runtime, media: Mapping[str, Any]) -> CrawlBounds:
    """The media's discovery bounds, the settings' where it sets none."""
    depth, pages = media.get("max_depth"), media.get("max_pages")
    return CrawlBounds(
        max_depth=rt.settings.crawl_max_depth if depth is None else int(depth),
        max_pages=rt.settings.crawl_max_pages if pages is None else int(pages),
        follow_offsite=media.get("follow_offsite") is True,
        extra_hosts=tuple(media.get("extra_hosts") or ()),
    )


def keep_results(
    rt: Runtime,
    message: BatchMessage,
    part: CrawledPart,
    bounds: CrawlBounds,
    jobs: tuple[dict[str, Any], ...],
) -> tuple[list, list]:
    """Store results and register children; the job updates, with their counts and their
    next interval (adapted to what the counts say), to record, and the seed markers to write
    with them (when nothing was found: else `register` wrote them, before the outcomes as
    children must be)."""
    now = rt.now()
    tags = {
        "media_name": message.media_name,
        "run_id": message.run_id,
        "task": message.task,
        "crawled_by": rt.worker_id,
    }
    items = rt.results.save(list(part.items), rt.model_ids(), tags, now) if part.items else {}
    media = rt.media(message.media_name) or {}
    children = rt.children(message.collection)
    seeds = [(message.task, url) for url in part.seed_urls]
    markers = []
    if part.found:
        registered = children.register(
            message.run_id, message.dispatch_id, media, list(part.found), bounds.max_pages,
            now, seeds=seeds,
        )  # fmt: skip
        metrics.pages_discovered(sum(registered.new.values()))
    else:
        registered = Registered({}, {})
        markers = children.marker_ops(message.run_id, seeds, now)
    policy = rt.recrawl_policy(media)
    docs = {doc["_id"]: doc for doc in jobs}
    updates = []
    for update in part.updates:
        cut = Counter(part.cut.get(update.job_id) or {})
        if pages := registered.cut_pages.get(update.job_id):
            cut["pages"] += pages
        counts = items.get(update.job_id) or {}
        counted = dataclasses.replace(update, items=dict(counts), cut=dict(cut))
        updates.append(after_crawl(counted, docs.get(update.job_id) or {}, policy, now))
    return updates, markers


def crawl_report(message: BatchMessage, began: float, now: float) -> ReportMessage:
    """The report of a crawled dispatch (or part of one), `began` and `now` on the monotonic
    clock: the stages before the crawl as the message carries them, and the crawl's own."""
    elapsed_ms = round(max(now - began, 0.0) * 1000, 1)
    return ReportMessage(
        run_id=message.run_id,
        dispatch_id=message.dispatch_id,
        collection=message.collection,
        phase="crawl",
        stages_ms={**message.stages_ms, "crawl": elapsed_ms},
    )
