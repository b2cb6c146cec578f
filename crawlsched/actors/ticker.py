"""tick: fire due schedules and reclaim expired holds (crawlsched.ticks)."""

from __future__ import annotations

from datetime import datetime

import dramatiq

from crawlsched.actors.coordinator import send_report
from crawlsched.actors.planner import plan_crawls
from crawlsched.flow.ticking import fire_due, reclaim_expired
from crawlsched.runtime import get_runtime


def _send_plan(schedule_id: str, fire_at: datetime) -> None:
    plan_crawls.send(schedule_id, fire_at.isoformat())


# A tick is worthless once the next one is out: never retry it, never let it queue up for long.
@dramatiq.actor(actor_name="tick", queue_name="crawlsched.ticks", max_retries=0, max_age=60_000)
def tick() -> None:
    runtime = get_runtime()
    fire_due(runtime, _send_plan)
    reclaim_expired(runtime, send_report)
