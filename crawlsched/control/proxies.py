"""The proxy pool: proxies listed with their health and load (never their passwords), added,
enabled, disabled and removed; each domain's proxy tier; accounts bound to a proxy or a group.

The same functions answer the API's routes and the command line on the store itself."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from crawlsched.control.pages import sliced
from crawlsched.encoding import plain
from crawlsched.errors import ProxyGroupNotFound
from crawlsched.resources import rules
from crawlsched.resources.bindings import binding_of
from crawlsched.resources.proxy_health import proxy_state
from crawlsched.resources.proxy_inventory import proxy_address
from crawlsched.runtime import Runtime


def _tied_accounts(rt: Runtime) -> dict[str, list[str]]:
    """`media/username` of the accounts tied to each proxy: bound to it by name, or keeping
    it as theirs (a group binding sticks to the proxy it last went out through)."""
    tied: dict[str, set[str]] = defaultdict(set)
    for account in rt.inventory.accounts():
        label = f"{account['media_name']}/{account['username']}"
        binding = binding_of(account)
        if binding is not None and binding[0] == "proxy":
            tied[binding[1]].add(label)
        if account.get("proxy_id"):
            tied[account["proxy_id"]].add(label)
    return {name: sorted(labels) for name, labels in tied.items()}


def proxy_rows(rt: Runtime) -> list[dict[str, Any]]:
    """Proxies with their state and load; the inventory never reads their passwords out."""
    now = rt.now()
    tied = _tied_accounts(rt)
    return [
        {
            "name": p["_id"],
            "url": p["url"],
            "username": p.get("username"),
            "group": p.get("group"),
            "tier": int(p.get("tier") or 0),
            "max_concurrent": rules.capacity_of(rules.PROXY_POOL, p),
            "enabled": p.get("enabled", True),
            "state": proxy_state(p, now),
            "failures": int(p.get("failures") or 0),
            "cooling_until": p.get("cooling_until"),
            "status_reason": p.get("status_reason"),
            "held": len(rules.live_leases(p, now)),
            "accounts": tied.get(p["_id"], []),
        }
        for p in rt.proxies.proxies()
    ]


def proxies(rt: Runtime, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    return sliced(proxy_rows(rt), limit, offset)


def add_proxy(
    rt: Runtime,
    name: str,
    url: str,
    group: str = "default",
    tier: int = 0,
    max_concurrent: int = 1,
    username: str | None = None,
    password: str | None = None,
) -> dict[str, Any]:
    """Add a proxy, or change one (its leases stay). The password is encrypted before anything
    is written, and never answered back; the URL carries no credentials (refused if it does)."""
    if password == "":
        raise ValueError("password: the password is empty")
    new = rt.proxies.add_proxy(name, url, rt.now(), group, tier, max_concurrent, username, password)
    return {"name": name, "url": proxy_address(url), "group": group, "added": new}


def proxy_state_set(rt: Runtime, name: str, enabled: bool) -> dict[str, Any]:
    """Enable a proxy (which also ends its rest: an operator's "it works now") or disable it
    (no new leases; the batches going out through it finish)."""
    doc = rt.proxies.set_enabled(name, enabled, rt.now())
    return {"name": name, "enabled": enabled, "state": proxy_state(doc, rt.now())}


def remove_proxy(rt: Runtime, name: str) -> dict[str, Any]:
    """Forget a proxy; the accounts bound to it are unbound, and batches going out through it
    lose their lease and wait again."""
    unbound = rt.proxies.remove_proxy(name)
    return {"name": name, "removed": True, "unbound_accounts": unbound}


def tiers(rt: Runtime) -> dict[str, Any]:
    """Each domain's proxy tier: where it is, its blocks in a row there, when it next tries the
    cheaper tier; and the tiers the enabled proxies offer."""
    rows = [
        {
            "domain": doc["_id"],
            "tier": int(doc.get("tier") or 0),
            "blocks": int(doc.get("blocks") or 0),
            "probe_at": doc.get("probe_at"),
            "probe_every_s": float(doc.get("probe_every_s") or 0.0),
            "updated_at": doc.get("updated_at"),
        }
        for doc in rt.proxies.tiers()
    ]
    return plain({"tiers": rt.proxies.tiers_of(None), "domains": rows})


def bind_account(
    rt: Runtime, media: str, username: str, proxy: str | None = None, group: str | None = None
) -> dict[str, Any]:
    """Bind an account to one proxy or to a group of proxies; neither given: unbind it. A site
    that sees one account from many addresses bans it: see `resources.bindings`."""
    if proxy is not None and group is not None:
        raise ValueError("bind an account to a proxy or to a group, not both")
    if group is not None and not rt.proxies.proxies(group):
        raise ProxyGroupNotFound(group)
    doc = rt.proxies.bind_account(media, username, proxy, group, rt.now())
    return {"media": media, "username": username, "binding": doc.get("proxy_binding")}
