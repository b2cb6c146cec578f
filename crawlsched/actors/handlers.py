"""What each actor does with a message, given its process's runtime and a `Sends`: the
actors (`dramatiq.actor` declarations in the other modules of this package) call these with
the process's runtime and `sends.DRAMATIQ`; the test suite's simulation calls the same with
its own runtimes and broker. Wiring only: parse, load through a store, call the flow, send.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime

from dramatiq.middleware import CurrentMessage

from crawlsched import metrics
from crawlsched.actors.sends import Sends
from crawlsched.catalog import ALL_TASKS, JOB_COLLECTIONS
from crawlsched.crawl.batch import crawl_batch
from crawlsched.events import relay_events
from crawlsched.flow.admission import admit, admit_waiting, starve_overdue
from crawlsched.flow.children import plan_discovered, sweep_waiting_children
from crawlsched.flow.coordination import finish_stalled, record_report, relay_announcements
from crawlsched.flow.nodes import probe_nodes
from crawlsched.flow.notifying import deliver, relay_webhooks
from crawlsched.flow.planning import plan_run
from crawlsched.flow.ticking import fire_due, reclaim_expired, resend_unsent_fires
from crawlsched.logs import get_logger
from crawlsched.messages import BadMessage, BatchMessage, ReportMessage, WakeMessage
from crawlsched.resources.node_probe import probe_node
from crawlsched.runtime import Runtime

log = get_logger(__name__)

# Every queue an actor consumes (a worker started on all of them takes every message).
QUEUES = (
    "crawlsched.ticks",
    "crawlsched.plan",
    "crawlsched.admit.login",
    "crawlsched.admit.selenium",
    "crawlsched.admit.proxy",
    *(f"crawlsched.crawl.{task}" for task in ALL_TASKS),
    "crawlsched.done",
    "crawlsched.notify",
)


def first_delivery() -> bool:
    """Neither redelivered by RabbitMQ (a worker died holding it) nor retried by dramatiq."""
    message = CurrentMessage.get_current_message()
    if message is None:
        return False  # unknown: take the careful way
    return not getattr(message, "redelivered", False) and not message.options.get("retries")


def tick(rt: Runtime, sends: Sends) -> None:
    """Fire due schedules, reclaim expired holds, keep the pools honest, drain the outboxes."""
    started = rt.env.monotonic()
    fire_due(rt, sends.plan)
    resend_unsent_fires(rt, sends.plan)
    reclaim_expired(rt, sends.report)
    probe_nodes(rt, lambda url: probe_node(url, rt.probe_http), _wake_ms(sends))
    starve_overdue(rt, sends.report)
    # The sweep that covers lost wake-ups: one read when nothing waits.
    admit_waiting(rt, None, sends.crawl)
    # Discovered children released but never planned (a lost plan_children message), and jobs
    # the machinery failed whose run may try them again now.
    sweep_waiting_children(rt, sends.plan_children)
    # The outboxes: run ends a crash cut short, events not yet confirmed, webhooks not yet
    # answered 2xx.
    finish_stalled(rt, sends.webhook)
    relay_announcements(rt, sends.webhook)
    relay_events(rt)
    relay_webhooks(rt, sends.webhook)
    metrics.tick_done(rt.env.monotonic() - started)


def _wake_ms(sends: Sends) -> Callable[..., None]:
    return lambda keys, delay_ms=0: sends.wake(keys, delay_ms / 1000)


def plan_crawls(rt: Runtime, sends: Sends, schedule_id: str, fire_at: str) -> None:
    if not isinstance(schedule_id, str) or not 0 < len(schedule_id) <= 200:
        raise BadMessage("schedule_id must be a string of 1 to 200 characters")
    try:
        when = datetime.fromisoformat(fire_at)
    except (TypeError, ValueError) as e:
        raise BadMessage(f"fire_at is not an ISO date: {str(fire_at)[:50]!r}") from e
    if when.tzinfo is None:
        raise BadMessage(f"fire_at must carry a time zone: {fire_at[:50]!r}")
    plan_run(rt, schedule_id, when, sends.batch, sends.webhook)


def plan_children(rt: Runtime, sends: Sends, run_id: str, collection: str) -> None:
    if not isinstance(run_id, str) or not 0 < len(run_id) <= 200:
        raise BadMessage("run_id must be a string of 1 to 200 characters")
    if collection not in JOB_COLLECTIONS:
        raise BadMessage(f"unknown job collection {str(collection)[:100]!r}")
    plan_discovered(rt, run_id, collection, sends.batch, sends.webhook)


def admit_batch(rt: Runtime, sends: Sends, batch: dict) -> None:
    """A batch that needs an account, a node, or both (then all or nothing)."""
    admit(rt, BatchMessage.parse(batch), sends.crawl, first_delivery())


def wake(rt: Runtime, sends: Sends, wake: dict) -> None:
    admit_waiting(rt, WakeMessage.parse(wake).pool_keys, sends.crawl)


def wake_after_release(rt: Runtime, sends: Sends, keys: Iterable[str]) -> None:
    """Run the admission pass right here, in the worker that released the leases: it saves a
    round trip through RabbitMQ for every batch admitted. If the pass fails, hand the wake-up
    to the gatekeepers' queue instead (the ticker's sweep would also cover it)."""
    try:
        admit_waiting(rt, frozenset(keys), sends.crawl)
    except Exception as e:
        log.warning("wake_pass_failed", error=f"{type(e).__name__}: {e}"[:300])
        sends.wake(keys)


def crawl(rt: Runtime, sends: Sends, batch: dict) -> None:
    crawl_batch(
        rt, BatchMessage.parse(batch), sends.report,
        lambda keys: wake_after_release(rt, sends, keys), sends.wake_at, first_delivery(),
        lambda report, kept: apply_report(rt, sends, report, kept),
    )  # fmt: skip


def record_finished(rt: Runtime, sends: Sends, report: dict) -> None:
    parsed = ReportMessage.parse(report)
    if message := CurrentMessage.get_current_message():
        metrics.report_received(time.time() - message.message_timestamp / 1000)
    record_report(rt, parsed, sends.webhook, sends.plan_children)


def apply_report(rt: Runtime, sends: Sends, report: ReportMessage, kept: int) -> None:
    """Apply a report in this process, not through the queue: the report of a batch's part
    whose found pages the batch crawls itself must be counted before it crawls them
    (`crawl/parts.py`); the queue gives no order between two reports."""
    record_report(rt, report, sends.webhook, sends.plan_children, kept=kept)


def deliver_webhook(rt: Runtime, sends: Sends, delivery_id: str) -> None:
    deliver(rt, delivery_id, rt.http)


BY_ACTOR: dict[str, Callable[..., None]] = {
    "tick": tick,
    "plan_crawls": plan_crawls,
    "plan_children": plan_children,
    "admit_login": admit_batch,
    "admit_selenium": admit_batch,
    "wake_login": wake,
    "wake_selenium": wake,
    **{f"crawl_{task}": crawl for task in ALL_TASKS},
    "record_finished": record_finished,
    "deliver_webhook": deliver_webhook,
}


def bound(
    handler: Callable[..., None], runtime: Callable[[], Runtime], sends: Sends
) -> Callable[..., None]:
    """`handler` with its runtime (read at each call) and its `Sends`: an actor's body."""

    def body(*args: object) -> None:
        handler(runtime(), sends, *args)

    return body


def table(runtime: Callable[[], Runtime], sends: Sends) -> dict[str, Callable[..., None]]:
    """Each actor's body, by actor name."""
    return {name: bound(handler, runtime, sends) for name, handler in BY_ACTOR.items()}
