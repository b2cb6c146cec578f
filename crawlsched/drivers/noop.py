"""A driver that does nothing and succeeds: measures the scheduler itself (benchmarks)."""

from __future__ import annotations

from crawlsched.drivers.base import CrawlContext, CrawlJob, CrawlResult
from crawlsched.drivers.registry import register


class NoopDriver:
    def crawl(self, job: CrawlJob, context: CrawlContext) -> CrawlResult:
        return CrawlResult()


register("noop", NoopDriver)
