"""What a batch's crawl has done so far, and each job's outcome recorded into it.

`crawl_loop` fills a `Progress` job by job; `crawl_records.record_part` writes it to the store
(results, pages found, outcomes, task history) when the batch or a part of it ends.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from crawlsched.drivers.context import CrawlContext
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.planning.failures import failure_fields, page_of
from crawlsched.planning.outcomes import JobUpdate, after_failure, after_success
from crawlsched.runtime import Runtime
from crawlsched.store.children import Found
from crawlsched.store.results import Item

log = get_logger(__name__)


@dataclass
class Progress:
    updates: list[JobUpdate] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    found: list[Found] = field(default_factory=list)  # discoveries, to become children
    cut: dict[Any, Counter] = field(default_factory=dict)  # job id -> discoveries cut, by bound
    unfinished: list[Any] = field(default_factory=list)  # job ids to requeue
    interruption: str | None = None
    host_waits: set[str] = field(default_factory=set)  # the unfinished jobs wait for these
    not_before: datetime | None = None  # hosts: until a holder gives one back, or until then
    stopped: list[Any] = field(default_factory=list)  # job ids given back: the run was stopped
    executions: list[dict[str, Any]] = field(default_factory=list)  # task history rows
    seed_urls: list[str] = field(default_factory=list)  # URLs of planned (not child) jobs


def succeeded(
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


def failed(rt: Runtime, progress: Progress, doc: dict, error: Exception, started_at: Any) -> None:
    text = f"{type(error).__name__}: {error}"[:500]
    log.warning("job_failed", job_id=str(doc["_id"]), error=text)
    policy = rt.retry_policy
    if doc.get("scope_run"):
        # A discovered child is tried once per run: its failure is final for the run.
        policy = dataclasses.replace(policy, max_attempts=1)
    attempts = doc.get("attempt_count") or 0
    update = after_failure(doc["_id"], attempts, rt.now(), policy, text)
    progress.updates.append(update)
    row = execution(doc, update, started_at, rt.now(), 0)
    progress.executions.append({**row, **failure_fields(error)})


def execution(
    doc: dict[str, Any], update: JobUpdate, started_at: Any, ended_at: Any, items: int
) -> dict[str, Any]:
    """The part of a task history row only the loop knows; `record_history` adds the rest."""
    return {
        "job_id": encode_id(doc["_id"]),
        # What the page was, kept with its row: a discovered page's job expires before it.
        "url": page_of(doc),
        "started_at": started_at,
        "ended_at": ended_at,
        "outcome": update.outcome,
        "error": update.error,
        "items_stored": items,
    }
