"""What a batch shows a site: the proxy it goes out through, and its account's login session.

Before the crawl (`identity_of`): the batch's proxy lease gives the client through that proxy
(its address checked against CRAWLSCHED_PROXY_ALLOW_NETWORKS) and a watch on its answers; the
account lease gives its kept session, when one is young enough, used fewer times than
allowed and made through this same proxy (a site that sees a session move address bans it).

After it (`settle`): a proxy that answered and never failed starts its failures over, and its
domain's tier hears the answer (a probe of a cheaper tier that worked moves the domain down).
The account's session, fresh or kept, is stored again (encrypted) for its next batches.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from crawlsched import metrics
from crawlsched.crawl.resources import Leases, ResourceLost
from crawlsched.drivers.context import CrawlContext
from crawlsched.drivers.proxied import BlockSigns, ProxyWatch, cookie_rows
from crawlsched.drivers.upstream import Upstream
from crawlsched.errors import HostUnresolvable, UnsafeTarget
from crawlsched.flow.destinations import url_host
from crawlsched.flow.resource_events import proxy_failed
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.outbound.addresses import check_host, parse_networks
from crawlsched.resources.bindings import group_of
from crawlsched.resources.rules import ACCOUNT_POOL, PROXY_POOL
from crawlsched.runtime import Runtime

log = get_logger(__name__)
PROXIES = "CRAWLSCHED_PROXY_ALLOW_NETWORKS"


@dataclass(frozen=True)
class Identity:
    proxy_lease: str | None = None
    proxy: tuple[httpx.Client, ProxyWatch] | None = None
    kept_session: dict[str, Any] | None = None
    # Where the batch's browser goes out: its filtering proxy chains to the leased proxy.
    upstream: Upstream | None = None


def identity_of(rt: Runtime, message: BatchMessage, leases: Leases, media: dict) -> Identity:
    proxy_lease = leases.of_pool(PROXY_POOL)
    if proxy_lease is None:
        if message.need_proxy:
            raise ResourceLost(f"media {message.media_name} goes out through proxies only")
        return Identity(kept_session=_kept_session(rt, leases, None))
    now = rt.now()
    route = rt.leases.proxy_route(proxy_lease, now)
    if route is None:
        raise ResourceLost("proxy lease revoked or expired")
    host, port = url_host(route["url"])  # its port is always given (`proxy_address`)
    try:
        allowed = parse_networks(rt.settings.proxy_allow_networks)
        check_host(host, port, allowed, rt.resolver, where=route["name"], setting=PROXIES)
    except (UnsafeTarget, HostUnresolvable, OSError) as e:
        proxy_failed(rt, proxy_lease, f"proxy address refused: {e}", blocked=False, media=None)
        raise ResourceLost(f"proxy {route['name']} refused: {e}") from None
    client = rt.proxy_clients.client(route["url"], route["username"], route["password"])
    watch = ProxyWatch(route["name"], route["tier"], BlockSigns.of(media.get("proxy")))
    upstream = None
    if route["url"].startswith("http://"):
        upstream = Upstream.from_url(route["url"], route["username"], route["password"])
    kept = _kept_session(rt, leases, route["name"])
    return Identity(proxy_lease, (client, watch), kept, upstream)


def _kept_session(rt: Runtime, leases: Leases, proxy_name: str | None) -> dict | None:
    settings = rt.settings
    account_lease = leases.of_pool(ACCOUNT_POOL)
    if account_lease is None or settings.session_max_age_s <= 0:
        return None
    now = rt.now()
    kept = rt.leases.session(account_lease, now)
    if kept is None:
        return None
    age_s = (now - kept["started_at"]).total_seconds()
    if age_s > settings.session_max_age_s or kept["uses"] >= settings.session_max_uses:
        return None
    if kept.get("proxy_id") != proxy_name:
        return None  # made through another address: a site would see the session move
    return kept


@contextlib.contextmanager
def settled(
    rt: Runtime, message: BatchMessage, leases: Leases, identity: Identity, context: CrawlContext
) -> Iterator[None]:
    """`settle` once the crawl inside has ended, however it ended."""
    try:
        yield
    finally:
        settle(rt, message, leases, identity, context)


def settle(
    rt: Runtime, message: BatchMessage, leases: Leases, identity: Identity, context: CrawlContext
) -> None:
    """After the crawl, before the leases go back (see the module docstring)."""
    now = rt.now()
    if identity.proxy is not None and identity.proxy_lease is not None:
        watch = identity.proxy[1]
        if watch.failure is None and watch.answers:
            rt.proxies.answered_by_lease(identity.proxy_lease, now)
            if message.need_proxy:
                group = group_of(rt.media(message.media_name))
                rt.proxies.record_tier(message.media_name, group, watch.tier, False, now)
    reused = context.session_kept and context.logins == 0
    metrics.account_logins(context.logins, reused)
    account_lease = leases.of_pool(ACCOUNT_POOL)
    http = context.opened_http
    if account_lease is None or http is None or rt.settings.session_max_age_s <= 0:
        return
    if context.logins:
        started, uses = now, 1
    elif identity.kept_session is not None and context.session_kept:
        started, uses = identity.kept_session["started_at"], identity.kept_session["uses"] + 1
    else:
        return
    rows = cookie_rows(http.session)
    if rows:
        proxy_name = None if identity.proxy is None else identity.proxy[1].name
        rt.leases.keep_session(account_lease, {"cookies": rows}, started, uses, proxy_name)
