"""What a batch's crawl has done so far, job by job (`Crawled`, the loop's own), and what it
hands over to be recorded (`CrawledPart`, frozen: the loop starts a new `Crawled` for the next
part and never touches the old one again)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from crawlsched.catalog import JobState
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.planning.failures import failure_fields, page_of
from crawlsched.planning.outcomes import (
    JobUpdate,
    Outcome,
    RetryPolicy,
    after_failure,
    after_success,
)
from crawlsched.store.children import Found
from crawlsched.store.results import Item

log = get_logger(__name__)


@dataclass(frozen=True)
class JobDone:
    """A page a lane is done with: what its driver call found, or the error it raised."""

    doc: dict[str, Any]
    started_at: datetime
    saved: tuple[Item, ...] = ()
    found: tuple[Found, ...] = ()
    cut: Mapping[str, int] = field(default_factory=dict)
    browser_opened: bool = False
    error: BaseException | None = None


@dataclass(frozen=True)
class CrawledPart:
    """A part's crawl, handed over to be recorded (`records.record_part`)."""

    updates: tuple[JobUpdate, ...] = ()
    items: tuple[Item, ...] = ()
    found: tuple[Found, ...] = ()  # discoveries, to become children
    cut: Mapping[Any, Mapping[str, int]] = field(default_factory=dict)  # job id -> by bound
    executions: tuple[dict[str, Any], ...] = ()  # task history rows
    seed_urls: tuple[str, ...] = ()  # URLs of planned (not child) jobs


@dataclass
class Crawled:
    """The current part's crawl, filled by the loop's thread only."""

    updates: list[JobUpdate] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    found: list[Found] = field(default_factory=list)
    cut: dict[Any, Counter] = field(default_factory=dict)
    executions: list[dict[str, Any]] = field(default_factory=list)
    seed_urls: list[str] = field(default_factory=list)

    def frozen(self) -> CrawledPart:
        return CrawledPart(
            tuple(self.updates),
            tuple(self.items),
            tuple(self.found),
            {job_id: dict(counts) for job_id, counts in self.cut.items()},
            tuple(self.executions),
            tuple(self.seed_urls),
        )

    def succeeded(self, done: JobDone, now: datetime) -> None:
        job_id = done.doc["_id"]
        self.items.extend(done.saved)
        self.found.extend(done.found)
        if done.cut:
            self.cut[job_id] = Counter(done.cut)
        update = after_success(job_id, done.doc.get("interval_s"), now, len(done.found))
        self._add(done, update, now, len(done.saved))

    def failed(self, done: JobDone, policy: RetryPolicy, now: datetime) -> None:
        error = done.error
        text = f"{type(error).__name__}: {error}"[:500]
        log.warning("job_failed", job_id=str(done.doc["_id"]), error=text)
        if done.doc.get("scope_run"):
            # A discovered child is tried once per run: its failure is final for the run.
            policy = dataclasses.replace(policy, max_attempts=1)
        attempts = done.doc.get("attempt_count") or 0
        update = after_failure(done.doc["_id"], attempts, now, policy, text)
        self._add(done, update, now, 0, failure_fields(error))

    def given_up(self, done: JobDone, reason: str, now: datetime) -> None:
        """The run gives the page up (not the page's failure: no attempt is counted), and says
        why: its host refused it too often in this run. The run ends incomplete."""
        doc = done.doc
        attempts = max(int(doc.get("attempt_count") or 0), 0)
        update = JobUpdate(
            doc["_id"], Outcome.GIVEN_UP, JobState.FAILED, attempts, False, None, reason
        )
        log.warning("job_given_up", job_id=str(doc["_id"]), reason=reason)
        self._add(done, update, now, 0)

    def _add(
        self,
        done: JobDone,
        update: JobUpdate,
        now: datetime,
        items: int,
        failure: Mapping[str, Any] | None = None,
    ) -> None:
        self.updates.append(update)
        self.executions.append(
            {
                "job_id": encode_id(done.doc["_id"]),
                # What the page was, kept with its row: a discovered page's job expires first.
                "url": page_of(done.doc),
                "started_at": done.started_at,
                "ended_at": now,
                "outcome": update.outcome,
                "error": update.error,
                "items_stored": items,
                **(failure or {}),
            }
        )

    def __bool__(self) -> bool:
        return bool(self.updates)
