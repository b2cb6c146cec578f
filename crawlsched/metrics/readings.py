"""Pure: fold store documents into gauge readings (no I/O; `now` is an argument).

The store gauges are Airflow's pool metrics and more: per pool and media the capacity that is
usable now (`open_slots` = capacity - held), the leases held (`running_slots`), the batches and
jobs waiting (`queued_slots`) with the oldest wait, and those already past their wait bound
(`starving_tasks`: the next tick starves them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from crawlsched.planning.due import Category
from crawlsched.resources import rules
from crawlsched.resources.proxy_health import ACTIVE, COOLING, DISABLED, proxy_state

NODE_STATES = (rules.UP, rules.DOWN, rules.UNKNOWN, "draining", "disabled")
PROXY_STATES = (ACTIVE, COOLING, DISABLED)
UNPLANNABLE = "unplannable"  # due, but its media or task row is missing or disabled


@dataclass
class Waiting:
    batches: int = 0
    jobs: int = 0
    overdue: int = 0
    oldest_s: float = 0.0


def pool_labels(key: str) -> tuple[str, str]:
    """A pool key (`account:<media>`, `selenium` or `proxy`) as the labels (pool, media). Hosts
    (`host:<origin>`) are one pool with no media label: a crawl meets hosts without end, and a
    label per origin would be a series per origin."""
    pool, _, media = key.partition(":")
    if pool == "host":
        return pool, ""
    return pool, media.partition("/")[0]  # a pool short for one task is its media's


# Open runs shown one by one in the gauges: the busiest ones, so a deployment with many small
# schedules still exports a bounded number of series.
TOP_RUNS = 20


def hosts_by_state(docs: Iterable[Mapping[str, Any]], now: datetime) -> dict[str, int]:
    """Hosts blocked now (a 429/503 or an operator) and held now by a worker process."""
    blocked = held = 0
    for doc in docs:
        until = doc.get("blocked_until")
        blocked += until is not None and until > now
        lease_until = doc.get("lease_until")
        held += bool(doc.get("holder")) and lease_until is not None and lease_until > now
    return {"blocked": blocked, "held": held}


def busiest_runs(runs: Iterable[Mapping[str, Any]], limit: int = TOP_RUNS) -> list[dict]:
    """The open runs with the most pages outstanding (then the newest first): schedule, run,
    outstanding, discovered."""
    rows = [
        {
            "schedule": str(run.get("schedule_id") or ""),
            "run": str(run["_id"]),
            "outstanding": max(int(run.get("outstanding") or 0), 0),
            "discovered": int(run.get("discovered") or 0),
        }
        for run in runs
    ]
    rows.sort(key=lambda r: (-r["outstanding"], r["run"]))
    return rows[:limit]


def due_by_category(
    groups: Iterable[tuple[str, str, int]],
    media_rows: Iterable[Mapping[str, Any]],
    task_rows: Iterable[Mapping[str, Any]],
) -> Counter:
    """(task, media, due jobs) → due jobs per (task, category), as the planner would route them."""
    media_ids = {
        m["media_name"]: m.get("media_name_id")
        for m in media_rows
        if m.get("enabled") is not False and "media_name" in m
    }
    flags = {
        (t.get("media_name_id"), t.get("name")): Category.of(
            t.get("need_login") is True, t.get("need_selenium") is True
        ).value
        for t in task_rows
        if t.get("enabled") is not False
    }
    due: Counter = Counter()
    for task, media, n in groups:
        key = (media_ids.get(media), task) if media in media_ids else None
        due[(task, flags.get(key, UNPLANNABLE))] += n
    return due


def waiting_by_pool(docs: Iterable[Mapping[str, Any]], now: datetime) -> dict:
    """Waiting batches per (pool, media) they need: counts, jobs, overdue, oldest wait (s)."""
    out: dict[tuple[str, str], Waiting] = {}
    for doc in docs:
        waited = max((now - doc["enqueued_at"]).total_seconds(), 0.0)
        overdue = doc.get("wait_until") is not None and doc["wait_until"] <= now
        for key in doc.get("needs") or ():
            entry = out.setdefault(pool_labels(key), Waiting())
            entry.batches += 1
            entry.jobs += int(doc.get("jobs") or 0)
            entry.overdue += overdue
            entry.oldest_s = max(entry.oldest_s, waited)
    return out


def account_pool(accounts: Iterable[Mapping[str, Any]], now: datetime) -> tuple[dict, Counter]:
    """Per media: (usable capacity, leases held); and accounts per (media, state)."""
    slots: dict[tuple[str, str], list[int]] = {}
    states: Counter = Counter()
    for account in accounts:
        media = str(account.get("media_name", ""))
        state = rules.account_state(account, now)
        states[(media, state)] += 1
        entry = slots.setdefault((rules.ACCOUNT_POOL, media), [0, 0])
        if state == rules.ACTIVE:
            entry[0] += rules.capacity_of(rules.ACCOUNT_POOL, account)
        entry[1] += len(rules.live_leases(account, now))
    return {k: tuple(v) for k, v in slots.items()}, states


def node_pool(nodes: Iterable[Mapping[str, Any]], now: datetime) -> tuple[dict, Counter]:
    """The Selenium pool: (usable capacity, leases held); and nodes per state."""
    capacity = held = 0
    states: Counter = Counter()
    for node in nodes:
        state = rules.node_state(node)
        states[state] += 1
        if state == rules.UP:
            capacity += rules.capacity_of(rules.SELENIUM_POOL, node)
        held += len(rules.live_leases(node, now))
    return {(rules.SELENIUM_POOL, ""): (capacity, held)}, states


def proxy_pool(proxies: Iterable[Mapping[str, Any]], now: datetime) -> tuple[dict, Counter]:
    """The proxy pool: (usable capacity: the active proxies', leases held); and proxies per
    state (active, cooling after failures, disabled)."""
    capacity = held = 0
    states: Counter = Counter(dict.fromkeys(PROXY_STATES, 0))
    for proxy in proxies:
        state = proxy_state(proxy, now)
        states[state] += 1
        if state == ACTIVE:
            capacity += rules.capacity_of(rules.PROXY_POOL, proxy)
        held += len(rules.live_leases(proxy, now))
    return {(rules.PROXY_POOL, ""): (capacity, held)}, states
