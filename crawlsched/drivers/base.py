"""The driver interface: one job in, found items and discovered URLs out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx


class DriverError(Exception):
    """The crawl of one job failed; the job is retried later (it does not fail the batch)."""


@dataclass(frozen=True)
class CrawlJob:
    job_id: Any
    target: str
    url: str
    task: str
    media_name: str
    crawl_limit: int


@dataclass
class CrawlContext:
    http: httpx.Client
    secret: str | None = None  # the leased account's credential; never log it
    selenium_url: str | None = None  # the leased node, when the task needs a browser


@dataclass
class CrawlResult:
    # Each item has a natural "key" (e.g. its URL); stored by (model, key) so re-crawls update.
    items: list[dict[str, Any]] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)


class Driver(Protocol):
    def crawl(self, job: CrawlJob, context: CrawlContext) -> CrawlResult: ...
