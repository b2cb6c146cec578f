"""The crawl of one batch: load what this dispatch still holds, run the driver, record, report.

A batch that needs a Selenium node runs in one browser session on the leased node, opened for
the whole batch and quit at the end. Leases are renewed while the batch runs. When the batch
loses what it runs on — a lease revoked or expired, the node's session gone, the account
rejected or rate-limited by the site — the jobs it has not crawled are not failed: they go back
to wait for another resource (`admission.requeue`), and the resource is marked accordingly.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from crawlsched import metrics
from crawlsched.catalog import TASK_RESULTS
from crawlsched.drivers import registry
from crawlsched.drivers.base import CrawlContext, CrawlJob, LoginRejected, RateLimited
from crawlsched.drivers.browser_session import is_session_lost, open_browser
from crawlsched.flow.admission import keys_of, requeue
from crawlsched.flow.stopping import StopWatch
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning.due import derive_target
from crawlsched.planning.outcomes import (
    PHASE_OUTCOMES,
    STOPPED,
    JobUpdate,
    after_failure,
    after_success,
)
from crawlsched.resources.rules import ACCOUNT_POOL, SELENIUM_POOL, pool_of
from crawlsched.runtime import Runtime
from crawlsched.store.runs import schedule_id_of

log = get_logger(__name__)


def job_url(job: dict[str, Any], target: str, media: dict[str, Any] | None) -> str:
    if isinstance(job.get("url"), str) and job["url"]:
        return job["url"]
    template = (media or {}).get("url_template")
    if template:
        return template.format(handle=target)
    return target


class ResourceLost(Exception):
    """What the batch runs on is gone; the jobs not yet crawled go back to wait."""


@dataclass
class Progress:
    updates: list[JobUpdate] = field(default_factory=list)
    found: list[tuple[Any, dict]] = field(default_factory=list)
    discovered: int = 0
    unfinished: list[Any] = field(default_factory=list)  # job ids to requeue
    interruption: str | None = None
    stopped: list[Any] = field(default_factory=list)  # job ids given back: the run was stopped
    executions: list[dict[str, Any]] = field(default_factory=list)  # task history rows


class Leases:
    """The batch's leases: renewed at the start and then whenever a third of the TTL has passed."""

    def __init__(self, rt: Runtime, lease_ids: list[str]) -> None:
        self.rt = rt
        self.lease_ids = lease_ids
        self.ttl_s = rt.settings.resource_lease_s
        self._renewed_at = float("-inf")

    def of_pool(self, pool: str) -> str | None:
        return next((lid for lid in self.lease_ids if pool_of(lid) == pool), None)

    def keep(self) -> None:
        if time.monotonic() - self._renewed_at < self.ttl_s / 3:
            return
        now = self.rt.now()
        for lease_id in self.lease_ids:
            if not self.rt.leases.renew(lease_id, self.ttl_s, now):
                raise ResourceLost(f"{pool_of(lease_id)} lease revoked or expired")
        self._renewed_at = time.monotonic()


@contextlib.contextmanager
def _browser(rt: Runtime, leases: Leases, context: CrawlContext) -> Iterator[None]:
    """Offer the batch's driver a browser on the leased node: opened on first use, once for
    the whole batch, and quit when the batch ends."""
    node_lease = leases.of_pool(SELENIUM_POOL)
    if node_lease is None:
        yield
        return
    sessions: list[contextlib.AbstractContextManager] = []

    def open_session() -> Any:
        node = rt.leases.resource_of(node_lease, rt.now())
        if node is None:
            raise ResourceLost("selenium lease revoked before the browser opened")
        session = open_browser(
            node["url"],
            host_resolver_rules=rt.settings.browser_host_resolver_rules,
            page_load_timeout_s=rt.settings.page_load_timeout_s,
        )
        try:
            browser = session.__enter__()
        except Exception as e:
            reason = f"could not open a browser session: {type(e).__name__}: {e}"
            _node_lost(rt, node["url"], reason)
            raise ResourceLost(f"node {node['url']} did not open a browser session") from e
        sessions.append(session)
        context.selenium_url = node["url"]
        return browser

    context._open_browser = open_session
    try:
        yield
    finally:
        for session in sessions:
            session.__exit__(None, None, None)


def _node_lost(rt: Runtime, url: str, reason: str) -> None:
    rt.inventory.mark_node(url, healthy=False, reason=reason[:300], now=rt.now(), capacity=None)
    metrics.node_marked_down()
    log.warning("node_marked_down", node=url, reason=reason[:300])


def _crawl_jobs(
    rt: Runtime,
    message: BatchMessage,
    jobs: list[dict],
    context: CrawlContext,
    leases: Leases,
    stop: StopWatch,
) -> Progress:
    driver = registry.create(message.driver_class)
    media = rt.media(message.media_name)
    progress = Progress()
    target_fields = ("target", *rt.target_fields(message.collection))
    for index, doc in enumerate(jobs):
        if stop.stopped():
            progress.stopped = [d["_id"] for d in jobs[index:]]
            return progress
        started_at = rt.now()
        target = derive_target(doc, target_fields)
        job = CrawlJob(
            doc["_id"],
            target,
            job_url(doc, target, media),
            message.task,
            message.media_name,
            message.crawl_limit,
            document=doc,
        )
        try:
            leases.keep()
            result = driver.crawl(job, context)
        except ResourceLost as e:
            progress.interruption = str(e)
        except LoginRejected as e:
            rt.inventory.ban_by_lease(leases.of_pool(ACCOUNT_POOL) or "", str(e), rt.now())
            progress.interruption = f"account rejected by the site: {e}"
        except RateLimited as e:
            rt.inventory.cool_by_lease(leases.of_pool(ACCOUNT_POOL) or "", e.until, str(e))
            progress.interruption = f"account rate-limited: {e}"
        except Exception as e:  # one job's failure is that job's, never the batch's
            if context.browser_opened and is_session_lost(e):
                node = rt.leases.resource_of(leases.of_pool(SELENIUM_POOL) or "", rt.now())
                if node is not None:
                    _node_lost(rt, node["url"], f"browser session lost: {type(e).__name__}")
                progress.interruption = f"browser session lost: {type(e).__name__}"
            else:
                error = f"{type(e).__name__}: {e}"[:500]
                log.warning("job_failed", job_id=str(doc["_id"]), error=error)
                attempts = doc.get("attempt_count") or 0
                update = after_failure(doc["_id"], attempts, rt.now(), rt.retry_policy, error)
                progress.updates.append(update)
                progress.executions.append(_execution(doc, update, started_at, rt.now(), 0))
                continue
        if progress.interruption:
            progress.unfinished = [d["_id"] for d in jobs[index:]]
            return progress
        progress.found.extend((doc["_id"], item) for item in result.items)
        progress.discovered += len(result.discovered)
        update = after_success(doc["_id"], doc.get("interval_s"), rt.now(), len(result.discovered))
        progress.updates.append(update)
        progress.executions.append(_execution(doc, update, started_at, rt.now(), len(result.items)))
    return progress


def _execution(
    doc: dict[str, Any], update: JobUpdate, started_at: Any, ended_at: Any, items: int
) -> dict[str, Any]:
    """The part of a task history row only the loop knows; `record_history` adds the rest."""
    return {
        "job_id": encode_id(doc["_id"]),
        "started_at": started_at,
        "ended_at": ended_at,
        "outcome": update.outcome,
        "error": update.error,
        "items_stored": items,
    }


def record_history(rt: Runtime, message: BatchMessage, executions: list[dict[str, Any]]) -> None:
    """All the batch's task history rows in one insert (plus one read of who served it)."""
    if not executions:
        return
    served = rt.assignments.of_dispatch(message.dispatch_id) if message.lease_ids else None
    common = {
        "run_id": message.run_id,
        "schedule_id": schedule_id_of(message.run_id),
        "dispatch_id": message.dispatch_id,
        "collection": message.collection,
        "task": message.task,
        "media_name": message.media_name,
        "account": (served or {}).get("account"),
        "node": (served or {}).get("node"),
        "worker": rt.worker_id,
    }
    rt.history.add([{**common, **row} for row in executions])


def _run(
    rt: Runtime, message: BatchMessage, jobs: list[dict], leases: Leases, stop: StopWatch
) -> Progress:
    try:
        leases.keep()
        media = rt.media(message.media_name) or {}
        context = CrawlContext(
            open_http=lambda: rt.http,
            secret_hosts=media.get("secret_hosts") or (),
            allowed_networks=rt.allowed_networks,
        )
        if account_lease := leases.of_pool(ACCOUNT_POOL):
            context.secret = rt.leases.secret(account_lease, rt.now())
        with _browser(rt, leases, context):
            return _crawl_jobs(rt, message, jobs, context, leases, stop)
    except ResourceLost as e:
        return Progress(unfinished=[doc["_id"] for doc in jobs], interruption=str(e))


def crawl_batch(
    rt: Runtime,
    message: BatchMessage,
    report: Callable[[ReportMessage], None],
    wake: Callable[[frozenset[str]], None] = lambda keys: None,
) -> dict[str, int]:
    started = time.perf_counter()
    store = rt.jobs(message.collection)
    try:
        jobs = store.load_claimed(message.dispatch_id, message.decoded_job_ids())
        stop = StopWatch(rt, message.run_id, message.task)
        if jobs and stop.stopped():
            # Stopped before it started: nothing is crawled, the leases go back below.
            store.release(message.dispatch_id, STOPPED)
            log.info("batch_stopped", dispatch_id=message.dispatch_id, jobs=len(jobs))
        elif jobs:
            progress = _run(rt, message, jobs, Leases(rt, message.lease_ids), stop)
            sink = TASK_RESULTS[message.task]
            model_id = rt.model_ids().get(sink.model)
            rt.results.save(message.task, model_id, progress.found, rt.now(), rt.worker_id)
            store.record(message.dispatch_id, progress.updates, rt.now())
            outcomes = Counter(update.outcome for update in progress.updates)
            metrics.jobs_finished(message.task, message.media_name, outcomes)
            record_history(rt, message, progress.executions)
            if progress.stopped:
                store.release(message.dispatch_id, STOPPED, progress.stopped)
                stopped = len(progress.stopped)
                log.info("batch_stopped", dispatch_id=message.dispatch_id, jobs=stopped)
            if progress.interruption:
                requeue(rt, message, progress.unfinished, progress.interruption)
    finally:
        if message.lease_ids:
            rt.pools.release(message.lease_ids, rt.now())
            wake(keys_of(message))
    # Read back rather than count here: a redelivery after a crash between recording and
    # reporting must send the same report again (the coordinator drops the duplicate). The
    # report itself carries no counts: the coordinator reads them from the jobs too.
    counts = store.outcomes_of(message.dispatch_id, PHASE_OUTCOMES["crawl"])
    if counts:
        elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        report(
            ReportMessage(
                run_id=message.run_id,
                dispatch_id=message.dispatch_id,
                collection=message.collection,
                phase="crawl",
                stages_ms={**message.stages_ms, "crawl": elapsed_ms},
            )
        )
    return counts
