"""What a batch runs on: its resource leases and its dispatch lease (both renewed while it
works), and its browser session. When one is lost, the batch stops and its pages not crawled
go back to wait (`ResourceLost`).

Threads: `Leases` and `DispatchLease` are called by every lane of the batch (a sign of
progress renews them); each guards its fields with one lock, listed in its docstring.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from crawlsched import metrics
from crawlsched.drivers.base import LoginRejected, RateLimited
from crawlsched.drivers.browser_proxy import FilteringProxy
from crawlsched.drivers.browser_session import is_session_lost, open_browser
from crawlsched.drivers.context import CrawlContext
from crawlsched.drivers.proxied import ProxyBlocked, ProxyFailed
from crawlsched.drivers.upstream import Upstream
from crawlsched.flow.destinations import check_node
from crawlsched.flow.resource_events import ban_account_by_lease, node_marked, proxy_failed
from crawlsched.logs import get_logger
from crawlsched.resources.rules import ACCOUNT_POOL, PROXY_POOL, SELENIUM_POOL, pool_of
from crawlsched.runtime import Runtime

log = get_logger(__name__)


class ResourceLost(Exception):
    """What the batch runs on is gone; the pages not yet crawled go back to wait."""


class DispatchLost(ResourceLost):
    """The batch's dispatch was reclaimed (this worker looked dead or stuck): its pages are no
    longer this crawl's, and nothing it records would count."""


class DispatchLease:
    """Keeps a live crawl's dispatch lease: renewed on every sign of progress (a page begun, a
    request sent) once a third of the lease has passed, so only a dead or stuck worker's
    batch outlives it and is reclaimed.

    `_lock` guards `_ids` (the dispatch ids renewed: the part's, and during a hand-over the
    next part's too), `_renewed_at` and `lost`."""

    def __init__(self, rt: Runtime, collection: str, dispatch_id: str, deadline: datetime | None):
        self._rt, self._collection = rt, collection
        self._lease_s = rt.settings.dispatch_lease_s
        self._lock = rt.env.lock()
        self._ids: tuple[str, ...] = (dispatch_id,)
        # `deadline`: the earliest lease deadline of the jobs as loaded. The message may have
        # queued for a while, so the lease counts as renewed when that deadline was set: a
        # fresh claim is not renewed again on the first page, one that waited is.
        self._renewed_at = float("-inf")
        if deadline is not None:
            left_s = (deadline - rt.now()).total_seconds()
            self._renewed_at = rt.env.monotonic() - (self._lease_s - min(left_s, self._lease_s))
        self.lost = False

    def moving(self, new_id: str) -> None:
        """A hand-over is about to move the rest to `new_id`: renew both until `moved`."""
        with self._lock:
            self._ids = (self._ids[-1], new_id)

    def moved(self, new_id: str) -> None:
        with self._lock:
            self._ids = (new_id,)

    def progress(self) -> None:
        """Renew if due; raises DispatchLost once the dispatch holds no job any more."""
        now = self._rt.env.monotonic()
        with self._lock:
            if self.lost:
                raise DispatchLost(f"dispatch {self._ids[-1]} was reclaimed")
            if now - self._renewed_at < self._lease_s / 3:
                return
            self._renewed_at, ids = now, self._ids
        deadline = self._rt.now() + timedelta(seconds=self._lease_s)
        store = self._rt.jobs(self._collection)
        if sum(store.renew_dispatch(dispatch_id, deadline) for dispatch_id in ids) == 0:
            with self._lock:
                self.lost = True
            log.warning("dispatch_lost", dispatch_id=ids[-1])
            raise DispatchLost(f"dispatch {ids[-1]} was reclaimed")


class Leases:
    """The batch's resource leases, renewed at the start and whenever a third of their TTL has
    passed. `_lock` guards `_renewed_at` and `held`."""

    def __init__(self, rt: Runtime, lease_ids: list[str]) -> None:
        self._rt = rt
        self.lease_ids = tuple(lease_ids)
        self._ttl_s = rt.settings.resource_lease_s
        self._lock = rt.env.lock()
        self._renewed_at = float("-inf")
        self.held: dict[str, str] = {}  # pool -> what its lease held at the last renewal

    def of_pool(self, pool: str) -> str | None:
        return next((lid for lid in self.lease_ids if pool_of(lid) == pool), None)

    def keep(self) -> None:
        now = self._rt.env.monotonic()
        with self._lock:
            if now - self._renewed_at < self._ttl_s / 3:
                return
            self._renewed_at = now
        for lease_id in self.lease_ids:
            label = self._rt.leases.renew_holding(lease_id, self._ttl_s, self._rt.now())
            if label is None:
                raise ResourceLost(f"{pool_of(lease_id)} lease revoked or expired")
            with self._lock:
                self.held[pool_of(lease_id)] = label

    def holding(self) -> dict[str, str]:
        with self._lock:
            return dict(self.held)


@contextlib.contextmanager
def batch_browser(
    rt: Runtime, leases: Leases, context: CrawlContext, upstream: Upstream | None = None
) -> Iterator[None]:
    """Offer the batch's driver a browser on the leased node: opened on first use, once for
    the whole batch, and quit when the batch ends. With `upstream` (the batch's leased
    proxy), the session goes through a filtering proxy of its own chained to it: the target
    rules still apply, and the site sees the leased proxy's address."""
    node_lease = leases.of_pool(SELENIUM_POOL)
    if node_lease is None:
        yield
        return
    sessions: list[contextlib.AbstractContextManager] = []
    chains: list[FilteringProxy] = []  # stopped once the batch's sessions have quit

    def open_session() -> Any:
        node = rt.leases.resource_of(node_lease, rt.now())
        if node is None:
            raise ResourceLost("selenium lease revoked before the browser opened")
        options = rt.browser_options()
        if upstream is not None:
            chained = FilteringProxy(rt.allowed_networks, rt.resolver, upstream=upstream).start()
            chains.append(chained)
            options["proxy_url"] = chained.url
        session = open_browser(node["url"], **options)
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
        for chained in chains:
            chained.stop()


def node_lost(rt: Runtime, url: str, reason: str) -> None:
    before, revoked = rt.inventory.mark_node(
        url, healthy=False, reason=reason[:300], now=rt.now(), capacity=None
    )
    metrics.node_marked_down()
    log.warning("node_marked_down", node=url, reason=reason[:300])
    node_marked(rt, url, before, False, reason, detected_by="crawl", leases_revoked=len(revoked))


def lost_resource(
    rt: Runtime,
    e: BaseException,
    leases: Leases,
    browser_opened: bool,
    media: str | None = None,
    task: str = "",
) -> str | None:
    """Why the batch cannot go on when `e` is the loss of what it runs on (its account refused
    or rate-limited, its proxy failed or blocked, its lease or browser session lost); None
    when `e` is the page's own failure."""
    if isinstance(e, ResourceLost):
        return str(e)
    if isinstance(e, ProxyFailed | ProxyBlocked):
        blocked = isinstance(e, ProxyBlocked)
        proxy_failed(rt, leases.of_pool(PROXY_POOL) or "", str(e), blocked, media)
        return f"proxy {'blocked' if blocked else 'failed'}: {e}"
    if isinstance(e, LoginRejected):
        ban_account_by_lease(rt, leases.of_pool(ACCOUNT_POOL) or "", str(e))
        return f"account rejected by the site: {e}"
    if isinstance(e, RateLimited):
        account_lease = leases.of_pool(ACCOUNT_POOL) or ""
        if e.task_only and task:
            rt.inventory.lock_task_by_lease(account_lease, task, e.until, str(e))
            return f"account rate-limited for {task}: {e}"
        rt.inventory.cool_by_lease(account_lease, e.until, str(e))
        return f"account rate-limited: {e}"
    if browser_opened and isinstance(e, Exception) and is_session_lost(e):
        node = rt.leases.resource_of(leases.of_pool(SELENIUM_POOL) or "", rt.now())
        if node is not None:
            node_lost(rt, node["url"], f"browser session lost: {type(e).__name__}")
        return f"browser session lost: {type(e).__name__}"
    return None
