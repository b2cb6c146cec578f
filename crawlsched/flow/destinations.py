"""Where operators point crawlsched — webhooks, notice servers, Selenium nodes — checked
with the one address rule (`outbound.addresses`) when they are set.

Each is checked again whenever it is used, where the connection is made: a webhook by the
checked HTTP client (`drivers.net`), a notice at the socket (`outbound.socket_guard`), a
node by the checked probe client and before each browser session opens. Webhooks and notice
servers follow the crawl's networks (`CRAWLSCHED_TARGET_ALLOW_NETWORKS`); nodes, which are
infrastructure on a private network more often than not, have their own
(`CRAWLSCHED_NODE_ALLOW_NETWORKS`), so allowing a node's network never lets a crawl in.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from crawlsched.errors import HostUnresolvable, UnsafeTarget
from crawlsched.outbound.addresses import (
    TARGETS,
    IpNetwork,
    Resolver,
    check_host,
    parse_networks,
    resolve,
)
from crawlsched.settings import Settings

NODES = "CRAWLSCHED_NODE_ALLOW_NETWORKS"


def check_when_set(
    hosts: Iterable[tuple[str, int]],
    allowed: tuple[IpNetwork, ...],
    shown: str,
    resolver: Resolver = resolve,
) -> None:
    """Refuse (UnsafeTarget, naming `shown`, never the URL) a server that resolves to a
    refused address. A name that resolves to nothing now has nothing to check: it is checked
    when it is used (a service's server may be named before its DNS is)."""
    for host, port in hosts:
        try:
            check_host(host, port, allowed, resolver, where=shown, setting=TARGETS)
        except HostUnresolvable:
            continue


def url_host(url: str) -> tuple[str, int]:
    """(host, port) of an http(s) URL, the scheme's port when none is given."""
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def node_networks(settings: Settings) -> tuple[IpNetwork, ...]:
    return parse_networks(settings.node_allow_networks)


def check_node(settings: Settings, url: str, resolver: Resolver = resolve) -> None:
    """Before a node is added, and before each browser session on it: every address of its
    host must be allowed (UnsafeTarget naming CRAWLSCHED_NODE_ALLOW_NETWORKS)."""
    host, port = url_host(url)
    if not host:
        raise UnsafeTarget(f"node URL without a host: {url[:200]!r}")
    where = f"{urlsplit(url).scheme}://{host}:{port}"
    check_host(host, port, node_networks(settings), resolver, where=where, setting=NODES)
