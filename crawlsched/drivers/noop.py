"""A driver that does nothing and succeeds: measures the scheduler itself (benchmarks)."""

from __future__ import annotations

from crawlsched.drivers.base import CrawlJob
from crawlsched.drivers.context import CrawlContext


class NoopDriver:
    def crawl(self, job: CrawlJob, context: CrawlContext) -> None:
        return None
