"""crawl_<task>: one actor per task, each on its own queue crawlsched.crawl.<task>."""

from __future__ import annotations

import dramatiq

from crawlsched.actors.coordinator import apply_report
from crawlsched.actors.gatekeepers import first_delivery, wake_after_release
from crawlsched.actors.sends import send_report, send_wake_at
from crawlsched.catalog import ALL_TASKS
from crawlsched.crawl.batch import crawl_batch
from crawlsched.errors import UnknownDriver
from crawlsched.messages import BadMessage, BatchMessage
from crawlsched.runtime import get_runtime


def _crawl(batch: dict) -> None:
    message = BatchMessage.parse(batch)
    crawl_batch(
        get_runtime(), message, send_report, wake_after_release, send_wake_at, first_delivery(),
        apply_report,
    )  # fmt: skip


CRAWL_ACTORS: dict[str, dramatiq.Actor] = {
    task: dramatiq.actor(
        _crawl,
        actor_name=f"crawl_{task}",
        queue_name=f"crawlsched.crawl.{task}",
        # Behind everything else a worker has pulled (dramatiq's priority orders its local work
        # queue, lower first; the others are 0): a report, a plan or an admission waits for no
        # prefetched crawl, so a run's counts follow its crawl instead of catching up at the end.
        priority=10,
        # An unknown driver will not appear by retrying: dead-letter at once; the jobs come
        # back through dispatch-lease expiry and count a failed attempt.
        throws=(BadMessage, UnknownDriver),
    )
    for task in ALL_TASKS
}
