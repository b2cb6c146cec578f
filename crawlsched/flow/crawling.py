"""The crawl of one batch: load what this dispatch still holds, run the driver, record, report."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from crawlsched.catalog import TASK_RESULTS
from crawlsched.drivers import registry
from crawlsched.drivers.base import CrawlContext, CrawlJob
from crawlsched.flow.admission import starve
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning.outcomes import JobUpdate, Outcome, after_failure, after_success
from crawlsched.resources.rules import SELENIUM_POOL, pool_of
from crawlsched.runtime import Runtime

log = get_logger(__name__)

CRAWL_OUTCOMES = {Outcome.SUCCEEDED, Outcome.FAILED, Outcome.EXHAUSTED}


def job_url(job: dict[str, Any], media: dict[str, Any] | None) -> str:
    if job.get("url"):
        return job["url"]
    template = (media or {}).get("url_template")
    if template:
        return template.format(handle=job["target"])
    return job["target"]


def _context(rt: Runtime, message: BatchMessage, http: httpx.Client) -> CrawlContext | None:
    """Renew every lease for the crawl ahead and fetch what it unlocks; None if one is gone."""
    now = rt.now()
    context = CrawlContext(http=http)
    for lease_id in message.lease_ids:
        if not rt.leases.renew(lease_id, rt.settings.resource_lease_s, now):
            return None
        if pool_of(lease_id) == SELENIUM_POOL:
            node = rt.db.selenium_nodes.find_one({"lease.id": lease_id}, {"url": 1})
            context.selenium_url = node and node.get("url")
        else:
            context.secret = rt.leases.secret(lease_id, now)
    return context


def _run_driver(
    rt: Runtime, message: BatchMessage, jobs: list[dict], context: CrawlContext
) -> tuple[list[JobUpdate], list[tuple[Any, dict]], int]:
    driver = registry.create(message.driver_class)
    media = rt.media(message.media_name)
    updates: list[JobUpdate] = []
    found: list[tuple[Any, dict]] = []
    discovered = 0
    for doc in jobs:
        job = CrawlJob(
            doc["_id"],
            doc["target"],
            job_url(doc, media),
            message.task,
            message.media_name,
            message.crawl_limit,
        )
        now = rt.now()
        try:
            result = driver.crawl(job, context)
        except Exception as e:  # one job's failure is that job's, never the batch's
            log.warning("job_failed", job_id=str(doc["_id"]), error=f"{type(e).__name__}: {e}")
            updates.append(
                after_failure(
                    doc["_id"],
                    doc.get("attempt_count") or 0,
                    now,
                    rt.retry_policy,
                    f"{type(e).__name__}: {e}"[:500],
                )
            )
            continue
        found.extend((doc["_id"], item) for item in result.items)
        discovered += len(result.discovered)
        updates.append(after_success(doc["_id"], doc.get("interval_s"), now))
    return updates, found, discovered


def crawl_batch(
    rt: Runtime, message: BatchMessage, report: Callable[[ReportMessage], None]
) -> dict[str, int]:
    started = time.perf_counter()
    store = rt.jobs(message.collection)
    try:
        jobs = store.load_claimed(message.dispatch_id, message.decoded_job_ids())
        if jobs:
            with httpx.Client(timeout=rt.settings.http_timeout_s) as http:
                context = _context(rt, message, http)
                if context is None:
                    log.warning("lease_lost_before_crawl", dispatch_id=message.dispatch_id)
                    starve(rt, message, report)
                    return {}
                updates, found, _ = _run_driver(rt, message, jobs, context)
            sink = TASK_RESULTS[message.task]
            model_id = rt.model_ids().get(sink.model)
            rt.results.save(message.task, model_id, found, rt.now(), rt.worker_id)
            store.record(message.dispatch_id, updates, rt.now())
    finally:
        rt.pools.release(message.lease_ids)
    # Read back rather than count here: a redelivery after a crash between recording and
    # reporting must send the same report again (the coordinator drops the duplicate).
    counts = store.outcomes_of(message.dispatch_id, CRAWL_OUTCOMES)
    if counts:
        elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        report(
            ReportMessage(
                run_id=message.run_id,
                report_key=f"{message.dispatch_id}:crawl",
                counts=counts,
                stages_ms={**message.stages_ms, "crawl": elapsed_ms},
            )
        )
    return counts
