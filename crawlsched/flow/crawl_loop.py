"""The crawl of a batch's jobs, one after the other, in one driver and one context.

For each job the driver's method for the task runs; what it saved and discovered is collected
per job. A job's failure is that job's (retried later; a discovered child gets one attempt per
run, so a dead link ends as `exhausted` and never holds its run open). A failure of what the
batch runs on — account refused or rate-limited, lease lost, browser session gone — stops the
loop: the jobs not crawled go back to wait for another resource.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from crawlsched.drivers import registry
from crawlsched.drivers.base import CrawlJob, LoginRejected, RateLimited, task_method
from crawlsched.drivers.browser_session import is_session_lost
from crawlsched.drivers.context import CrawlContext
from crawlsched.flow.crawl_resources import DispatchLease, Leases, ResourceLost, node_lost
from crawlsched.flow.host_pacing import HostNotReady
from crawlsched.flow.stopping import StopWatch
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.due import derive_target
from crawlsched.planning.outcomes import JobUpdate, after_failure, after_success
from crawlsched.resources.rules import ACCOUNT_POOL, SELENIUM_POOL
from crawlsched.runtime import Runtime
from crawlsched.store.children import Found
from crawlsched.store.results import Item

log = get_logger(__name__)


def job_url(job: dict[str, Any], target: str, media: dict[str, Any] | None) -> str:
    if isinstance(job.get("url"), str) and job["url"]:
        return job["url"]
    template = (media or {}).get("url_template")
    if template:
        return template.format(handle=target)
    return target


@dataclass
class Progress:
    updates: list[JobUpdate] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    found: list[Found] = field(default_factory=list)  # discoveries, to become children
    cut: dict[Any, Counter] = field(default_factory=dict)  # job id -> discoveries cut, by bound
    unfinished: list[Any] = field(default_factory=list)  # job ids to requeue
    interruption: str | None = None
    host_wait: str | None = None  # the unfinished jobs wait for this host: until its holder
    not_before: datetime | None = None  # gives it back, or (blocked, paced) until then
    stopped: list[Any] = field(default_factory=list)  # job ids given back: the run was stopped
    executions: list[dict[str, Any]] = field(default_factory=list)  # task history rows
    seed_urls: list[str] = field(default_factory=list)  # URLs of planned (not child) jobs


def crawl_jobs(
    rt: Runtime,
    message: BatchMessage,
    jobs: list[dict],
    context: CrawlContext,
    leases: Leases,
    stop: StopWatch,
    dispatch: DispatchLease | None = None,
) -> Progress:
    media = rt.media(message.media_name)
    # The store's driver (`crawling.checked_media` refused a message naming another).
    driver = registry.create(str((media or {}).get("driver_class")))
    progress = Progress()
    target_fields = ("target", *rt.target_fields(message.collection))
    for index, doc in enumerate(jobs):
        if stop.stopped():
            progress.stopped = [d["_id"] for d in jobs[index:]]
            return progress
        started_at = rt.now()
        target = derive_target(doc, target_fields)
        depth = doc.get("depth") if isinstance(doc.get("depth"), int) else 0
        url = job_url(doc, target, media)
        job = CrawlJob(
            doc["_id"], target, url, message.task, message.media_name, message.crawl_limit,
            document=doc, depth=depth,
        )  # fmt: skip
        context.begin(job)
        if not doc.get("scope_run"):
            progress.seed_urls.append(url)
        try:
            leases.keep()
            if dispatch is not None:
                dispatch.progress()
            task_method(driver, message.task)(job, context)
        except ResourceLost as e:
            progress.interruption = str(e)
        except HostNotReady as e:
            # Not the page's failure, nor the machinery's: the host is not ready yet. The rest
            # of the batch waits for it and this thread takes other work.
            progress.interruption = f"host not ready: {e}"
            progress.host_wait = e.key
            progress.not_before = None if e.on_release else e.until
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
                    node_lost(rt, node["url"], f"browser session lost: {type(e).__name__}")
                progress.interruption = f"browser session lost: {type(e).__name__}"
            else:
                _failed(rt, progress, doc, e, started_at)
                continue
        if progress.interruption is None and dispatch is not None and dispatch.lost:
            # The driver swallowed the loss: what it did for this job cannot be recorded.
            progress.interruption = f"dispatch {message.dispatch_id} was reclaimed"
        if progress.interruption:
            progress.unfinished = [d["_id"] for d in jobs[index:]]
            return progress
        _succeeded(rt, progress, doc, context, started_at)
    return progress


def _succeeded(
    rt: Runtime, progress: Progress, doc: dict, context: CrawlContext, started_at: Any
) -> None:
    job_id = doc["_id"]
    saved = [Item(job_id, model, d) for model, docs in context.saved.items() for d in docs]
    progress.items.extend(saved)
    progress.found.extend(Found(job_id, d) for d in context.discovered.values())
    if context.cut:
        progress.cut[job_id] = Counter(context.cut)
    update = after_success(job_id, doc.get("interval_s"), rt.now(), len(context.discovered))
    progress.updates.append(update)
    progress.executions.append(execution(doc, update, started_at, rt.now(), len(saved)))


def _failed(rt: Runtime, progress: Progress, doc: dict, error: Exception, started_at: Any) -> None:
    text = f"{type(error).__name__}: {error}"[:500]
    log.warning("job_failed", job_id=str(doc["_id"]), error=text)
    policy = rt.retry_policy
    if doc.get("scope_run"):
        # A discovered child is tried once per run: its failure is final for the run.
        policy = dataclasses.replace(policy, max_attempts=1)
    attempts = doc.get("attempt_count") or 0
    update = after_failure(doc["_id"], attempts, rt.now(), policy, text)
    progress.updates.append(update)
    progress.executions.append(execution(doc, update, started_at, rt.now(), 0))


def execution(
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
