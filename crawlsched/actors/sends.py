"""Every message an actor sends to another actor, by the other's name (`Sends`).

The actors call each other in a circle (the planner sends batches to the gatekeepers and the
crawl actors, a crawl reports to the coordinator, the coordinator asks the planner for a run's
children pass): each sends through a `Sends`, which names the receiving actor by its
`actor_name` and queue, so no actor module imports another. The names are the ones operators
see in the RabbitMQ management UI and in dead-letter queues: they never change with a
function's name. `DRAMATIQ` sends through the broker; the test suite's simulation hands the
actors' handlers a `Sends` over its own broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import dramatiq

from crawlsched.messages import BatchMessage, ReportMessage, WakeMessage, admission_route
from crawlsched.runtime import get_runtime

WAKE_KEYS_PER_MESSAGE = 8  # a wake message names at most this many keys
# A delayed message is held unacknowledged by a worker until its time, and RabbitMQ closes the
# channel of a delivery unacknowledged past its consumer_timeout (30 minutes by default),
# redelivering all it held. So no wake-up is sent further ahead than this: the ticker's
# admission pass, on every tick, admits a batch whose wait has ended (waiting is a document).
MAX_WAKE_DELAY_S = 600.0

# How a message leaves: (queue, actor name, args, delay in seconds).
Send = Callable[[str, str, tuple[Any, ...], float], None]


class Sends:
    def __init__(self, send: Send, now: Callable[[], datetime]) -> None:
        self._send, self._now = send, now

    def plan(self, schedule_id: str, fire_at: datetime) -> None:
        self._send("crawlsched.plan", "plan_crawls", (schedule_id, fire_at.isoformat()), 0.0)

    def plan_children(self, run_id: str, collection: str) -> None:
        self._send("crawlsched.plan", "plan_children", (run_id, collection), 0.0)

    def crawl(self, message: BatchMessage) -> None:
        queue = f"crawlsched.crawl.{message.task}"
        self._send(queue, f"crawl_{message.task}", (message.payload(),), 0.0)

    def batch(self, message: BatchMessage) -> None:
        """A planned batch: to its gatekeeper when it needs an account or a node, else to its
        crawl actor."""
        route = admission_route(message.category, message.need_proxy)
        if route == "crawl":
            self.crawl(message)
        else:
            queue = f"crawlsched.admit.{route.removeprefix('admit_')}"
            self._send(queue, route, (message.payload(),), 0.0)

    def report(self, report: ReportMessage) -> None:
        self._send("crawlsched.done", "record_finished", (report.payload(),), 0.0)

    def webhook(self, delivery_id: str) -> None:
        self._send("crawlsched.notify", "deliver_webhook", (delivery_id,), 0.0)

    def wake(self, keys: Iterable[str], delay_s: float = 0.0) -> None:
        """Admission passes for `keys`, `delay_s` from now (a few keys a message); none when
        that is over `MAX_WAKE_DELAY_S` away (the ticker's pass does it then)."""
        if delay_s > MAX_WAKE_DELAY_S:
            return
        keys = sorted(keys)
        for at in range(0, len(keys), WAKE_KEYS_PER_MESSAGE):
            chunk = keys[at : at + WAKE_KEYS_PER_MESSAGE]
            queue = wake_queue(chunk)
            name = f"wake_{queue}"
            payload = WakeMessage(pool_keys=chunk).payload()
            self._send(f"crawlsched.admit.{queue}", name, (payload,), delay_s)

    def wake_at(self, keys: Iterable[str], when: datetime) -> None:
        """A wake-up for `keys` at `when` (a host's block or its dead holder's slice ends then):
        a delayed message, so no clock tick is needed for it."""
        self.wake(keys, delay_s=max((when - self._now()).total_seconds(), 0.0) + 0.05)


def wake_queue(keys: Iterable[str]) -> str:
    """Whose gatekeeper runs a pass for these keys: any pass looks at every batch waiting for
    one of them, so it only matters that the pool's own queue carries it."""
    keys = set(keys)
    if any(k.startswith("account:") for k in keys):
        return "login"
    if keys and keys <= {"proxy"}:
        return "proxy"
    return "selenium"


def _through_dramatiq(queue: str, actor_name: str, args: tuple[Any, ...], delay_s: float) -> None:
    actor = dramatiq.get_broker().get_actor(actor_name)
    actor.send_with_options(args=args, delay=max(1, int(delay_s * 1000)) if delay_s else None)


DRAMATIQ = Sends(_through_dramatiq, lambda: get_runtime().now())

# The same, as functions (the command line and the API send through these).
send_plan = DRAMATIQ.plan


def send_plan_iso(schedule_id: str, fire_at: str) -> None:
    """`send_plan` for a fire time already written as ISO 8601 (a caller of the API's)."""
    DRAMATIQ.plan(schedule_id, datetime.fromisoformat(fire_at))


send_plan_children = DRAMATIQ.plan_children
send_crawl = DRAMATIQ.crawl
send_batch = DRAMATIQ.batch
send_report = DRAMATIQ.report
send_webhook = DRAMATIQ.webhook
send_wake_at = DRAMATIQ.wake_at


def send_wake(keys: Iterable[str], delay_ms: int = 0) -> None:
    DRAMATIQ.wake(keys, delay_ms / 1000)
