"""Admission under contention on a bare `ResourcePools` (embedded store): how many acquire
attempts, store commands and milliseconds a granted batch costs with three needs (account,
browser slot, the account's proxy) against two (account, browser slot). For bench_proxies.
"""

from __future__ import annotations

import random
import time
import uuid

from crawlsched.resources.backends.mongo import MongoLeaseBackend
from crawlsched.resources.bindings import ProxyNeed
from crawlsched.resources.inventory import MongoPoolInventory
from crawlsched.resources.pools import Need, ResourcePools
from crawlsched.resources.proxy_inventory import MongoProxyInventory
from crawlsched.resources.queueing import PROXY_KEY, SELENIUM_KEY, account_key
from crawlsched.resources.rules import AccountLimits
from crawlsched.resources.secrets import SecretBox, generate_key
from crawlsched.store.client import drop_embedded, open_database
from tests.support.factories import NOW

MEDIA, TASK = "twitter", "friend"


def admission_loop(three_needs: bool, accounts: int, batches: int, seed: int) -> dict:
    """`batches` login + browser batches (and a proxy, with three needs) admitted over
    `accounts` accounts (bound one to one to their proxies, with three needs) and a node of
    accounts // 2 slots: oldest first, a batch behind a short pool waits (the gatekeepers'
    rule), and after each pass one running batch ends, drawn at random from the seed."""
    url = f"mongomock://bench-admission-{uuid.uuid4().hex[:8]}"
    try:
        db = open_database(url, "crawlsched")
        box = SecretBox(generate_key())
        backend = MongoLeaseBackend(db, box)
        backend.create_indexes()
        inventory, proxies = MongoPoolInventory(db, box), MongoProxyInventory(db, box)
        for n in range(accounts):
            inventory.add_account(MEDIA, f"a{n}", "pw", AccountLimits(), NOW)
            if three_needs:
                proxies.add_proxy(f"p{n}", f"http://127.0.0.1:{9000 + n}", NOW, "home", 0, 1)
                proxies.bind_account(MEDIA, f"a{n}", f"p{n}", None, NOW)
        inventory.add_node("http://node", "chromedriver", max(1, accounts // 2), NOW)
        pools = ResourcePools(backend, ttl_s=600)
        need = Need(True, True, MEDIA, ProxyNeed("home") if three_needs else None, TASK)
        need_keys = {account_key(MEDIA), SELENIUM_KEY} | ({PROXY_KEY} if three_needs else set())
        rng = random.Random(seed)
        waiting, running = [f"b{n}" for n in range(batches)], {}
        attempts = granted = 0
        commands_before = db.counter.boundary_total
        started = time.perf_counter()
        while waiting or running:
            short: set[str] = set()
            for holder in list(waiting):
                if need_keys & short:
                    break  # every batch needs the same pools: one short pool stops the pass
                attempts += 1
                grant = pools.acquire(need, holder, NOW)
                if grant.leases is None:
                    short.add(grant.short)
                    continue
                granted += 1
                waiting.remove(holder)
                running[holder] = grant.leases
            if running:
                pools.release(running.pop(rng.choice(sorted(running))), NOW)
        elapsed = time.perf_counter() - started
        commands = db.counter.boundary_total - commands_before
    finally:
        drop_embedded(url)
    return {
        "attempts_per_grant": attempts / granted,
        "commands_per_grant": commands / granted,  # acquires (failed ones too) and releases
        "ms_per_grant": 1000 * elapsed / granted,
    }


def compare(accounts: int, batches: int, seed: int, rounds: int = 3) -> dict[str, dict]:
    """Three needs and two, in alternating rounds (a busy machine slows both alike): the
    counts of the first round (the same in every round: the seed draws the same order), the
    median time."""
    measured: dict[str, list[dict]] = {"three": [], "two": []}
    for _ in range(rounds):
        for needs, figures in measured.items():
            figures.append(admission_loop(needs == "three", accounts, batches, seed))
    return {
        needs: {
            **figures[0],
            "ms_per_grant": sorted(f["ms_per_grant"] for f in figures)[len(figures) // 2],
        }
        for needs, figures in measured.items()
    }
