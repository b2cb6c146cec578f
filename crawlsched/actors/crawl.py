"""crawl_<task>: one actor per task, each on its own queue crawlsched.crawl.<task>."""

from __future__ import annotations

import dramatiq

from crawlsched.actors import handlers
from crawlsched.actors.sends import DRAMATIQ
from crawlsched.catalog import ALL_TASKS
from crawlsched.errors import UnknownDriver
from crawlsched.messages import BadMessage
from crawlsched.runtime import get_runtime


def _crawl(batch: dict) -> None:
    handlers.crawl(get_runtime(), DRAMATIQ, batch)


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
