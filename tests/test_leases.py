"""Leases: a state machine over ResourcePools, and one contract run over every lease backend."""

from datetime import timedelta

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, multiple, rule

from crawlsched.resources.backends.memory import MemoryLeaseBackend
from crawlsched.resources.backends.mongo import MongoLeaseBackend
from crawlsched.resources.pools import Need, ResourcePools
from crawlsched.resources.rules import ACCOUNT_POOL, POOLS, SELENIUM_POOL
from tests.support.factories import EMBEDDED, MONGOECO, NOW, open_store

TTL_S = 30
ACCOUNTS = {"twitter": 2, "instagram": 1}  # "tiktok" has none
NODES = 2


class LeasePoolMachine(RuleBasedStateMachine):
    """The model: for each resource, which lease (if any) was granted it last and until when."""

    leases = Bundle("leases")

    def __init__(self):
        super().__init__()
        self.backend = MemoryLeaseBackend()
        self.media_of = {}
        for media, n in ACCOUNTS.items():
            for i in range(n):
                rid = f"{media}/{i}"
                self.backend.add(ACCOUNT_POOL, rid, media_name=media, secret=f"pw-{rid}")
                self.media_of[rid] = media
        for i in range(NODES):
            self.backend.add(SELENIUM_POOL, f"node#{i}")
        self.capacity = {ACCOUNT_POOL: sum(ACCOUNTS.values()), SELENIUM_POOL: NODES}
        self.pools = ResourcePools(self.backend, ttl_s=TTL_S)
        self.now = NOW
        self.holder_count = 0
        self.current = {}  # (pool, resource id) -> lease id of its last, unreleased grant
        self.expires = {}  # lease id -> expiry

    def live(self):
        return {
            key: lease_id
            for key, lease_id in self.current.items()
            if self.expires[lease_id] > self.now
        }

    def free_accounts(self, media):
        held = {rid for (pool, rid) in self.live() if pool == ACCOUNT_POOL}
        return sum(1 for rid, m in self.media_of.items() if m == media and rid not in held)

    def free_nodes(self):
        return NODES - sum(1 for (pool, _) in self.live() if pool == SELENIUM_POOL)

    @rule(
        target=leases,
        login=st.booleans(),
        selenium=st.booleans(),
        media=st.sampled_from([*ACCOUNTS, "tiktok"]),
    )
    def acquire(self, login, selenium, media):
        self.holder_count += 1
        holder = f"dispatch-{self.holder_count}"
        held_before = {pool: self.backend.held(pool, self.now) for pool in POOLS}
        could = (not login or self.free_accounts(media) > 0) and (
            not selenium or self.free_nodes() > 0
        )

        granted = self.pools.acquire(Need(login, selenium, media), holder, self.now)

        if granted is None:
            # Refused only when something needed is really taken, and then nothing is held.
            assert not could
            assert {pool: self.backend.held(pool, self.now) for pool in POOLS} == held_before
            return multiple()
        assert could
        assert sorted(lease.pool for lease in granted) == sorted(
            [ACCOUNT_POOL] * login + [SELENIUM_POOL] * selenium
        )
        live = self.live()
        for lease in granted:
            assert (lease.pool, lease.resource_id) not in live, "a resource with two holders"
            assert lease.holder == holder
            assert lease.expires_at == self.now + timedelta(seconds=TTL_S)
            if lease.pool == ACCOUNT_POOL:
                assert self.media_of[lease.resource_id] == media
            self.current[(lease.pool, lease.resource_id)] = lease.lease_id
            self.expires[lease.lease_id] = lease.expires_at
        return multiple(*(lease.lease_id for lease in granted))

    def holds(self, lease_id):
        return lease_id in self.current.values()

    def key_of(self, lease_id):
        return next(key for key, held in self.current.items() if held == lease_id)

    @rule(lease_id=leases)
    def release(self, lease_id):
        expected = self.holds(lease_id)
        assert self.pools.release([lease_id]) == int(expected)
        if expected:
            del self.current[self.key_of(lease_id)]

    @rule(lease_id=leases)
    def renew(self, lease_id):
        expected = self.holds(lease_id) and self.expires[lease_id] > self.now
        assert self.backend.renew(lease_id, TTL_S, self.now) == expected
        if expected:
            self.expires[lease_id] = self.now + timedelta(seconds=TTL_S)

    @rule(lease_id=leases)
    def secret(self, lease_id):
        pool = lease_id.split(".")[0]
        live = self.holds(lease_id) and self.expires[lease_id] > self.now
        expected = f"pw-{self.key_of(lease_id)[1]}" if live and pool == ACCOUNT_POOL else None
        assert self.backend.secret(lease_id, self.now) == expected

    @rule(seconds=st.sampled_from([1, 10, TTL_S - 1, TTL_S, 2 * TTL_S]))
    def advance(self, seconds):
        self.now += timedelta(seconds=seconds)

    @rule()
    def expire(self):
        gone = [key for key, lease_id in self.current.items() if self.expires[lease_id] <= self.now]
        assert self.backend.expire(self.now) == len(gone)
        for key in gone:
            del self.current[key]

    @invariant()
    def held_never_exceeds_capacity_and_matches_the_model(self):
        live = self.live()
        for pool in POOLS:
            held = self.backend.held(pool, self.now)
            assert held <= self.capacity[pool]
            assert held == sum(1 for (p, _) in live if p == pool)


LeasePoolMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
test_lease_pools_state_machine = LeasePoolMachine.TestCase


# -- one contract, three backends ----------------------------------------------------------


class MemoryPool:
    def __init__(self):
        self.backend = MemoryLeaseBackend()

    def add_account(self, media, username, secret):
        self.backend.add(
            ACCOUNT_POOL, f"{media}/{username}", media_name=media, username=username, secret=secret
        )

    def add_node(self, url):
        self.backend.add(SELENIUM_POOL, f"{url}#0", url=url, slot=0)

    def username(self, resource_id):
        return resource_id.split("/")[1]


class MongoPool:
    def __init__(self, db):
        self.db = db
        self.backend = MongoLeaseBackend(db)
        self.backend.create_indexes()

    def add_account(self, media, username, secret):
        self.backend.add_account(media, username, secret)

    def add_node(self, url):
        self.backend.add_node(url)

    def username(self, resource_id):
        return self.db.accounts.find_one({"_id": resource_id})["username"]


@pytest.fixture(
    params=[
        "memory",
        "mongo-embedded",
        pytest.param("mongo-mongoeco", marks=pytest.mark.multiprocess),
    ]
)
def pool(request):
    if request.param == "memory":
        yield MemoryPool()
        return
    request.param = EMBEDDED if request.param == "mongo-embedded" else MONGOECO
    for store in open_store(request):
        yield MongoPool(store.db)


def at(seconds):
    return NOW + timedelta(seconds=seconds)


class TestLeaseBackendContract:
    def test_acquire_until_exhausted(self, pool):
        for user in ("a", "b", "c"):
            pool.add_account("twitter", user, "pw")
        pool.add_account("instagram", "d", "pw")
        backend = pool.backend

        leases = [backend.try_acquire(ACCOUNT_POOL, {"media_name": "twitter"}, "h", TTL_S, NOW)]
        leases += [backend.try_acquire(ACCOUNT_POOL, {"media_name": "twitter"}, "h", TTL_S, NOW)]
        leases += [backend.try_acquire(ACCOUNT_POOL, {"media_name": "twitter"}, "h", TTL_S, NOW)]

        assert None not in leases
        assert len({lease.resource_id for lease in leases}) == 3
        assert len({lease.lease_id for lease in leases}) == 3
        assert backend.try_acquire(ACCOUNT_POOL, {"media_name": "twitter"}, "h", TTL_S, NOW) is None
        assert backend.held(ACCOUNT_POOL, NOW) == 3
        assert backend.try_acquire(ACCOUNT_POOL, {"media_name": "instagram"}, "h", TTL_S, NOW)
        assert backend.held(ACCOUNT_POOL, NOW) == 4
        assert backend.held(SELENIUM_POOL, NOW) == 0
        assert backend.try_acquire(SELENIUM_POOL, {}, "h", TTL_S, NOW) is None

    def test_release_frees(self, pool):
        pool.add_node("http://node-1")
        backend = pool.backend
        first = backend.try_acquire(SELENIUM_POOL, {}, "h1", TTL_S, NOW)
        assert backend.try_acquire(SELENIUM_POOL, {}, "h2", TTL_S, NOW) is None

        assert backend.release(first.lease_id)
        assert not backend.release(first.lease_id)

        assert backend.held(SELENIUM_POOL, NOW) == 0
        second = backend.try_acquire(SELENIUM_POOL, {}, "h2", TTL_S, NOW)
        assert second.resource_id == first.resource_id
        assert not backend.release(first.lease_id)  # the old lease cannot free the new holder
        assert backend.held(SELENIUM_POOL, NOW) == 1

    def test_expired_lease_frees(self, pool):
        pool.add_account("twitter", "a", "pw")
        backend = pool.backend
        first = backend.try_acquire(ACCOUNT_POOL, {}, "h1", TTL_S, NOW)
        almost = at(TTL_S) - timedelta(milliseconds=1)
        assert backend.try_acquire(ACCOUNT_POOL, {}, "h2", TTL_S, almost) is None
        assert backend.held(ACCOUNT_POOL, almost) == 1
        assert backend.held(ACCOUNT_POOL, at(TTL_S)) == 0

        second = backend.try_acquire(ACCOUNT_POOL, {}, "h2", TTL_S, at(TTL_S))

        assert second is not None and second.resource_id == first.resource_id
        assert not backend.release(first.lease_id)
        assert backend.held(ACCOUNT_POOL, at(TTL_S)) == 1

    def test_renew_extends_a_live_lease_and_fails_on_an_expired_one(self, pool):
        pool.add_node("http://node-1")
        backend = pool.backend
        lease = backend.try_acquire(SELENIUM_POOL, {}, "h1", TTL_S, NOW)

        assert backend.renew(lease.lease_id, TTL_S, at(25))  # now until 55 s
        assert backend.try_acquire(SELENIUM_POOL, {}, "h2", TTL_S, at(40)) is None
        assert not backend.renew(lease.lease_id, TTL_S, at(55))  # expired at 55 s exactly
        assert backend.held(SELENIUM_POOL, at(55)) == 0
        assert backend.expire(at(55)) == 1
        assert not backend.renew(lease.lease_id, TTL_S, at(55))
        assert not backend.renew("selenium.unknown", TTL_S, NOW)

    def test_secret_only_for_a_live_account_lease(self, pool):
        pool.add_account("twitter", "a", "s3cret")
        pool.add_node("http://node-1")
        backend = pool.backend
        account = backend.try_acquire(ACCOUNT_POOL, {"media_name": "twitter"}, "h", TTL_S, NOW)
        node = backend.try_acquire(SELENIUM_POOL, {}, "h", TTL_S, NOW)

        assert backend.secret(account.lease_id, at(1)) == "s3cret"
        assert backend.secret(node.lease_id, at(1)) is None
        assert backend.secret(account.lease_id, at(TTL_S)) is None  # expired
        assert backend.secret("account.unknown", at(1)) is None
        backend.release(account.lease_id)
        assert backend.secret(account.lease_id, at(1)) is None

    def test_least_recently_leased_first(self, pool):
        for user in ("u1", "u2", "u3"):
            pool.add_account("twitter", user, "pw")
        backend = pool.backend

        def lease_and_release(seconds):
            lease = backend.try_acquire(ACCOUNT_POOL, {}, "h", TTL_S, at(seconds))
            backend.release(lease.lease_id)
            return pool.username(lease.resource_id)

        # Given each account leased once, at 1, 2 and 3 s (never-leased ones first)
        first_round = [
            pool.username(backend.try_acquire(ACCOUNT_POOL, {}, "h", TTL_S, at(s)).resource_id)
            for s in (1, 2, 3)
        ]
        assert sorted(first_round) == ["u1", "u2", "u3"]
        assert backend.expire(at(100)) == 3

        # Then the next leases go round in the same order: least recently leased first
        assert [lease_and_release(s) for s in (101, 102, 103, 104)] == [
            *first_round,
            first_round[0],
        ]
        # And an account never leased goes before all of them
        pool.add_account("twitter", "u4", "pw")
        assert lease_and_release(105) == "u4"
