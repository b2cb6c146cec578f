"""A test driver plug-in (CRAWLSCHED_DRIVER_MODULES=tests.support.slow_driver, table DRIVERS).

`slow`: sleeps per job, so a test can kill a worker in the middle of a batch.
`boom`: fails every job whose target contains "boom", so failures and retries can be seen.
`flaky`: a job whose target contains "flaky" fails on its first attempt and succeeds after.
"""

from __future__ import annotations

import os
import time

from crawlsched.catalog import TASK_RESULTS
from crawlsched.drivers.base import CrawlJob, DriverError
from crawlsched.drivers.context import CrawlContext

DEFAULT_DELAY_S = "0.2"


def _setting(name: str, default: str | None = None) -> str | None:
    # Read per job, not at import: in-process tests change these between tests, and the module
    # is imported once per process.
    return os.environ.get(name, default)


class SlowDriver:
    def crawl(self, job: CrawlJob, context: CrawlContext) -> None:
        # When set, each job start is appended here as "<dispatch_id> <job_id> <unix time>": a
        # test can then see which batches a worker it killed had in flight, who ran them
        # again, and when.
        if start_log := _setting("CRAWLSCHED_TEST_START_LOG"):
            with open(start_log, "a", encoding="utf-8") as log:
                dispatch_id = (job.document or {}).get("dispatch_id")
                log.write(f"{dispatch_id} {job.job_id} {time.time():.3f}\n")
        time.sleep(float(_setting("CRAWLSCHED_TEST_SLOW_DRIVER_S", DEFAULT_DELAY_S)))
        if "boom" in job.target:
            raise DriverError(f"{job.target} always fails")
        if "flaky" in job.target and not (job.document or {}).get("attempt_count"):
            raise DriverError(f"{job.target} fails on its first attempt")
        doc = {"key": job.url, "url": job.url, "target": job.target}
        context.save(TASK_RESULTS[job.task].model, [doc])


DRIVERS = {"slow": SlowDriver}
