"""plan_crawls: plan one firing of a schedule; plan_children: a run's discovered jobs
(crawlsched.plan)."""

from __future__ import annotations

from datetime import datetime

import dramatiq

from crawlsched.actors.sends import send_batch, send_webhook
from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.flow.children import plan_discovered
from crawlsched.flow.planning import plan_run
from crawlsched.messages import BadMessage
from crawlsched.runtime import get_runtime


@dramatiq.actor(actor_name="plan_crawls", queue_name="crawlsched.plan", throws=(BadMessage,))
def plan_crawls(schedule_id: str, fire_at: str) -> None:
    if not isinstance(schedule_id, str) or not 0 < len(schedule_id) <= 200:
        raise BadMessage("schedule_id must be a string of 1 to 200 characters")
    try:
        when = datetime.fromisoformat(fire_at)
    except (TypeError, ValueError) as e:
        raise BadMessage(f"fire_at is not an ISO date: {str(fire_at)[:50]!r}") from e
    if when.tzinfo is None:
        raise BadMessage(f"fire_at must carry a time zone: {fire_at[:50]!r}")
    plan_run(get_runtime(), schedule_id, when, send_batch, send_webhook)


@dramatiq.actor(actor_name="plan_children", queue_name="crawlsched.plan", throws=(BadMessage,))
def plan_children(run_id: str, collection: str) -> None:
    if not isinstance(run_id, str) or not 0 < len(run_id) <= 200:
        raise BadMessage("run_id must be a string of 1 to 200 characters")
    if collection not in JOB_COLLECTIONS:
        raise BadMessage(f"unknown job collection {str(collection)[:100]!r}")
    plan_discovered(get_runtime(), run_id, collection, send_batch, send_webhook)
