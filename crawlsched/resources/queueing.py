"""Pure rules for batches that wait for a resource: what they need, who goes next, when to give up.

A waiting batch names the pools it needs as keys: `account:<media>` (accounts belong to one
media), `proxy` and `selenium`; a batch whose host another process holds also names `host:<origin>`,
woken when that process gives the host back. When a pool key runs short during an admission
pass, every batch that needs it is passed over for the rest of that pass; the others still
get their turn. Accounts locked for one task only (the site limited one endpoint) run short
under `account:<media>/<task>`: only the batches of that task are passed over.

Order (see `admission_key`): the planner's priority class first (human_validation, then
certitude, both higher first); within a class the run and the media holding the fewest leases
(so one big run cannot hold a pool); then the oldest job; then first come.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from crawlsched.resources.rules import ACCOUNT_POOL, PROXY_POOL, SELENIUM_POOL

SELENIUM_KEY = SELENIUM_POOL
PROXY_KEY = PROXY_POOL
HOST_PREFIX = "host:"


def host_wait_key(host: str) -> str:
    """`host:https://example.com:443`: what a batch waiting for a held host waits for."""
    return f"{HOST_PREFIX}{host}"


def account_key(media_name: str) -> str:
    return f"{ACCOUNT_POOL}:{media_name}"


def task_key(key: str, task: str) -> str:
    """`account:twitter/friend`: a pool short for one task only."""
    return f"{key}/{task}"


def pool_keys(
    need_login: bool, need_selenium: bool, media_name: str, need_proxy: bool = False
) -> frozenset[str]:
    keys = set()
    if need_login:
        keys.add(account_key(media_name))
    if need_selenium:
        keys.add(SELENIUM_KEY)
    if need_proxy:
        keys.add(PROXY_KEY)
    return frozenset(keys)


def describe_keys(keys: Iterable[str]) -> str:
    """`account pool (twitter) and selenium pool`: for reasons an operator reads."""
    parts = []
    for key in sorted(keys):
        if key.startswith(HOST_PREFIX):
            parts.append(f"host {key.removeprefix(HOST_PREFIX)}")
            continue
        pool, _, media = key.partition(":")
        media, _, task = media.partition("/")
        if task:
            parts.append(f"{pool} pool ({media}, for {task})")
            continue
        parts.append(f"{pool} pool ({media})" if media else f"{pool} pool")
    return " and ".join(parts)


@dataclass(frozen=True)
class WaitingBatch:
    dispatch_id: str
    run_id: str
    media_name: str
    needs: frozenset[str]
    enqueued_at: datetime
    wait_until: datetime
    human_validation: float = 0.0
    certitude: float = 0.0
    oldest_modified_at: datetime | None = None
    task: str = ""


@dataclass(frozen=True)
class Load:
    """Live leases per run and per media: who is being served right now."""

    by_run: Mapping[str, int]
    by_media: Mapping[str, int]

    @classmethod
    def of(cls, leases: Iterable[Mapping[str, Any]]) -> Load:
        by_run: Counter = Counter()
        by_media: Counter = Counter()
        for lease in leases:
            by_run[lease.get("run_id") or ""] += 1
            by_media[lease.get("media_name") or ""] += 1
        return cls(by_run, by_media)

    def plus(self, batch: WaitingBatch, leases: int) -> Load:
        by_run = Counter(self.by_run)
        by_media = Counter(self.by_media)
        by_run[batch.run_id] += leases
        by_media[batch.media_name] += leases
        return Load(by_run, by_media)


def admission_key(batch: WaitingBatch, load: Load) -> tuple:
    modified = batch.oldest_modified_at
    return (
        -batch.human_validation,
        -batch.certitude,
        load.by_run.get(batch.run_id, 0),
        load.by_media.get(batch.media_name, 0),
        modified is None,  # a job without a date goes after the dated ones of its class
        modified or batch.enqueued_at,
        batch.enqueued_at,
        batch.dispatch_id,
    )


def next_to_admit(
    waiting: Iterable[WaitingBatch], load: Load, short: Iterable[str] = ()
) -> WaitingBatch | None:
    """The batch to try next, skipping those that need a pool already found short."""
    blocked = set(short)
    candidates = [
        b
        for b in waiting
        if not (b.needs & blocked) and not ({task_key(k, b.task) for k in b.needs} & blocked)
    ]
    return min(candidates, key=lambda b: admission_key(b, load), default=None)


def wait_deadline(enqueued_at: datetime, max_wait_s: float) -> datetime:
    if not max_wait_s > 0:
        raise ValueError(f"max_wait_s must be > 0, got {max_wait_s}")
    return enqueued_at + timedelta(seconds=max_wait_s)
