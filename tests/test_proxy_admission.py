"""Admission with proxies: a batch's account, the proxy it goes out through and its browser
slot are leased together or not at all, on the real lease backend (embedded store).

A hypothesis state machine admits and releases batches of random needs over accounts bound to
a proxy, bound to a group or unbound, proxies of small concurrency, and one node. After every
step: no account is leased through two proxies at once, no proxy holds more leases than its
concurrency, every admitted batch holds all it needs (never a part), and a bound account only
ever goes out through its binding. Then the machine releases everything and admits again in
the waiting order: every batch that could ever be served is (no deadlock), and a batch passed
over keeps its place until served (no starvation).
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from crawlsched.resources import rules
from crawlsched.resources.backends.mongo import MongoLeaseBackend
from crawlsched.resources.bindings import ProxyNeed
from crawlsched.resources.inventory import MongoPoolInventory
from crawlsched.resources.pools import Need, ResourcePools
from crawlsched.resources.proxy_inventory import MongoProxyInventory
from crawlsched.resources.queueing import PROXY_KEY, SELENIUM_KEY, account_key
from crawlsched.resources.rules import ACCOUNT_POOL, PROXY_POOL, SELENIUM_POOL, AccountLimits
from crawlsched.resources.secrets import SecretBox, generate_key
from crawlsched.store.client import drop_embedded, open_database
from tests.support.factories import NOW

KEY = generate_key()
# name -> (group, concurrency)
MEDIA = "social"
PROXIES = {"p1": ("dc", 1), "p2": ("dc", 2), "p3": ("home", 1), "p4": ("dc", 2)}
ACCOUNTS = {  # username -> (binding, max_concurrent)
    "bound-p1": ({"proxy": "p1"}, 2),
    "bound-dc": ({"group": "dc"}, 2),
    "bound-home": ({"group": "home"}, 1),
    "free": (None, 2),  # unbound: any proxy of its need, but one at a time
}
NEEDS = st.sampled_from(
    [
        Need(True, False, MEDIA, ProxyNeed("dc"), "profile"),
        Need(True, True, MEDIA, ProxyNeed("dc"), "friend"),
        Need(False, False, MEDIA, ProxyNeed("dc"), "profile"),
        Need(False, True, MEDIA, ProxyNeed(None), "profile"),
        Need(True, False, MEDIA, None, "friend"),
    ]
)


def fresh_pools():
    url = f"mongomock://{uuid.uuid4().hex}"
    db = open_database(url, "crawlsched")
    secrets = SecretBox(KEY)
    backend = MongoLeaseBackend(db, secrets)
    backend.create_indexes()
    accounts, proxies = MongoPoolInventory(db, secrets), MongoProxyInventory(db, secrets)
    for name, (group, concurrency) in PROXIES.items():
        proxies.add_proxy(name, f"http://127.0.0.1:{9000 + len(name)}", NOW, group, 0, concurrency)
    for username, (binding, concurrent) in ACCOUNTS.items():
        accounts.add_account(MEDIA, username, "pw", AccountLimits(max_concurrent=concurrent), NOW)
        if binding is not None:
            proxies.bind_account(MEDIA, username, binding.get("proxy"), binding.get("group"), NOW)
    accounts.add_node("http://node", "chromedriver", 2, NOW)
    return url, db, backend, ResourcePools(backend, ttl_s=600)


class ProxyAdmission(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.url, self.db, self.backend, self.pools = fresh_pools()
        self.now = NOW
        self.waiting: list[tuple[str, Need]] = []  # in arrival order
        self.running: dict[str, tuple[Need, list[rules.Lease]]] = {}
        self.shorts: Counter[str] = Counter()
        self.arrived = 0  # holders are numbered: replays of an example must draw alike

    def teardown(self) -> None:
        drop_embedded(self.url)

    @rule(need=NEEDS)
    def arrive(self, need: Need) -> None:
        self.arrived += 1
        self.waiting.append((f"batch-{self.arrived:04d}", need))

    @rule()
    def admission_pass(self) -> None:
        """Oldest first; a batch whose pool ran short waits, and so do the batches behind it
        that need that pool (the gatekeepers' rule)."""
        short: set[str] = set()
        for holder, need in list(self.waiting):
            if keys(need) & short:
                continue
            grant = self.pools.acquire(need, holder, self.now)
            if grant.leases is None:
                short.add(grant.short)
                self.shorts[grant.short] += 1
                continue
            self.waiting.remove((holder, need))
            self.running[holder] = (need, grant.leases)

    @rule(data=st.data())
    def finish(self, data) -> None:
        if self.running:
            holder = data.draw(st.sampled_from(sorted(self.running)))
            _, leases = self.running.pop(holder)
            self.pools.release(leases, self.now)

    @rule(seconds=st.integers(1, 30))
    def time_passes(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @invariant()
    def one_proxy_per_account_and_no_proxy_over_its_concurrency(self) -> None:
        for account in self.db.accounts.find():
            used = {lease.get("proxy_id") for lease in rules.live_leases(account, self.now)}
            assert len(used) <= 1, (account["username"], used)
            binding = account.get("proxy_binding") or {}
            if "proxy" in binding:
                assert used <= {binding["proxy"]}
            if "group" in binding:
                assert all(PROXIES[p][0] == binding["group"] for p in used)
        for proxy in self.db.proxies.find():
            assert len(rules.live_leases(proxy, self.now)) <= proxy["max_concurrent"]

    @invariant()
    def every_admitted_batch_holds_all_it_needs(self) -> None:
        for need, leases in self.running.values():
            pools = Counter(lease.pool for lease in leases)
            assert pools[ACCOUNT_POOL] == int(need.login)
            assert pools[SELENIUM_POOL] == int(need.selenium)
            account = next((lease for lease in leases if lease.pool == ACCOUNT_POOL), None)
            wants_proxy = need.proxy is not None or (
                account is not None and ACCOUNTS[account.label][0] is not None
            )
            assert pools[PROXY_POOL] == int(wants_proxy)
            if account is not None and wants_proxy:
                proxy = next(lease for lease in leases if lease.pool == PROXY_POOL)
                assert account.proxy_id == proxy.resource_id  # the one it goes out through

    def drain(self) -> None:
        """Everything running ends; passes go on until nothing more can be admitted."""
        for _, leases in self.running.values():
            self.pools.release(leases, self.now)
        self.running.clear()
        for _ in range(len(self.waiting) + 1):
            before = len(self.waiting)
            first = self.waiting[0] if self.waiting else None
            self.admission_pass()
            if first is not None:
                # The oldest batch is never passed over while the pools are empty of others'
                # leases: it is served in the first pass after everything ends.
                assert first not in self.waiting, f"{first[1]} waits with nothing held"
            for _, leases in self.running.values():
                self.pools.release(leases, self.now)
            self.running.clear()
            if not self.waiting or len(self.waiting) == before:
                break
        assert self.waiting == [], "a batch could not be admitted although nothing was held"


def keys(need: Need) -> set[str]:
    out = set()
    if need.login:
        out.add(account_key(need.media_name))
    if need.selenium:
        out.add(SELENIUM_KEY)
    if need.proxy is not None:
        out.add(PROXY_KEY)
    return out


def test_proxy_admission_state_machine():
    class Machine(ProxyAdmission):
        def teardown(self) -> None:
            try:
                self.drain()
            finally:
                super().teardown()

    run_state_machine_as_test(Machine, settings=settings(max_examples=40, stateful_step_count=25))


def test_an_account_in_use_waits_for_its_proxy_rather_than_going_out_through_another():
    url, db, _backend, pools = fresh_pools()
    try:
        login = Need(True, False, MEDIA, ProxyNeed("dc"), "profile")
        for username in ("bound-p1", "bound-dc", "bound-home"):  # only the unbound one serves
            db.accounts.update_one({"username": username}, {"$set": {"status": "disabled"}})
        first = pools.acquire(login, "first", NOW)
        [account, proxy] = first.leases
        assert (account.label, account.proxy_id) == ("free", proxy.resource_id)
        # Its proxy is now full, while the group has room elsewhere
        db.proxies.update_one({"_id": proxy.resource_id}, {"$set": {"max_concurrent": 1}})

        # Then the account's second batch waits for that proxy, and says so
        second = pools.acquire(login, "second", NOW)
        assert second.leases is None and second.short == PROXY_KEY
        # Once its first batch ends, it may go out through any free proxy of the group
        pools.release(first.leases, NOW)
        third = pools.acquire(login, "third", NOW)
        assert third.leases is not None and third.leases[0].label == "free"
    finally:
        drop_embedded(url)
