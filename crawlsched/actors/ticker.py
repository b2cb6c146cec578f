"""tick: fire due schedules, reclaim expired holds, keep the pools honest, drain the outboxes
(crawlsched.ticks)."""

from __future__ import annotations

import time

import dramatiq

from crawlsched import metrics
from crawlsched.actors.sends import (
    send_crawl,
    send_plan,
    send_plan_children,
    send_report,
    send_wake,
    send_webhook,
)
from crawlsched.events import relay_events
from crawlsched.flow.admission import admit_waiting, starve_overdue
from crawlsched.flow.children import sweep_waiting_children
from crawlsched.flow.coordination import relay_announcements
from crawlsched.flow.nodes import probe_nodes
from crawlsched.flow.notifying import relay_webhooks
from crawlsched.flow.ticking import fire_due, reclaim_expired
from crawlsched.resources.node_probe import probe_node
from crawlsched.runtime import get_runtime


# A tick is worthless once the next one is out: never retry it, never let it queue up for long.
@dramatiq.actor(actor_name="tick", queue_name="crawlsched.ticks", max_retries=0, max_age=60_000)
def tick() -> None:
    started = time.perf_counter()
    runtime = get_runtime()
    fire_due(runtime, send_plan)
    reclaim_expired(runtime, send_report)
    probe_nodes(runtime, lambda url: probe_node(url, runtime.probe_http), send_wake)
    starve_overdue(runtime, send_report)
    # The sweep that covers lost wake-ups: one read when nothing waits.
    admit_waiting(runtime, None, send_crawl)
    # Discovered children released but never planned (a lost plan_children message), and
    # jobs the machinery failed whose run may try them again now.
    sweep_waiting_children(runtime, send_plan_children)
    # The outboxes: run ends a crash cut short, events not yet confirmed, webhooks not yet
    # answered 2xx.
    relay_announcements(runtime, send_webhook)
    relay_events(runtime)
    relay_webhooks(runtime, send_webhook)
    metrics.tick_done(time.perf_counter() - started)
