"""The host store's lease costs one command per acquisition, renewal and release when nothing
stands in its way, and its one-command writes decide as the pure host rules do, on the embedded
store and on a server (mongoeco over the wire)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlsched.resources import host_rules
from crawlsched.resources.host_rules import Granted, HostPolicy, Refused
from crawlsched.store import host_filters
from crawlsched.store.client import open_database
from crawlsched.store.counting import CommandCounter, CountingDatabase
from crawlsched.store.host_docs import state_of
from crawlsched.store.hosts import MongoHostStore

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
A = "http://a.org:80"
POLICY = HostPolicy(1.0, 1)
_keys = itertools.count()


@pytest.fixture(params=["embedded", "server"])
def db(request: pytest.FixtureRequest) -> CountingDatabase:
    if request.param == "embedded":
        url = request.getfixturevalue("embedded_mongo_url")
    else:
        url = request.getfixturevalue("multiprocess_mongo_url")
    return open_database(url, request.getfixturevalue("mongo_database_name"), CommandCounter())


def _commands(db: CountingDatabase) -> dict[str, int]:
    counted = dict(db.counter.boundary)
    db.counter.reset()
    return counted


def test_a_host_changes_hands_with_one_command_per_grant_renewal_and_release(db):
    # Given a host two processes take turns on, each through a store of its own
    first, second = MongoHostStore(db), MongoHostStore(db)
    granted, _ = first.acquire(A, "p1", POLICY, NOW, 10.0)  # (the host's document is made)
    first.release(A, "p1", NOW + timedelta(seconds=5), 1, NOW + timedelta(seconds=1))
    _commands(db)
    # When the other process takes it, renews it and gives it back
    later = NOW + timedelta(seconds=2)
    granted, _ = second.acquire(A, "p2", POLICY, later, 10.0)
    assert isinstance(granted, Granted)
    assert granted.first_start == NOW + timedelta(seconds=5)  # the delay carries over
    taken = _commands(db)
    renewed = second.renew(A, "p2", later + timedelta(seconds=6), 10.0, pages=3)
    assert renewed is not None
    kept = _commands(db)
    second.release(A, "p2", later + timedelta(seconds=7), 2, later + timedelta(seconds=7))
    given_back = _commands(db)
    # Then each is one conditional write, no read first (by compare-and-set on a version read
    # first, taking a host cost 2 commands, 3 for a process that had held it before)
    assert taken == {"find_one_and_update": 1}
    assert kept == {"find_one_and_update": 1}
    assert given_back == {"find_one_and_update": 1}
    # And the store counted every page of the day and freed the host
    doc = db.hosts.find_one({"_id": A})
    assert (doc["holder"], doc["pages_today"], doc["in_flight"]) == (None, 6, 0)


def test_a_refused_asker_marks_the_host_wanted_once_and_the_holder_then_hands_it_over(db):
    # Given a holder, and another process refused twice
    holder, other = MongoHostStore(db), MongoHostStore(db)
    holder.acquire(A, "p1", POLICY, NOW, 10.0)
    _commands(db)
    refused, _ = other.acquire(A, "p2", POLICY, NOW + timedelta(seconds=1), 10.0)
    first_ask = _commands(db)
    again, _ = other.acquire(A, "p2", POLICY, NOW + timedelta(seconds=2), 10.0)
    second_ask = _commands(db)
    # Then a refusal is a grant that does not match and a write marking the host wanted that
    # does, no read (a read and a write before, and the grant that lost: 3 commands)
    assert isinstance(refused, Refused) and refused.held and again.held
    assert refused.until == again.until == NOW + timedelta(seconds=10)
    assert first_ask == second_ask == {"find_one_and_update": 2}
    assert db.hosts.find_one({"_id": A})["wanted_at"] == NOW + timedelta(seconds=2)
    # And the holder's renewal is refused (read to be sure), and its release lets p2 in
    assert holder.renew(A, "p1", NOW + timedelta(seconds=6), 10.0) is None
    holder.release(A, "p1", NOW + timedelta(seconds=7), 1, NOW + timedelta(seconds=7))
    granted, _ = other.acquire(A, "p2", POLICY, NOW + timedelta(seconds=7), 10.0)
    assert isinstance(granted, Granted)


def test_an_asker_refused_before_for_a_live_holder_is_refused_again_in_one_command(db):
    # Given a holder with a 10 s slice, and another process refused once for it
    holder, other = MongoHostStore(db), MongoHostStore(db)
    holder.acquire(A, "p1", POLICY, NOW, 10.0)
    other.acquire(A, "p2", POLICY, NOW + timedelta(seconds=1), 10.0)
    _commands(db)
    # When it asks again within that slice, saying it was refused for a holder
    again, _ = other.acquire(A, "p2", POLICY, NOW + timedelta(seconds=2), 10.0, held_elsewhere=True)
    hinted = _commands(db)
    # Then the write marking the host wanted goes first and is the refusal: one command
    assert isinstance(again, Refused) and again.held and again.until == NOW + timedelta(seconds=10)
    assert hinted == {"find_one_and_update": 1}
    # And once the holder gave the host back, the same hint costs the one write that does not
    # match before the grant: the host is granted all the same
    holder.release(A, "p1", NOW + timedelta(seconds=3), 1, NOW + timedelta(seconds=3))
    _commands(db)
    at = NOW + timedelta(seconds=4)
    granted, _ = other.acquire(A, "p2", POLICY, at, 10.0, held_elsewhere=True)
    assert isinstance(granted, Granted) and granted.first_start == at
    assert _commands(db) == {"find_one_and_update": 2}
    assert db.hosts.find_one({"_id": A})["holder"] == "p2"


def test_work_parked_for_a_holder_marks_the_host_wanted_so_its_release_wakes_it(db):
    # Given a host p1 holds for a 10 s slice, and p2 parking work until p1 gives it back
    # (p2 never asked for it: it handed the host over at the end of its own slice)
    holder, parked = MongoHostStore(db), MongoHostStore(db)
    holder.acquire(A, "p1", POLICY, NOW, 10.0)
    _commands(db)
    until = parked.wait_for(A, "p2", NOW + timedelta(seconds=1))
    # Then p2 learns the slice's end in one write that also marks the host wanted
    assert until == NOW + timedelta(seconds=10)
    assert _commands(db) == {"find_one_and_update": 1}
    # And p1 does not renew, and its release says somebody waits (so it runs a wake pass)
    assert holder.renew(A, "p1", NOW + timedelta(seconds=6), 10.0) is None
    assert holder.release(A, "p1", None, 1, NOW + timedelta(seconds=7)) is True
    # And a free host, or one the caller holds itself, is waited for by nobody
    assert parked.wait_for(A, "p2", NOW + timedelta(seconds=8)) is None
    holder.acquire(A, "p1", POLICY, NOW + timedelta(seconds=8), 10.0)
    assert holder.wait_for(A, "p1", NOW + timedelta(seconds=9)) is None
    assert db.hosts.find_one({"_id": A})["wanted_at"] is None


def test_a_grant_keeps_to_the_hosts_own_limits_set_by_another_process(db):
    # Given a host this process took once, and an operator who then set its own limits
    store = MongoHostStore(db)
    store.acquire(A, "p1", POLICY, NOW, 10.0)
    store.release(A, "p1", None, 0, NOW)
    MongoHostStore(db).set_policy(A, {"delay_s": 8.0, "daily_pages": 5}, NOW)
    # When this process takes it again, its knowledge of the limits out of date
    granted, effective = store.acquire(A, "p1", POLICY, NOW + timedelta(seconds=1), 10.0)
    # Then the grant is made under the host's limits: a slice fitting three of its delays
    assert effective == HostPolicy(8.0, 1, 5)
    assert granted.lease_until == NOW + timedelta(seconds=25)
    assert granted.pages_left == 5


def test_the_first_count_of_a_new_day_is_read_and_decided_then_counts_in_one_write(db):
    # Given a host whose pages were counted yesterday, held again just before midnight
    store, budget = MongoHostStore(db), HostPolicy(1.0, 1, 10)
    evening = datetime(2026, 3, 1, 23, 59, 50, tzinfo=UTC)
    store.acquire(A, "p1", budget, evening - timedelta(hours=1), 10.0)
    store.release(A, "p1", None, 7, evening - timedelta(hours=1))
    store.acquire(A, "p1", budget, evening, 30.0)
    # When its renewal after midnight counts 2 pages sent, and the next one 1 more
    _commands(db)
    first = store.renew(A, "p1", evening + timedelta(seconds=15), 30.0, 2, policy=budget)
    on_a_new_day = _commands(db)
    second = store.renew(A, "p1", evening + timedelta(seconds=25), 30.0, 1, policy=budget)
    # Then the pages count for the new day (yesterday's 7 do not), and only the first count
    # of the day needed a read
    assert (first.pages_left, second.pages_left) == (8, 7)
    assert on_a_new_day == {"find_one_and_update": 1, "find_one": 1, "update_one": 1}
    assert _commands(db) == {"find_one_and_update": 1}
    assert db.hosts.find_one({"_id": A})["day"] == "2026-03-02"


# -- the filters state the rules -----------------------------------------------------------------

offsets = st.one_of(st.none(), st.integers(-30, 30))
states = st.fixed_dictionaries(
    {
        "holder": st.sampled_from([None, "p1", "p2"]),
        "lease_until": offsets,
        "lease_granted_at": offsets,
        "wanted_at": offsets,
        "blocked_until": offsets,
        "day": st.sampled_from(["", host_rules.day_of(NOW), "2026-02-28"]),
        "pages_today": st.integers(0, 6),
    }
)


def _document(fields: dict) -> dict:
    doc = dict(fields)
    for name in ("lease_until", "lease_granted_at", "wanted_at", "blocked_until"):
        if doc[name] is not None:
            doc[name] = NOW + timedelta(seconds=doc[name])
    return doc


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(fields=states, daily=st.sampled_from([0, 3, 5]), holder=st.sampled_from(["p1", "p2"]))
def test_the_grant_and_renewal_filters_match_where_the_rules_say_yes(db, fields, daily, holder):
    # Given a host's document in any state
    key = f"h{next(_keys)}"
    doc = _document(fields)
    db.hosts.raw.insert_one({"_id": key, **doc})
    policy = HostPolicy(1.0, 1, daily)
    state = state_of(doc)

    def matches(condition: dict) -> bool:
        return db.hosts.raw.find_one({"_id": key, "$and": [condition]}) is not None

    # Then the grant's filter matches exactly where the rule grants, and the request's exactly
    # where it refuses for a live holder alone
    decision = host_rules.decide(state, policy, holder, NOW, 10.0)
    assert matches(host_filters.grantable(holder, policy, NOW)) == isinstance(decision, Granted)
    held = isinstance(decision, Refused) and decision.held
    assert matches(host_filters.held_elsewhere(holder, policy, NOW)) == held
    # And the renewal's matches only where the rule renews, and wherever nobody asked
    may_renew = host_rules.may_renew(state, holder, NOW)
    if matches(host_filters.renewable(holder, NOW)):
        assert may_renew
    elif doc["wanted_at"] is None:
        assert not may_renew


def test_a_shorter_block_leaves_a_longer_one_in_force_and_a_release_frees_only_its_own(db):
    # Given a host blocked for a minute (a 429 with Retry-After: 60)
    hosts = MongoHostStore(db)
    hosts.acquire(A, "p1", POLICY, NOW, 10.0)
    end, began = hosts.block(A, NOW + timedelta(seconds=60), "HTTP 429", NOW)
    assert (end, began) == (NOW + timedelta(seconds=60), True)
    # When another answer blocks it for ten seconds only
    end, began = hosts.block(A, NOW + timedelta(seconds=10), "HTTP 503", NOW + timedelta(seconds=1))
    # Then the longer block stands: nobody may send before it ends
    assert (end, began) == (NOW + timedelta(seconds=60), False)
    assert db.hosts.find_one({"_id": A})["blocked_until"] == NOW + timedelta(seconds=60)
    # And when p1's slice ran out and p2 holds the host, p1's late release frees nothing of it
    later = NOW + timedelta(seconds=61)
    granted, _ = hosts.acquire(A, "p2", POLICY, later, 10.0)
    assert isinstance(granted, Granted)
    hosts.release(A, "p1", None, 0, later + timedelta(seconds=1))
    doc = db.hosts.find_one({"_id": A})
    assert doc["holder"] == "p2" and doc["lease_until"] > later + timedelta(seconds=1)
