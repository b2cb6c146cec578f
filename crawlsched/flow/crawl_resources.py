"""What a batch runs on: its leases (renewed while it works) and its browser session."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from crawlsched import metrics
from crawlsched.drivers.browser_session import open_browser
from crawlsched.drivers.context import CrawlContext
from crawlsched.flow.destinations import check_node
from crawlsched.flow.resource_events import node_marked
from crawlsched.logs import get_logger
from crawlsched.resources.rules import SELENIUM_POOL, pool_of
from crawlsched.runtime import Runtime

log = get_logger(__name__)


class ResourceLost(Exception):
    """What the batch runs on is gone; the jobs not yet crawled go back to wait."""


class DispatchLost(ResourceLost):
    """The batch's dispatch was reclaimed (this worker looked dead or stuck): its jobs are no
    longer this crawl's, and nothing it records would count."""


class DispatchLease:
    """Keeps a live crawl's dispatch lease: renewed on every sign of progress (a job begun, a
    request sent) once a third of the lease has passed, so only a dead or stuck worker's batch
    outlives it and is reclaimed. Thread-safe enough: two renewals at once are harmless."""

    def __init__(
        self,
        rt: Runtime,
        collection: str,
        dispatch_id: str,
        deadline: datetime | None = None,
    ) -> None:
        self.rt = rt
        self.collection = collection
        self.dispatch_id = dispatch_id
        self.lease_s = rt.settings.dispatch_lease_s
        # `deadline`: the earliest lease deadline of the jobs as loaded. The message may have
        # queued for a while, so the lease counts as renewed when that deadline was set
        # (`lease_s` before it): a fresh claim is not renewed again on the first page (one
        # store command per delivery), one that waited is. Unknown: renewed at once.
        self._renewed_at = float("-inf")
        if deadline is not None:
            left_s = (deadline - rt.now()).total_seconds()
            self._renewed_at = time.monotonic() - (self.lease_s - min(left_s, self.lease_s))
        self.lost = False

    def progress(self) -> None:
        """Renew if due; raises DispatchLost once the dispatch holds no job any more."""
        if self.lost:
            raise DispatchLost(f"dispatch {self.dispatch_id} was reclaimed")
        if time.monotonic() - self._renewed_at < self.lease_s / 3:
            return
        self._renewed_at = time.monotonic()
        deadline = self.rt.now() + timedelta(seconds=self.lease_s)
        if self.rt.jobs(self.collection).renew_dispatch(self.dispatch_id, deadline) == 0:
            self.lost = True
            log.warning("dispatch_lost", dispatch_id=self.dispatch_id)
            raise DispatchLost(f"dispatch {self.dispatch_id} was reclaimed")


class Leases:
    """The batch's leases: renewed at the start and then whenever a third of the TTL has passed."""

    def __init__(self, rt: Runtime, lease_ids: list[str]) -> None:
        self.rt = rt
        self.lease_ids = lease_ids
        self.ttl_s = rt.settings.resource_lease_s
        self._renewed_at = float("-inf")
        self.held: dict[str, str] = {}  # pool -> what its lease held at the last renewal

    def of_pool(self, pool: str) -> str | None:
        return next((lid for lid in self.lease_ids if pool_of(lid) == pool), None)

    def keep(self) -> None:
        if time.monotonic() - self._renewed_at < self.ttl_s / 3:
            return
        now = self.rt.now()
        for lease_id in self.lease_ids:
            label = self.rt.leases.renew_holding(lease_id, self.ttl_s, now)
            if label is None:
                raise ResourceLost(f"{pool_of(lease_id)} lease revoked or expired")
            self.held[pool_of(lease_id)] = label
        self._renewed_at = time.monotonic()


@contextlib.contextmanager
def batch_browser(rt: Runtime, leases: Leases, context: CrawlContext) -> Iterator[None]:
    """Offer the batch's driver a browser on the leased node: opened on first use, once for
    the whole batch, and quit when the batch ends."""
    node_lease = leases.of_pool(SELENIUM_POOL)
    if node_lease is None:
        yield
        return
    sessions: list[contextlib.AbstractContextManager] = []

    def open_session() -> Any:
        node = rt.leases.resource_of(node_lease, rt.now())
        if node is None:
            raise ResourceLost("selenium lease revoked before the browser opened")
        session = open_browser(node["url"], **rt.browser_options())
        try:
            check_node(rt.settings, node["url"], rt.resolver)  # the node's address, again
            browser = session.__enter__()
        except Exception as e:
            reason = f"could not open a browser session: {type(e).__name__}: {e}"
            node_lost(rt, node["url"], reason)
            raise ResourceLost(f"node {node['url']} did not open a browser session") from e
        sessions.append(session)
        context.selenium_url = node["url"]
        return browser

    context._open_browser = open_session
    try:
        yield
    finally:
        for session in sessions:
            session.__exit__(None, None, None)


def node_lost(rt: Runtime, url: str, reason: str) -> None:
    before, revoked = rt.inventory.mark_node(
        url, healthy=False, reason=reason[:300], now=rt.now(), capacity=None
    )
    metrics.node_marked_down()
    log.warning("node_marked_down", node=url, reason=reason[:300])
    node_marked(rt, url, before, False, reason, detected_by="crawl", leases_revoked=len(revoked))
