"""tick: fire due schedules, reclaim expired holds, keep the pools honest, drain the outboxes
(crawlsched.ticks)."""

from __future__ import annotations

import dramatiq

from crawlsched.actors import handlers
from crawlsched.actors.sends import DRAMATIQ
from crawlsched.runtime import get_runtime


# A tick is worthless once the next one is out: never retry it, never let it queue up for long.
@dramatiq.actor(actor_name="tick", queue_name="crawlsched.ticks", max_retries=0, max_age=60_000)
def tick() -> None:
    handlers.tick(get_runtime(), DRAMATIQ)
