"""Node health: the ticker probes each Selenium node's /status and marks it up or down.

A node found down loses its leases at once: the batches that held them stop at their next lease
renewal (or sooner, when their browser session fails) and wait for another node. A node that
comes back wakes the batches waiting for the Selenium pool.
"""

from __future__ import annotations

from collections.abc import Callable

from crawlsched import metrics
from crawlsched.errors import CrawlschedError
from crawlsched.flow.resource_events import node_marked
from crawlsched.logs import get_logger
from crawlsched.resources.node_status import NodeStatus
from crawlsched.resources.queueing import SELENIUM_KEY
from crawlsched.resources.rules import DOWN, UP
from crawlsched.runtime import Runtime

log = get_logger(__name__)


def probe_nodes(
    rt: Runtime,
    probe: Callable[[str], NodeStatus],
    wake: Callable[[frozenset[str]], None],
) -> dict[str, int]:
    """Probe the nodes due for a check; returns how many were found up and down."""
    now = rt.now()
    seen = {UP: 0, DOWN: 0}
    came_up = False
    for node in rt.inventory.due_for_probe(now, rt.settings.node_probe_interval_s):
        if not rt.inventory.claim_probe(node, now):
            continue  # another ticker is on it
        url = node["url"]
        try:
            status = probe(url)
            healthy, reason = status.ready, None if status.ready else status.message
        except (CrawlschedError, ValueError) as e:
            status, healthy, reason = None, False, str(e)
        # A Grid reports its own capacity; a plain chromedriver keeps the configured one.
        capacity = status.capacity if status is not None and status.capacity else None
        before, revoked = rt.inventory.mark_node(url, healthy, reason, rt.now(), capacity)
        seen[UP if healthy else DOWN] += 1
        node_marked(
            rt, url, before, healthy, reason, detected_by="probe", leases_revoked=len(revoked)
        )
        if healthy and before != UP:
            came_up = True
            log.info("node_up", node=url)
        elif not healthy and (before != DOWN or revoked):
            metrics.node_marked_down()
            log.warning("node_down", node=url, reason=reason, leases_revoked=len(revoked))
    if came_up:
        wake(frozenset({SELENIUM_KEY}))
    return seen
