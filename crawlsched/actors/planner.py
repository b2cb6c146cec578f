"""plan_crawls: plan one firing of a schedule; plan_children: a run's discovered jobs
(crawlsched.plan)."""

from __future__ import annotations

import dramatiq

from crawlsched.actors import handlers
from crawlsched.actors.sends import DRAMATIQ
from crawlsched.messages import BadMessage
from crawlsched.runtime import get_runtime


@dramatiq.actor(actor_name="plan_crawls", queue_name="crawlsched.plan", throws=(BadMessage,))
def plan_crawls(schedule_id: str, fire_at: str) -> None:
    handlers.plan_crawls(get_runtime(), DRAMATIQ, schedule_id, fire_at)


@dramatiq.actor(actor_name="plan_children", queue_name="crawlsched.plan", throws=(BadMessage,))
def plan_children(run_id: str, collection: str) -> None:
    handlers.plan_children(get_runtime(), DRAMATIQ, run_id, collection)
