"""Hosts as the cluster paces them: each one's limits in force, holder, block and pages today;
an operator blocks, unblocks and sets limits of its own.

A host is named loosely (`example.com`, `127.0.0.1:8102`, an origin): the store says which of
the keys the name may mean was crawled (`resources.host_names`). A change to a host never
crawled is refused unless asked for (`new`): a typo would otherwise pace a host nobody meant.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from crawlsched.control.pages import sliced
from crawlsched.encoding import plain
from crawlsched.flow import views
from crawlsched.resources import host_rules
from crawlsched.resources.host_names import host_candidates
from crawlsched.runtime import Runtime

MAX_BLOCK_S = 30 * 86400


def resolve(rt: Runtime, host: str, new: bool = False) -> str:
    """The key of the host `host` names: the first of its candidates the store knows; with
    `new`, the only (or first schemeless) candidate for a host never crawled."""
    candidates = host_candidates(host)
    for key in candidates:
        if rt.hosts.get(key) is not None:
            return key
    if new:
        ports = {key.rsplit(":", 1)[1] for key in candidates}
        if len(candidates) > 1 and len(ports) == 1:  # a port of its own: either scheme
            raise ValueError(
                f"{host!r} names {' or '.join(candidates)}: give the scheme of the one meant"
            )
        return candidates[0]
    named = " or ".join(candidates)
    raise LookupError(f"no host {named}: nothing was crawled there yet")


def page(rt: Runtime, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    return sliced(views.host_rows(rt), limit, offset)


def get(rt: Runtime, host: str) -> dict[str, Any]:
    return plain(views.host_row(rt, rt.hosts.get(resolve(rt, host))))


def _known(rt: Runtime, host: str, new: bool, what: str) -> str:
    try:
        return resolve(rt, host, new)
    except LookupError as e:
        raise LookupError(f"{e} (to {what} before its first crawl: --new)") from None


def block(
    rt: Runtime,
    host: str,
    for_s: float = 3600.0,
    reason: str = "blocked by an operator",
    new: bool = False,
) -> dict[str, Any]:
    """Stop every worker from sending to the host for `for_s` seconds."""
    if not 1 <= for_s <= MAX_BLOCK_S:
        raise ValueError(f"for_s: between 1 and {MAX_BLOCK_S} seconds, got {for_s:g}")
    key = _known(rt, host, new, "block it")
    now = rt.now()
    until, _began = rt.hosts.block(key, now + timedelta(seconds=for_s), reason, now)
    return plain({"host": key, "blocked_until": until, "blocked_reason": reason})


def unblock(rt: Runtime, host: str) -> dict[str, Any]:
    """Lift a block (an operator's, or a 429's) and reset the host's backoff."""
    key = resolve(rt, host)
    rt.hosts.unblock(key, rt.now())
    return {"host": key, "blocked_until": None}


def set_limits(
    rt: Runtime,
    host: str,
    delay_s: float | None = None,
    concurrency: int | None = None,
    daily_pages: int | None = None,
    clear: bool = False,
    new: bool = False,
) -> dict[str, Any]:
    """Give the host limits of its own (over its media's and the settings'), or forget them
    (`clear`)."""
    given = {"delay_s": delay_s, "concurrency": concurrency, "daily_pages": daily_pages}
    if clear == any(v is not None for v in given.values()):
        raise ValueError("give delay_s, concurrency or daily_pages, or clear alone")
    if not clear:
        # The same bounds as a media's politeness (ValueError naming the field).
        current = host_rules.HostPolicy(1.0, 1)
        host_rules.HostPolicy(
            delay_s if delay_s is not None else current.delay_s,
            concurrency if concurrency is not None else current.concurrency,
            daily_pages if daily_pages is not None else 0,
        )
    key = _known(rt, host, new, "set its limits")
    limits = (
        dict.fromkeys(host_rules.POLICY_KEYS)
        if clear
        else {k: v for k, v in given.items() if v is not None}
    )
    if "delay_s" in limits and limits["delay_s"] is not None:
        limits["delay_s"] = float(limits["delay_s"])
    doc = rt.hosts.set_policy(key, limits, rt.now())
    return plain(views.host_row(rt, doc))
