"""Pure rules for which proxy a batch goes out through, and which account with which proxy.

A site that sees one account arrive from many addresses, or many accounts from one, bans them.
So an account can be *bound* (`proxy_binding` on its document):

- to one proxy (`{"proxy": name}`): it goes out through that proxy only, and waits while the
  proxy is busy or resting;
- to a group (`{"group": name}`): it keeps the proxy it last used (`proxy_id`) while that proxy
  is healthy, waiting while it is busy rather than moving; only when the proxy rests, is
  disabled or gone does it move, to the group's proxy the fewest accounts keep.

Whatever the binding, an account's live leases all go out by one route, one proxy or none
(`rules.refusal` refuses a lease asking for another), so no site sees an account from two
addresses at once. A batch of
a media that routes through proxies with an unbound account, or with no account, takes any
proxy of its media's group on its domain's tier (`proxy_tiers`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from crawlsched.resources import rules
from crawlsched.resources.proxy_health import ACTIVE, proxy_state
from crawlsched.resources.rules import ACCOUNT_POOL, PROXY_POOL

Doc = Mapping[str, Any]


@dataclass(frozen=True)
class ProxyNeed:
    """A media's need of a proxy: its group (None: any) and its domain's tier (None: any)."""

    group: str | None = None
    tier: int | None = None

    def admits(self, proxy: Doc) -> bool:
        group_ok = self.group is None or proxy.get("group") == self.group
        return group_ok and (self.tier is None or int(proxy.get("tier") or 0) == self.tier)


def group_of(media: Doc | None) -> str | None:
    """The proxy group a media row's `proxy` setting names (None: any group, or no setting)."""
    return ((media or {}).get("proxy") or {}).get("group")


def binding_of(account: Doc) -> tuple[str, str] | None:
    """("proxy", name) or ("group", name), or None for an unbound account."""
    binding = account.get("proxy_binding") or {}
    for kind in ("proxy", "group"):
        if isinstance(binding.get(kind), str) and binding[kind]:
            return kind, binding[kind]
    return None


def _admits(binding: tuple[str, str] | None, need: ProxyNeed | None, proxy: Doc) -> bool:
    """Whether a batch of this binding (else this need) may go out through `proxy`."""
    if binding is not None:
        kind, name = binding
        return proxy["_id"] == name if kind == "proxy" else proxy.get("group") == name
    return need is not None and need.group in (None, proxy.get("group"))


def _free(proxy: Doc | None, now: datetime) -> bool:
    return proxy is not None and rules.refusal(PROXY_POOL, proxy, now) is None


def kept_by(accounts: Sequence[Doc]) -> Counter[str]:
    """How many accounts keep each proxy as theirs: bound to it, or last out through it."""
    kept: Counter[str] = Counter()
    for account in accounts:
        binding = binding_of(account)
        own = binding[1] if binding and binding[0] == "proxy" else account.get("proxy_id")
        if own:
            kept[own] += 1
    return kept


def proxies_for(
    account: Doc | None,
    proxies: Sequence[Doc],
    need: ProxyNeed | None,
    now: datetime,
    kept: Mapping[str, int] | None = None,
) -> list[Doc | None]:
    """The proxies this account (or, with None, a batch with no account) may lease now, best
    first; `[None]` when it goes out through no proxy, `[]` when it must wait."""
    by_id = {p["_id"]: p for p in proxies}
    binding = None if account is None else binding_of(account)
    if account is not None and (routes := rules.routes_in_use(account, now)):
        # In use: the same route or none (wait), if this batch may take that route at all.
        route = next(iter(routes))  # one at most (`rules.refusal`)
        if route is None:  # from the worker's own address
            return [None] if binding is None and need is None else []
        proxy = by_id.get(route)
        allowed = proxy is not None and _admits(binding, need, proxy)
        return [proxy] if allowed and _free(proxy, now) else []
    if binding is not None and binding[0] == "proxy":
        proxy = by_id.get(binding[1])
        return [proxy] if _free(proxy, now) else []
    if binding is not None:
        members = [p for p in proxies if p.get("group") == binding[1]]
        own = by_id.get(account.get("proxy_id")) if account is not None else None
        if own is not None and own in members and proxy_state(own, now) == ACTIVE:
            return [own] if _free(own, now) else []  # keep the address: wait, do not move
        counts = kept or {}
        free = [p for p in members if _free(p, now)]
        return sorted(
            free, key=lambda p: (counts.get(p["_id"], 0), rules.load_key(PROXY_POOL, p, now))
        )
    if need is None:
        return [None]
    return list(rules.choose(PROXY_POOL, [p for p in proxies if need.admits(p)], now))


def pairs(
    accounts: Sequence[Doc],
    proxies: Sequence[Doc],
    need: ProxyNeed | None,
    task: str,
    now: datetime,
) -> list[tuple[Doc, Doc | None]]:
    """(account, proxy or None) pairs that may be leased together now, best first: the
    accounts in the pool's order, each with its proxies."""
    kept = kept_by(accounts)
    out: list[tuple[Doc, Doc | None]] = []
    for account in sorted(accounts, key=lambda a: rules.load_key(ACCOUNT_POOL, a, now)):
        for proxy in proxies_for(account, proxies, need, now, kept):
            proxy_id = None if proxy is None else proxy["_id"]
            if rules.refusal(ACCOUNT_POOL, account, now, task, proxy_id) is None:
                out.append((account, proxy))
    return out


def short_of(accounts: Sequence[Doc], task: str, now: datetime) -> str:
    """What ran short when no pair could be leased: the accounts, or their proxies."""
    for account in accounts:
        routes = rules.routes_in_use(account, now)
        route = next(iter(routes)) if len(routes) == 1 else None
        if rules.refusal(ACCOUNT_POOL, account, now, task, route) is None:
            return PROXY_POOL
    return ACCOUNT_POOL
