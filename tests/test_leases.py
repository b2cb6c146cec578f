"""Leases: a state machine over the MongoDB lease backend, and a contract on every store backend.

The state machine drives acquire / release / renew / time passing / node down and up / account
ban, cooldown and rate limits against the real backend (on the embedded store), and checks after
every step: leases held ≤ capacity on every resource, an account never over max_concurrent, and
a cooling, banned or disabled account or a down or draining node never leased.
"""

from datetime import timedelta

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)
from pymongo.errors import DuplicateKeyError

from crawlsched.resources import rules
from crawlsched.resources.backends.mongo import MongoLeaseBackend
from crawlsched.resources.inventory import MongoPoolInventory
from crawlsched.resources.pools import Need, ResourcePools
from crawlsched.resources.rules import ACCOUNT_POOL, SELENIUM_POOL, AccountLimits
from crawlsched.resources.secrets import SecretBox, generate_key
from crawlsched.store.client import drop_embedded, open_database
from tests.support.factories import EMBEDDED, MONGOECO, NOW, open_store

TTL_S = 30
KEY = generate_key()
ACCOUNTS = {  # media -> [(username, limits)]; "tiktok" has none
    "twitter": [("t1", AccountLimits()), ("t2", AccountLimits(max_concurrent=2, cooldown_s=5))],
    "instagram": [("i1", AccountLimits(rate_uses=2, rate_window_s=20))],
}
NODES = {"http://node-a": 2, "http://node-b": 1}


def at(seconds: float):
    return NOW + timedelta(seconds=seconds)


def make_pools(db, now=NOW):
    secrets = SecretBox(KEY)
    backend = MongoLeaseBackend(db, secrets)
    backend.create_indexes()
    inventory = MongoPoolInventory(db, secrets)
    for media, accounts in ACCOUNTS.items():
        for username, limits in accounts:
            inventory.add_account(media, username, f"pw-{username}", limits, now)
    for url, capacity in NODES.items():
        inventory.add_node(url, "chromedriver", capacity, now)
    return backend, inventory


class LeasePoolMachine(RuleBasedStateMachine):
    leases = Bundle("leases")

    # A MongoDB server URL runs the machine there (set by the test below); else embedded.
    server_url: str | None = None
    server_db = "lease_machine"

    def __init__(self):
        super().__init__()
        if self.server_url is None:
            self.url = "mongomock://lease-machine"
            drop_embedded(self.url)
            self.db = open_database(self.url, "crawlsched")
        else:
            self.url = self.server_url
            self.db = open_database(self.url, self.server_db)
            self.db.raw.client.drop_database(self.server_db)
        self.backend, self.inventory = make_pools(self.db)
        self.pools = ResourcePools(self.backend, ttl_s=TTL_S)
        self.now = NOW
        self.holders = 0

    def teardown(self):
        if self.server_url is None:
            drop_embedded(self.url)
        else:
            self.db.raw.client.drop_database(self.server_db)

    # -- rules ------------------------------------------------------------------------------

    @rule(
        target=leases,
        login=st.booleans(),
        selenium=st.booleans(),
        media=st.sampled_from([*ACCOUNTS, "tiktok"]),
    )
    def acquire(self, login, selenium, media):
        self.holders += 1
        before = self._docs()
        could_login = any(
            rules.refusal(ACCOUNT_POOL, a, self.now) is None
            for a in before["accounts"]
            if a["media_name"] == media
        )
        could_node = any(rules.refusal(SELENIUM_POOL, n, self.now) is None for n in before["nodes"])
        could = (not login or could_login) and (not selenium or could_node)

        grant = self.pools.acquire(Need(login, selenium, media), f"h{self.holders}", self.now)

        if grant.leases is None:
            assert not could, "refused although every pool it needs had room"
            assert grant.short in {f"account:{media}", "selenium"}
            return multiple()
        assert could, "granted although a pool it needs had no room"
        assert sorted(lease.pool for lease in grant.leases) == sorted(
            [ACCOUNT_POOL] * login + [SELENIUM_POOL] * selenium
        )
        # Every resource granted was usable just before: never a cooling, banned, disabled or
        # rate-limited account, never a down or draining node, never one already full.
        by_id = {d["_id"]: d for docs in before.values() for d in docs}
        for lease in grant.leases:
            assert rules.refusal(lease.pool, by_id[lease.resource_id], self.now) is None
        return multiple(*(lease.lease_id for lease in grant.leases))

    @rule(lease_id=leases)
    def release(self, lease_id):
        self.backend.release(lease_id, self.now)
        assert self.backend.resource_of(lease_id, self.now) is None

    @rule(lease_id=leases)
    def renew(self, lease_id):
        live = self.backend.resource_of(lease_id, self.now) is not None
        assert self.backend.renew(lease_id, TTL_S, self.now) == live

    @rule(seconds=st.sampled_from([1, 5, 15, 31]))
    def time_passes(self, seconds):
        self.now = at((self.now - NOW).total_seconds() + seconds)

    @rule(url=st.sampled_from(sorted(NODES)), healthy=st.booleans())
    def probe(self, url, healthy):
        _, revoked = self.inventory.mark_node(url, healthy, "probe", self.now, None)
        if not healthy:
            assert not rules.live_leases(self.inventory.node(url), self.now)
        assert all(lease["expires_at"] > self.now for lease in revoked)

    @rule(url=st.sampled_from(sorted(NODES)), draining=st.booleans())
    def drain(self, url, draining):
        self.inventory.set_draining(url, draining)

    @rule(
        account=st.sampled_from([(m, u) for m, accts in ACCOUNTS.items() for u, _ in accts]),
        status=st.sampled_from(rules.ACCOUNT_STATUSES),
    )
    def operator_sets(self, account, status):
        self.inventory.set_account_status(*account, status, "test", self.now)

    @rule(lease_id=leases)
    def site_rejects_login(self, lease_id):
        if rules.pool_of(lease_id) == ACCOUNT_POOL:
            self.inventory.ban_by_lease(lease_id, "login rejected", self.now)

    @rule(lease_id=leases, seconds=st.sampled_from([3, 40]))
    def site_rate_limits(self, lease_id, seconds):
        if rules.pool_of(lease_id) == ACCOUNT_POOL:
            self.inventory.cool_by_lease(lease_id, at(seconds), "429")

    # -- invariants -------------------------------------------------------------------------

    def _docs(self):
        return {
            "accounts": list(self.db.accounts.find({})),
            "nodes": list(self.db.selenium_nodes.find({})),
        }

    @invariant()
    def never_over_capacity(self):
        docs = self._docs()
        for account in docs["accounts"]:
            assert len(rules.live_leases(account, self.now)) <= account["max_concurrent"]
        for node in docs["nodes"]:
            assert len(rules.live_leases(node, self.now)) <= node["capacity"]

    @invariant()
    def a_down_node_holds_no_lease(self):
        for node in self._docs()["nodes"]:
            if node["health"] == rules.DOWN:
                assert not rules.live_leases(node, self.now)


LeasePoolMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30)
test_lease_pools_state_machine = LeasePoolMachine.TestCase


@pytest.mark.multiprocess
def test_lease_pools_state_machine_on_the_mongodb_server(
    multiprocess_mongo_url, mongo_database_name
):
    """The same machine on the wire-protocol server (mongoeco, or a real mongod when
    CRAWLSCHED_TEST_MONGO_URL is set): the backend production uses, not the embedded store."""

    class OnServer(LeasePoolMachine):
        server_url = multiprocess_mongo_url
        server_db = mongo_database_name

    run_state_machine_as_test(OnServer, settings=settings(max_examples=8, stateful_step_count=20))


def test_a_banned_cooling_or_rate_limited_account_is_not_leased():
    url = "mongomock://banned-cooling"
    try:
        backend, inventory = make_pools(open_database(url, "crawlsched"))
        pools = ResourcePools(backend, TTL_S)
        twitter = Need(login=True, selenium=False, media_name="twitter")

        # Given t1 banned and t2 (max 2) leased twice
        inventory.set_account_status("twitter", "t1", rules.BANNED, "test", NOW)
        first = pools.acquire(twitter, "h1", NOW)
        second = pools.acquire(twitter, "h2", NOW)
        assert [lease.label for lease in first.leases + second.leases] == ["t2", "t2"]
        # Then nothing is left for a third
        assert pools.acquire(twitter, "h3", NOW).short == "account:twitter"
        # When one is released, t2 cools for 5 s, so still nothing
        pools.release(first.leases, NOW)
        assert pools.acquire(twitter, "h3", at(4.9)).leases is None
        # And after the cooldown it is leased again
        assert pools.acquire(twitter, "h3", at(5)).leases is not None

        # A rate window: 2 uses per 20 s on i1, whatever the releases in between
        insta = Need(login=True, selenium=False, media_name="instagram")
        for t in (0, 1):
            pools.release(pools.acquire(insta, f"i{t}", at(t)).leases, at(t))
        assert pools.acquire(insta, "i2", at(2)).short == "account:instagram"
        assert pools.acquire(insta, "i3", at(20)).leases is not None
    finally:
        drop_embedded(url)


# -- one contract, two store backends -----------------------------------------------------


@pytest.fixture(params=[EMBEDDED, pytest.param(MONGOECO, marks=pytest.mark.multiprocess)])
def pools(request):
    for store in open_store(request):
        backend, inventory = make_pools(store.db)
        yield backend, inventory, store.db


class TestLeaseBackendContract:
    def test_acquire_until_exhausted_and_release_frees(self, pools):
        backend, _, _ = pools
        grants = [backend.try_acquire(SELENIUM_POOL, {}, f"h{i}", TTL_S, NOW) for i in range(4)]
        assert grants[3] is None  # 2 + 1 slots
        assert sorted(g.label for g in grants[:3]) == ["http://node-a"] * 2 + ["http://node-b"]
        assert backend.held(SELENIUM_POOL, NOW) == 3

        assert backend.release(grants[0].lease_id, NOW)
        assert not backend.release(grants[0].lease_id, NOW)
        assert backend.held(SELENIUM_POOL, NOW) == 2
        again = backend.try_acquire(SELENIUM_POOL, {}, "h9", TTL_S, NOW)
        assert again is not None and again.label == grants[0].label

    def test_least_loaded_node_first(self, pools):
        backend, _, _ = pools
        first = backend.try_acquire(SELENIUM_POOL, {}, "h1", TTL_S, NOW)
        second = backend.try_acquire(SELENIUM_POOL, {}, "h2", TTL_S, at(1))
        # Both nodes empty at first: one each, never both on the same node while one is idle.
        assert {first.label, second.label} == set(NODES)

    def test_expired_lease_frees_and_cannot_be_renewed(self, pools):
        backend, _, _ = pools
        lease = backend.try_acquire(ACCOUNT_POOL, {"media_name": "instagram"}, "h", TTL_S, NOW)
        assert backend.renew(lease.lease_id, TTL_S, at(25))  # until 55 s
        assert (
            backend.try_acquire(ACCOUNT_POOL, {"media_name": "instagram"}, "x", TTL_S, at(40))
            is None
        )
        assert not backend.renew(lease.lease_id, TTL_S, at(55))
        assert backend.held(ACCOUNT_POOL, at(55)) == 0
        assert backend.expire(at(55)) == 1

    def test_expire_drops_only_expired_leases_from_every_document_and_counts_them(self, pools):
        backend, _, db = pools
        # node-a: one lease expiring at 10 s, one at 100 s; node-b: one at 10 s
        short = [backend.try_acquire(SELENIUM_POOL, {}, f"s{i}", 10, NOW) for i in range(2)]
        long = backend.try_acquire(SELENIUM_POOL, {}, "long", 100, NOW)
        assert {g.label for g in short} == set(NODES)
        assert long.label == "http://node-a"

        assert backend.expire(at(10)) == 2

        kept = {d["_id"]: [lease["id"] for lease in d["leases"]] for d in db.selenium_nodes.find()}
        assert kept == {"http://node-a": [long.lease_id], "http://node-b": []}
        assert backend.expire(at(10)) == 0

    def test_a_grant_names_its_holder_run_resource_and_expiry(self, pools):
        backend, _, _ = pools
        lease = backend.try_acquire(
            ACCOUNT_POOL, {"media_name": "instagram"}, "d-1", TTL_S, NOW, "run-1", "instagram"
        )
        assert (lease.pool, lease.holder, lease.run_id, lease.label) == (
            ACCOUNT_POOL, "d-1", "run-1", "i1",
        )  # fmt: skip
        assert lease.expires_at == at(TTL_S)

    def test_every_write_moves_the_version_so_a_decision_on_an_older_read_loses(self, pools):
        # Two workers decide on what they read; only the first write may take, whoever
        # wrote in between (a grant, a release, a renewal).
        backend, _, db = pools
        lease = backend.try_acquire(SELENIUM_POOL, {}, "h", TTL_S, NOW)
        read = db.selenium_nodes.find_one({"_id": lease.label})
        assert backend.release(lease.lease_id, at(1))
        assert not backend._cas(SELENIUM_POOL, read, {"capacity": 5})

        read = db.selenium_nodes.find_one({"_id": lease.label})
        assert backend._cas(SELENIUM_POOL, read, {"capacity": 5})
        assert not backend._cas(SELENIUM_POOL, read, {"capacity": 6})
        assert db.selenium_nodes.find_one({"_id": lease.label})["capacity"] == 5

    def test_a_renewal_that_keeps_losing_its_compare_and_set_gives_up_naming_the_lease(
        self, pools, monkeypatch
    ):
        backend, _, _ = pools
        lease = backend.try_acquire(SELENIUM_POOL, {}, "h", TTL_S, NOW)
        monkeypatch.setattr(backend, "_cas", lambda pool, doc, fields: False)
        with pytest.raises(RuntimeError, match=f"lease {lease.lease_id}: gave up after 16"):
            backend.renew(lease.lease_id, TTL_S, at(1))

    def test_one_account_is_stored_once_per_media_whoever_adds_it(self, pools):
        # Two `accounts add` racing would both upsert: the unique index keeps one document.
        _, inventory, db = pools
        assert not inventory.add_account("twitter", "t1", "again", AccountLimits(), at(1))
        with pytest.raises(DuplicateKeyError):
            db.accounts.insert_one({"media_name": "twitter", "username": "t1", "leases": []})
        assert db.accounts.count_documents({"media_name": "twitter", "username": "t1"}) == 1
        # The same name on another media is another account
        assert inventory.add_account("instagram", "t1", "pw", AccountLimits(), at(1))

    def test_the_resource_of_a_lease_comes_without_the_account_s_secret(self, pools):
        backend, _, _ = pools
        lease = backend.try_acquire(ACCOUNT_POOL, {"media_name": "instagram"}, "h", TTL_S, NOW)
        account = backend.resource_of(lease.lease_id, at(1))
        assert account["username"] == "i1"
        assert "secret_enc" not in account

    def test_secret_is_encrypted_at_rest_and_given_only_to_a_live_lease(self, pools):
        backend, _, db = pools
        stored = db.accounts.find_one({"username": "i1"})
        assert "pw-i1" not in repr(stored)
        lease = backend.try_acquire(ACCOUNT_POOL, {"media_name": "instagram"}, "h", TTL_S, NOW)
        node = backend.try_acquire(SELENIUM_POOL, {}, "h", TTL_S, NOW)
        assert backend.secret(lease.lease_id, at(1)) == "pw-i1"
        assert backend.secret(node.lease_id, at(1)) is None
        assert backend.secret(lease.lease_id, at(TTL_S)) is None
        backend.release(lease.lease_id, at(1))
        assert backend.secret(lease.lease_id, at(1)) is None

    def test_node_down_revokes_its_leases(self, pools):
        backend, inventory, _ = pools
        lease = backend.try_acquire(SELENIUM_POOL, {}, "h", TTL_S, NOW)
        _, revoked = inventory.mark_node(lease.label, False, "connection refused", at(1), None)
        assert [r["id"] for r in revoked] == [lease.lease_id]
        assert not backend.renew(lease.lease_id, TTL_S, at(2))
        others = [backend.try_acquire(SELENIUM_POOL, {}, f"o{i}", TTL_S, at(2)) for i in range(3)]
        assert all(o is None or o.label != lease.label for o in others)

    def test_release_holder_frees_what_a_crashed_admission_left(self, pools):
        backend, _, _ = pools
        backend.try_acquire(SELENIUM_POOL, {}, "dispatch-1", TTL_S, NOW)
        backend.try_acquire(ACCOUNT_POOL, {"media_name": "twitter"}, "dispatch-1", TTL_S, NOW)
        backend.try_acquire(SELENIUM_POOL, {}, "dispatch-2", TTL_S, NOW)
        assert backend.release_holder("dispatch-1", NOW) == 2
        assert backend.held(SELENIUM_POOL, NOW) == 1
        assert backend.held(ACCOUNT_POOL, NOW) == 0


@pytest.fixture
def mongoeco_store(request):
    request.param = MONGOECO
    yield from open_store(request)


@pytest.mark.multiprocess
def test_contention_two_processes_of_eight_threads_never_over_allocate(mongoeco_store):
    # Given a pool of 4 twitter accounts (t1 + t2 x2 + t3) on the shared server
    import json
    import subprocess
    import sys
    import time

    from tests.support.workers import REPO

    backend, inventory = make_pools(mongoeco_store.db)
    inventory.add_account("twitter", "t3", "pw", AccountLimits(), NOW)
    start_at = time.time() + 3
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.lease_worker",
                mongoeco_store.url,
                mongoeco_store.db_name,
                KEY,
                f"p{n}",
                "8",
                "32",
                str(start_at),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout))
    # When 16 threads lease and release as fast as they can
    # Then 512 lease cycles ran (a bounded count: the benchmark bench_pools runs many more),
    # none over capacity, and contention really happened
    assert sum(r["cycles"] for r in results) >= 512
    assert sum(r["over"] for r in results) == 0
    assert sum(r["refused"] for r in results) > 0
    assert backend.held(ACCOUNT_POOL, NOW) == 0
