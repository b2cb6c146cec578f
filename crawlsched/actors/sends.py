"""Every message an actor sends to another actor, by the other's name.

The actors call each other in a circle (the planner sends batches to the gatekeepers and the
crawl actors, a crawl reports to the coordinator, the coordinator asks the planner for a run's
children pass): each sends through this module, which finds the receiving actor on the broker
by its `actor_name`, so no actor module imports another. The names are the ones operators see
in the RabbitMQ management UI and in dead-letter queues: they never change with a function's
name.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import dramatiq

from crawlsched.messages import BatchMessage, ReportMessage, WakeMessage, admission_route
from crawlsched.runtime import get_runtime

WAKE_KEYS_PER_MESSAGE = 8  # a wake message names at most this many keys


def _actor(name: str) -> dramatiq.Actor:
    return dramatiq.get_broker().get_actor(name)


def send_plan(schedule_id: str, fire_at: datetime) -> None:
    _actor("plan_crawls").send(schedule_id, fire_at.isoformat())


def send_plan_children(run_id: str, collection: str) -> None:
    _actor("plan_children").send(run_id, collection)


def send_crawl(message: BatchMessage) -> None:
    _actor(f"crawl_{message.task}").send(message.payload())


def send_batch(message: BatchMessage) -> None:
    """A planned batch: to its gatekeeper when it needs an account or a node, else to its
    crawl actor."""
    route = admission_route(message.category)
    if route in ("admit_login", "admit_selenium"):
        _actor(route).send(message.payload())
    else:
        send_crawl(message)


def send_report(report: ReportMessage) -> None:
    _actor("record_finished").send(report.payload())


def send_webhook(delivery_id: str) -> None:
    _actor("deliver_webhook").send(delivery_id)


def send_wake(keys: Iterable[str], delay_ms: int = 0) -> None:
    """Admission passes for `keys`, `delay_ms` from now (a few keys a message)."""
    keys = sorted(keys)
    for at in range(0, len(keys), WAKE_KEYS_PER_MESSAGE):
        chunk = keys[at : at + WAKE_KEYS_PER_MESSAGE]
        name = "wake_login" if any(k.startswith("account:") for k in chunk) else "wake_selenium"
        payload = WakeMessage(pool_keys=chunk).payload()
        _actor(name).send_with_options(args=(payload,), delay=delay_ms or None)


def send_wake_at(keys: Iterable[str], when: datetime) -> None:
    """A wake-up for `keys` at `when` (a host's block or its dead holder's slice ends then):
    a delayed message, so no clock tick is needed for it."""
    seconds = (when - get_runtime().now()).total_seconds()
    send_wake(keys, delay_ms=max(1, int(seconds * 1000) + 50))
