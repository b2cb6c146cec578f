"""Leases across the flow: grant, renewal while a batch runs, loss mid-batch, release, cooldown,
the starvation bound across re-parks, and the order in which waiting batches are admitted.

Real admission and crawl code (`flow.admission`, `crawl.batch`) on the embedded store, one
thread, with an injected clock: the runtime's clock and the monotonic clock the lease keeper
reads both follow the test's `Clock`, which only the test (or the test's driver) moves. The
driver is a plug-in of this module (`DRIVERS`), scripted per test.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
import structlog

from crawlsched.catalog import JobState
from crawlsched.crawl.batch import crawl_batch
from crawlsched.crawl.records import bounds_of
from crawlsched.demo.seed import demo_reference
from crawlsched.drivers.base import LoginRejected, RateLimited
from crawlsched.drivers.context import CrawlBounds
from crawlsched.flow.admission import (
    admit,
    admit_waiting,
    keys_of,
    park,
    requeue,
    starve,
    starve_overdue,
)
from crawlsched.messages import BatchMessage
from crawlsched.resources import rules
from crawlsched.resources.backends.mongo import MongoLeaseBackend
from crawlsched.resources.pools import Need, ResourcePools
from crawlsched.resources.queueing import Load, WaitingBatch, next_to_admit
from crawlsched.resources.rules import ACCOUNT_POOL, SELENIUM_POOL, AccountLimits
from crawlsched.runtime import Runtime
from crawlsched.store.waiting import TAKE_HOLD_S
from tests.conftest import settings_for_tests
from tests.support.claimed import Clock, claimed_batch
from tests.support.factories import NOW

TTL_S = 30.0
WAIT_S = 100.0
NODE = "http://node-a"
RUN = "lease-flow@20240601T120000Z"


# -- the scripted driver ---------------------------------------------------------------------

# What the driver does per job: set by each test, called with (job index, job).
SCRIPT: dict[str, Callable] = {}


class ScriptedDriver:
    def crawl(self, job, context) -> None:
        index = int(job.target.split("-")[0].removeprefix("job"))
        SCRIPT["step"](index, job)


DRIVERS = {"lease-flow": ScriptedDriver}


@pytest.fixture
def clock(monkeypatch):
    clock = Clock(NOW)
    # The lease keeper throttles renewals on the monotonic clock: it follows the test's clock.
    yield clock
    SCRIPT.clear()


@pytest.fixture
def rt(embedded_mongo_url, clock):
    settings = settings_for_tests(
        mongo_url=embedded_mongo_url,
        broker_url="stub://",
        resource_lease_s=TTL_S,
        admission_wait_s=WAIT_S,
        driver_modules=["tests.test_lease_flow"],
    )
    rt = Runtime(settings, env=clock.env())
    rt.create_indexes()
    rt.reference.load(demo_reference("http://127.0.0.1:9"))
    rt.inventory.add_account("twitter", "acct", "secret", AccountLimits(), clock.now())
    rt.inventory.add_node(NODE, "chromedriver", 1, clock.now())
    return rt


def _batch(rt, n: int, login=True, selenium=True) -> BatchMessage:
    """n twitter jobs claimed by a fresh dispatch of RUN, as the planner leaves them."""
    return claimed_batch(
        rt, n, run_id=RUN, driver_class="lease-flow", login=login, selenium=selenium
    )


def _admitted(rt, message: BatchMessage) -> BatchMessage:
    """Park the batch and run an admission pass; the crawl message it forwards."""
    sent: list[BatchMessage] = []
    assert admit(rt, message, sent.append) == 1
    (forwarded,) = sent
    assert len(forwarded.lease_ids) == message.need_login + message.need_selenium
    return forwarded


def _crawl(rt, message: BatchMessage) -> dict[str, int]:
    return crawl_batch(rt, message, report=lambda report: None)


def _held(rt) -> tuple[int, int]:
    now = rt.now()
    return rt.leases.held(ACCOUNT_POOL, now), rt.leases.held(SELENIUM_POOL, now)


def _outcomes(rt, message: BatchMessage) -> dict[str, str]:
    docs = rt.db.profiles.find({"_id": {"$in": message.decoded_job_ids()}})
    return {d["target"].split("-")[0]: d.get("last_outcome") for d in docs}


def _waiting_jobs(rt) -> list[dict]:
    """The batches waiting now, each with the targets of its jobs."""
    out = []
    for doc in rt.db.waiting_batches.find({}):
        message = BatchMessage.parse(doc["message"])
        targets = sorted(
            d["target"].split("-")[0]
            for d in rt.db.profiles.find({"_id": {"$in": message.decoded_job_ids()}})
        )
        out.append({**doc, "targets": targets})
    return out


# -- all or nothing --------------------------------------------------------------------------


def test_a_refused_grant_leaves_nothing_held(rt, clock):
    # Given the only node taken, while the account is free
    other = rt.pools.acquire(Need(False, True, "twitter"), "other", clock.now())
    assert other.leases is not None
    # When a batch needing both asks: the account is granted first, then the node is short
    grant = rt.pools.acquire(Need(True, True, "twitter"), "both", clock.now())
    # Then it gets nothing and holds nothing: the account it was granted went back at once
    assert (grant.leases, grant.short) == (None, "selenium")
    assert _held(rt) == (0, 1)
    assert rt.leases.live_leases(clock.now(), (ACCOUNT_POOL,)) == []
    # And the account is free for a batch that needs only it
    assert rt.pools.acquire(Need(True, False, "twitter"), "login", clock.now()).leases


def test_a_grant_that_fails_midway_leaves_nothing_held(rt, clock, monkeypatch):
    backend = rt.leases
    real = MongoLeaseBackend.try_acquire

    def failing(self, pool, *args, **kwargs):
        if pool == SELENIUM_POOL:
            raise ConnectionError("store lost")
        return real(self, pool, *args, **kwargs)

    monkeypatch.setattr(MongoLeaseBackend, "try_acquire", failing)
    with pytest.raises(ConnectionError):
        ResourcePools(backend, TTL_S).acquire(Need(True, True, "twitter"), "h", clock.now())
    assert _held(rt) == (0, 0)


# -- renewal while a batch outlives its TTL --------------------------------------------------


def test_leases_are_renewed_while_a_batch_outlives_their_ttl(rt, clock):
    message = _admitted(rt, _batch(rt, 8))
    seen: list[tuple[int, bool, bool]] = []

    def step(index, job):
        # 12 s per job: the batch runs 96 s against a 30 s TTL. Both leases must still be
        # live, and still this batch's, at every job.
        clock.advance(12)
        live = [rt.leases.resource_of(lid, clock.now()) is not None for lid in message.lease_ids]
        seen.append((index, *live))

    SCRIPT["step"] = step
    counts = _crawl(rt, message)

    assert counts == {"succeeded": 8}
    assert seen == [(i, True, True) for i in range(8)]
    assert not _waiting_jobs(rt)


# -- a lease lost mid-batch sends the rest back to wait --------------------------------------


def _lose_at(rt, clock, message, lose_index: int, lose: Callable[[], None]) -> None:
    """Run a 5-job batch, 12 s per job, calling `lose()` during job `lose_index`."""

    def step(index, job):
        clock.advance(12)
        if index == lose_index:
            lose()

    SCRIPT["step"] = step
    _crawl(rt, message)


@pytest.mark.parametrize(
    "how",
    ["node_found_down", "node_removed", "leases_expired"],
)
def test_a_lease_lost_mid_batch_sends_the_rest_back_to_wait(rt, clock, how):
    message = _admitted(rt, _batch(rt, 5))
    lose = {
        "node_found_down": lambda: rt.inventory.mark_node(
            NODE, False, "probe failed", clock.now(), None
        ),
        "node_removed": lambda: rt.inventory.remove_node(NODE),
        # the worker stalled past the TTL (the keeper could not renew in time)
        "leases_expired": lambda: clock.advance(TTL_S + 1),
    }[how]
    _lose_at(rt, clock, message, 2, lose)

    # The jobs crawled before the loss are done, job 2 also (it ran to its end); the rest were
    # not failed, they wait, under a dispatch of their own, for another resource.
    outcomes = _outcomes(rt, message)
    assert outcomes == {
        "job0": "succeeded",
        "job1": "succeeded",
        "job2": "succeeded",
        "job3": None,
        "job4": None,
    }
    (waiting,) = _waiting_jobs(rt)
    assert waiting["targets"] == ["job3", "job4"]
    assert waiting["_id"] != message.dispatch_id
    assert _held(rt) == (0, 0)


def test_a_draining_node_lets_the_running_batch_finish(rt, clock):
    message = _admitted(rt, _batch(rt, 4))
    _lose_at(rt, clock, message, 1, lambda: rt.inventory.set_draining(NODE, True))
    assert set(_outcomes(rt, message).values()) == {"succeeded"}
    assert not _waiting_jobs(rt)


def test_an_account_the_site_rejects_is_banned_and_the_rest_waits(rt, clock):
    message = _admitted(rt, _batch(rt, 4))

    def step(index, job):
        clock.advance(1)
        if index == 1:
            raise LoginRejected("wrong password")

    SCRIPT["step"] = step
    _crawl(rt, message)

    (account,) = rt.inventory.accounts("twitter")
    assert account["status"] == rules.BANNED
    assert _outcomes(rt, message) == {"job0": "succeeded", "job1": None, "job2": None, "job3": None}
    (waiting,) = _waiting_jobs(rt)
    assert waiting["targets"] == ["job1", "job2", "job3"]
    assert _held(rt) == (0, 0)


# -- every lease released --------------------------------------------------------------------


@pytest.mark.parametrize("ending", ["finished", "interrupted", "job_failed"])
def test_every_lease_of_a_two_lease_batch_is_released(rt, clock, ending):
    message = _admitted(rt, _batch(rt, 3))
    assert _held(rt) == (1, 1)

    def step(index, job):
        clock.advance(1)
        if index == 1 and ending == "interrupted":
            raise RateLimited(clock.at(10))
        if index == 1 and ending == "job_failed":
            raise ValueError("one job's failure")

    SCRIPT["step"] = step
    _crawl(rt, message)

    assert _held(rt) == (0, 0)
    for lease_id in message.lease_ids:
        assert rt.leases.resource_of(lease_id, clock.now()) is None


# -- a cooldown the site imposes -------------------------------------------------------------


def test_a_site_cooldown_keeps_the_account_out_until_it_ends(rt, clock):
    until = clock.at(300)
    message = _admitted(rt, _batch(rt, 3, selenium=False))

    def step(index, job):
        clock.advance(1)
        if index == 1:
            raise RateLimited(until, "429 too many requests")

    SCRIPT["step"] = step
    _crawl(rt, message)

    (account,) = rt.inventory.accounts("twitter")
    assert account["cooling_until"].replace(tzinfo=until.tzinfo) == until
    (waiting,) = _waiting_jobs(rt)
    assert waiting["targets"] == ["job1", "job2"]
    keys = keys_of(message)
    sent: list[BatchMessage] = []
    # Not a moment before `until`, whatever passes are run ...
    for seconds in (3, 60, 299, 299.999):
        clock.t = clock.at(seconds)
        assert admit_waiting(rt, keys, sent.append) == 0
        assert rt.pools.acquire(Need(True, False, "twitter"), "probe", clock.now()).leases is None
    # ... and from `until` on, the rest of the batch is admitted on that account.
    clock.t = until
    assert admit_waiting(rt, keys, sent.append) == 1
    (resumed,) = sent
    assert len(resumed.lease_ids) == 1


# -- the starvation bound counts from the first park -----------------------------------------


def test_the_wait_bound_counts_from_the_first_park_across_re_parks(rt, clock):
    message = _admitted(rt, _batch(rt, 5))  # parked (first park) and admitted at t=0
    assert message.first_parked_at == clock.at(0)
    # Loses its node in job 1 (t=24): jobs 2-4 are parked again
    _lose_at(
        rt, clock, message, 1, lambda: rt.inventory.mark_node(NODE, False, "x", clock.now(), None)
    )
    (parked,) = _waiting_jobs(rt)
    assert parked["targets"] == ["job2", "job3", "job4"]

    # A new node: the rest is admitted at t=30, and loses it in its first job (t=42)
    clock.t = clock.at(30)
    rt.inventory.add_node("http://node-b", "chromedriver", 1, clock.now())
    sent: list[BatchMessage] = []
    assert admit_waiting(rt, keys_of(message), sent.append) == 1
    (rest,) = sent
    assert rest.first_parked_at == clock.at(0)
    _lose_at(rt, clock, rest, 2, lambda: rt.inventory.remove_node("http://node-b"))
    (parked,) = _waiting_jobs(rt)
    assert parked["targets"] == ["job3", "job4"]

    # Its bound is the first park + WAIT_S, not a re-park + WAIT_S
    deadline = clock.at(WAIT_S)
    assert parked["wait_until"].replace(tzinfo=NOW.tzinfo) == deadline
    reports: list = []
    clock.t = deadline - timedelta(milliseconds=1)
    assert starve_overdue(rt, reports.append) == 0
    clock.t = deadline
    assert starve_overdue(rt, reports.append) == 1
    assert len(reports) == 1
    assert _waiting_jobs(rt) == []


# -- the order of admission ------------------------------------------------------------------


def _waiting(name: str, **fields) -> WaitingBatch:
    base = {
        "dispatch_id": name,
        "run_id": f"run-{name}",
        "media_name": f"media-{name}",
        "needs": frozenset({"selenium"}),
        "enqueued_at": NOW,
        "wait_until": NOW + timedelta(hours=1),
    }
    return WaitingBatch(**{**base, **fields})


def _first(*batches: WaitingBatch, load: Load | None = None) -> str:
    chosen = next_to_admit(batches, load or Load({}, {}))
    assert chosen is not None
    return chosen.dispatch_id


def test_the_least_served_run_goes_before_the_least_served_media():
    a = _waiting("a", run_id="r1", media_name="m1")
    b = _waiting("b", run_id="r2", media_name="m2")
    # r1 holds nothing but its media m1 holds much; r2 holds one lease, its media none
    load = Load({"r2": 1}, {"m1": 5})
    assert _first(a, b, load=load) == _first(b, a, load=load) == "a"
    # With runs even, the least-served media goes first
    assert _first(a, b, load=Load({"r1": 1, "r2": 1}, {"m1": 5})) == "b"


def test_fairness_comes_after_the_priority_class():
    a = _waiting("a", run_id="r1", human_validation=1.0)
    b = _waiting("b", run_id="r2")
    assert _first(a, b, load=Load({"r1": 9}, {})) == "a"
    c = _waiting("c", run_id="r1", certitude=0.9)
    d = _waiting("d", run_id="r2", certitude=0.1)
    assert _first(d, c, load=Load({"r1": 9}, {})) == "c"


def test_dated_jobs_go_before_undated_ones():
    # The undated batch was even enqueued earlier than the dated job's date
    undated = _waiting("undated", enqueued_at=NOW - timedelta(days=2))
    dated = _waiting("dated", oldest_modified_at=NOW - timedelta(days=1))
    assert _first(undated, dated) == _first(dated, undated) == "dated"


def test_older_jobs_go_before_newer_ones_whatever_the_arrival():
    older = _waiting("older", oldest_modified_at=NOW - timedelta(days=3), enqueued_at=NOW)
    newer = _waiting(
        "newer",
        oldest_modified_at=NOW - timedelta(days=1),
        enqueued_at=NOW - timedelta(hours=1),
    )
    assert _first(newer, older) == _first(older, newer) == "older"
    # Undated batches among themselves: first come, first served
    early = _waiting("early", enqueued_at=NOW - timedelta(minutes=5))
    late = _waiting("late", enqueued_at=NOW)
    assert _first(late, early) == "early"
    # Same job date: the one enqueued first
    same = NOW - timedelta(days=1)
    x = _waiting("x", oldest_modified_at=same, enqueued_at=NOW)
    y = _waiting("y", oldest_modified_at=same, enqueued_at=NOW - timedelta(seconds=1))
    assert _first(x, y) == "y"


# -- what the leases say about who holds them (fairness and crash recovery read it) ----------


def test_every_lease_of_a_grant_names_its_holder_run_and_media(rt, clock):
    grant = rt.pools.acquire(Need(True, True, "twitter"), "dispatch-1", clock.now(), "run-1")
    live = rt.leases.live_leases(clock.now())
    assert (
        sorted((lease["holder"], lease["run_id"], lease["media_name"]) for lease in live)
        == [("dispatch-1", "run-1", "twitter")] * 2
    )
    load = Load.of(live)
    assert (dict(load.by_run), dict(load.by_media)) == ({"run-1": 2}, {"twitter": 2})
    # What a crashed admission left is found by its holder
    assert rt.leases.release_holder("dispatch-1", clock.now()) == 2
    assert rt.pools.release(grant.leases, clock.now()) == 0


def test_release_counts_the_leases_it_freed(rt, clock):
    grant = rt.pools.acquire(Need(True, True, "twitter"), "h", clock.now())
    assert rt.pools.release(grant.leases, clock.now()) == 2
    assert rt.pools.release([lease.lease_id for lease in grant.leases], clock.now()) == 0


def test_load_counts_leases_per_run_and_per_media():
    leases = [
        {"run_id": "r1", "media_name": "m"},
        {"run_id": "r1", "media_name": "m"},
        {"run_id": "r2", "media_name": "n"},
        {},
    ]
    load = Load.of(leases)
    assert dict(load.by_run) == {"r1": 2, "r2": 1, "": 1}
    assert dict(load.by_media) == {"m": 2, "n": 1, "": 1}
    more = load.plus(_waiting("x", run_id="r1", media_name="n"), 2)
    assert (dict(more.by_run), dict(more.by_media)) == (
        {"r1": 4, "r2": 1, "": 1},
        {"m": 2, "n": 3, "": 1},
    )
    assert dict(load.by_run) == {"r1": 2, "r2": 1, "": 1}  # plus() leaves the original alone


def test_a_media_with_no_lease_counts_as_zero():
    first = _waiting("first", media_name="unseen", enqueued_at=NOW - timedelta(seconds=1))
    second = _waiting("second", media_name="idle")
    assert _first(second, first, load=Load({}, {"idle": 0})) == "first"


def test_zero_ttl_and_zero_wait_are_refused(rt):
    from crawlsched.resources.queueing import wait_deadline

    with pytest.raises(ValueError, match="ttl_s must be > 0, got 0"):
        ResourcePools(rt.leases, 0)
    ResourcePools(rt.leases, 0.5)
    with pytest.raises(ValueError, match="max_wait_s must be > 0, got 0"):
        wait_deadline(NOW, 0)


# -- admission straight through ----------------------------------------------------------------


def _admit(rt, message: BatchMessage, first_delivery: bool = True) -> list[BatchMessage]:
    sent: list[BatchMessage] = []
    admit(rt, message, sent.append, first_delivery)
    return sent


def test_a_batch_nobody_waits_ahead_of_is_sent_on_without_a_waiting_document(rt, clock):
    message = _batch(rt, 3)
    rt.db.counter.reset()

    (sent,) = _admit(rt, message)
    commands = dict(rt.db.counter.boundary)

    # Leased, with its wait bound counted from now, and never parked
    assert len(sent.lease_ids) == 2
    assert sent.first_parked_at == clock.now()
    assert rt.db.waiting_batches.count_documents({}) == 0
    assert _held(rt) == (1, 1)
    # What it holds is recorded, and its jobs' lease now covers the crawl from here
    assignment = rt.db.run_resources.find_one({"_id": message.dispatch_id})
    assert (assignment["account"], assignment["node"]) == ("acct", NODE)
    deadline = clock.now() + timedelta(seconds=rt.settings.dispatch_lease_s)
    jobs = rt.db.profiles.find({"dispatch_id": message.dispatch_id})
    assert {d["lease_deadline"] for d in jobs} == {deadline}
    # In seven commands: is anyone waiting; each lease's read and compare-and-set; the jobs'
    # lease; the assignment. (Parked first, as every batch was before, it cost fifteen.)
    assert commands == {"find_one": 1, "find": 2, "update_one": 3, "update_many": 1}


def test_a_batch_waits_behind_one_already_waiting_for_its_pool(rt, clock):
    # Given the account held, and a login batch that had to wait for it
    (holder,) = _admit(rt, _batch(rt, 1, selenium=False))
    waiting = _batch(rt, 1, selenium=False)
    assert _admit(rt, waiting) == []
    # And the account freed, with no admission pass run since
    clock.advance(1)
    rt.pools.release(holder.lease_ids, clock.now())

    # When a newer login batch arrives
    newer = _batch(rt, 1, selenium=False)
    sent = _admit(rt, newer)

    # Then the batch that waited gets the account, and the newer one waits its turn
    assert [m.dispatch_id for m in sent] == [waiting.dispatch_id]
    assert [d["_id"] for d in rt.db.waiting_batches.find({})] == [newer.dispatch_id]


def test_a_batch_short_of_a_pool_parks_holding_nothing(rt, clock):
    _admit(rt, _batch(rt, 1))  # holds the one account and the one node
    second = _batch(rt, 1)

    assert _admit(rt, second) == []

    assert [d["_id"] for d in rt.db.waiting_batches.find({})] == [second.dispatch_id]
    assert _held(rt) == (1, 1)  # the first batch's, nothing of the second's


def test_a_redelivered_admission_frees_what_an_earlier_attempt_leased(rt, clock):
    # Given an attempt that leased the account and the node, then died before sending on
    message = _batch(rt, 2)
    need = Need(True, True, "twitter")
    dead = rt.pools.acquire(need, message.dispatch_id, clock.now(), message.run_id)
    assert dead.leases is not None and _held(rt) == (1, 1)

    # When RabbitMQ hands the admission out again
    (sent,) = _admit(rt, message, first_delivery=False)

    # Then the batch is admitted once, on fresh leases, and the dead attempt's are free
    assert _held(rt) == (1, 1)
    live = {lease["id"] for lease in rt.leases.live_leases(clock.now())}
    assert live == set(sent.lease_ids)
    assert not live & {lease.lease_id for lease in dead.leases}


def test_a_batch_stopped_mid_way_answers_with_what_it_crawled_and_what_it_gave_back(
    rt, clock, monkeypatch
):
    # (The stop check between jobs follows the test's clock: the runtime's environment.)
    rt.db.runs.insert_one({"_id": RUN, "state": "running"})
    message = _admitted(rt, _batch(rt, 4, selenium=False))

    def step(index, job):
        clock.advance(rt.settings.stop_check_s)
        if index == 0:
            rt.db.runs.update_one({"_id": RUN}, {"$set": {"stop_requested": True}})

    SCRIPT["step"] = step
    # Job 0 is crawled; the stop is seen before job 1; jobs 1-3 go back untouched
    assert _crawl(rt, message) == {"succeeded": 1, "stopped": 3}
    assert _outcomes(rt, message) == {
        "job0": "succeeded", "job1": "stopped", "job2": "stopped", "job3": "stopped",
    }  # fmt: skip


# -- what a parked batch, an admission and a starvation leave behind -------------------------


def test_a_parked_batch_waits_in_a_document_saying_what_it_needs_and_until_when(rt, clock):
    # Given a login batch first parked 30 s ago (it lost its account since)
    first = clock.at(-30)
    message = _batch(rt, 2, selenium=False).model_copy(update={"first_parked_at": first})
    (one, two) = message.decoded_job_ids()
    rt.db.profiles.update_one({"_id": one}, {"$set": {"certitude": 0.5, "modified_at": first}})
    rt.db.profiles.update_one({"_id": two}, {"$set": {"human_validation": 1}})

    doc = park(rt, message, clock.now())

    # Then it waits for the account of its media, at most WAIT_S from its first park
    deadline = first + timedelta(seconds=WAIT_S)
    assert {k: doc[k] for k in ("_id", "run_id", "collection", "task", "media_name")} == {
        "_id": message.dispatch_id,
        "run_id": RUN,
        "collection": "profiles",
        "task": "profile",
        "media_name": "twitter",
    }
    assert (doc["category"], doc["needs"], doc["jobs"]) == (
        "need_only_login",
        ["account:twitter"],
        2,
    )
    assert (doc["enqueued_at"], doc["wait_until"]) == (first, deadline)
    assert BatchMessage.parse(doc["message"]) == message
    # with the best priority among its jobs, for the order of admission
    assert (doc["human_validation"], doc["certitude"], doc["oldest_modified_at"]) == (1, 0, first)
    # and its jobs' dispatch lease runs past that bound, so expiry never takes a waiting batch
    lease_end = deadline + timedelta(seconds=rt.settings.dispatch_lease_s)
    jobs = rt.db.profiles.find({"dispatch_id": message.dispatch_id})
    assert {d["lease_deadline"].replace(tzinfo=NOW.tzinfo) for d in jobs} == {lease_end}


def test_a_parked_batch_never_waits_longer_than_a_fresh_one_whatever_its_message_says(rt, clock):
    # Given a message that claims a first park in the future
    message = _batch(rt, 1, selenium=False)
    forged = message.model_copy(update={"first_parked_at": clock.at(3600)})

    doc = park(rt, forged, clock.now())

    # Then it waits from now, as a batch parked now would
    assert (doc["enqueued_at"], doc["wait_until"]) == (clock.now(), clock.at(WAIT_S))


def test_a_batch_parked_for_the_first_time_counts_its_wait_from_now(rt, clock):
    message = _batch(rt, 1, selenium=False)
    assert message.first_parked_at is None

    doc = park(rt, message, clock.now())

    assert (doc["enqueued_at"], doc["wait_until"]) == (clock.now(), clock.at(WAIT_S))
    assert BatchMessage.parse(doc["message"]).first_parked_at == clock.now()


def test_a_parked_batch_of_a_schedule_waits_as_long_as_its_interval(rt, clock):
    # Given no wait bound in the settings, and the run's schedule fires every 40 s
    per_schedule = Runtime(
        rt.settings.model_copy(update={"admission_wait_s": None}), clock=clock.now
    )
    rt.db.schedules.insert_one({"_id": RUN.partition("@")[0], "interval_s": 40})
    message = _batch(rt, 1, selenium=False)

    doc = park(per_schedule, message, clock.now())

    assert doc["wait_until"] == clock.at(40)


def test_an_admitted_batch_carries_its_wait_and_its_leases_are_on_record(rt, clock):
    # Given a login batch waiting 12.5 s behind one that holds the account
    (holder,) = _admit(rt, _batch(rt, 1, selenium=False))
    waiting = _batch(rt, 3, selenium=False)
    assert _admit(rt, waiting) == []
    clock.advance(12.34567)
    rt.pools.release(holder.lease_ids, clock.now())

    # When a pass admits it
    sent: list[BatchMessage] = []
    with structlog.testing.capture_logs() as logs:
        assert admit_waiting(rt, keys_of(waiting), sent.append) == 1

    # Then the crawl message says how long it waited, and the assignment who serves it
    (admitted,) = sent
    assert admitted.stages_ms == {**waiting.stages_ms, "wait": 12345.7}
    assignment = rt.db.run_resources.find_one({"_id": waiting.dispatch_id})
    assert {k: assignment[k] for k in ("run_id", "task", "media_name", "jobs", "waited_s")} == {
        "run_id": RUN,
        "task": "profile",
        "media_name": "twitter",
        "jobs": 3,
        "waited_s": 12.346,
    }
    assert (assignment["account"], assignment["node"]) == ("acct", None)
    granted_at = assignment["granted_at"].replace(tzinfo=NOW.tzinfo)  # stored to the ms
    assert timedelta(0) <= clock.now() - granted_at < timedelta(milliseconds=1)
    # on a lease that names the batch's dispatch and run
    live = rt.leases.live_leases(clock.now())
    assert [(lease["holder"], lease["run_id"]) for lease in live] == [(waiting.dispatch_id, RUN)]
    assert [e for e in logs if e["event"] == "batch_admitted"] == [
        {
            "event": "batch_admitted",
            "log_level": "info",
            "dispatch_id": waiting.dispatch_id,
            "run_id": RUN,
            "waited_s": 12.346,
            "leases": 1,
        }
    ]
    # and nothing waits any more
    assert rt.db.waiting_batches.count_documents({}) == 0


def test_a_batch_whose_send_fails_gives_its_leases_back_and_waits_again(rt, clock):
    # Given a batch waiting for the account another batch holds
    (holder,) = _admit(rt, _batch(rt, 1, selenium=False))
    waiting = _batch(rt, 1, selenium=False)
    _admit(rt, waiting)
    rt.pools.release(holder.lease_ids, clock.now())

    def broken(message):
        raise ConnectionError("broker gone")

    # When the pass leases the account for it and the send fails
    with pytest.raises(ConnectionError):
        admit_waiting(rt, keys_of(waiting), broken)

    # Then the account is free, and the batch waits again, free for the next pass
    assert _held(rt) == (0, 0)
    (doc,) = rt.db.waiting_batches.find({})
    assert (doc["_id"], doc["taken_by"], doc["last_short"]) == (waiting.dispatch_id, None, None)
    sent: list[BatchMessage] = []
    assert admit_waiting(rt, keys_of(waiting), sent.append) == 1
    assert [m.dispatch_id for m in sent] == [waiting.dispatch_id]


def test_a_batch_sent_straight_through_whose_send_fails_holds_nothing(rt, clock):
    def broken(message):
        raise ConnectionError("broker gone")

    with pytest.raises(ConnectionError):
        admit(rt, _batch(rt, 1), broken)

    assert _held(rt) == (0, 0)


def test_a_batch_short_of_a_pool_notes_which_one_and_the_pass_admits_the_rest(rt, clock):
    # Given the node held, a batch needing it waiting, and a login-only batch behind
    _admit(rt, _batch(rt, 1, login=False))
    both = _batch(rt, 1)
    login = _batch(rt, 1, selenium=False)
    assert _admit(rt, both) == []
    clock.advance(1)  # the login batch parks after it, so the pass tries it second
    park(rt, login, clock.now())

    # When a pass runs over every waiting batch
    sent: list[BatchMessage] = []
    assert admit_waiting(rt, None, sent.append) == 1

    # Then the login batch got the account, and the other waits, noting the node was short
    assert [m.dispatch_id for m in sent] == [login.dispatch_id]
    (doc,) = rt.db.waiting_batches.find({})
    assert (doc["_id"], doc["last_short"], doc["taken_by"]) == (both.dispatch_id, "selenium", None)
    assert doc["needs"] == ["account:twitter", "selenium"]


@pytest.mark.parametrize("task", [None, "profile"])
def test_a_batch_of_a_run_stopped_while_it_waited_is_sent_on_without_leases(rt, clock, task):
    # Given a batch waiting for the account, and its run (or its task) stopped meanwhile
    (holder,) = _admit(rt, _batch(rt, 1, selenium=False))
    waiting = _batch(rt, 1, selenium=False)
    _admit(rt, waiting)
    rt.pools.release(holder.lease_ids, clock.now())
    rt.runs.open(RUN, "lease-flow", clock.now(), clock.now())
    rt.runs.request_stop(RUN, clock.now(), task=task)
    # and, behind it, a batch of another run that may go on
    other = _batch(rt, 1, selenium=False).model_copy(update={"run_id": "other@20240601T120000Z"})
    clock.advance(1)
    park(rt, other, clock.now())

    # When a pass takes them
    sent: list[BatchMessage] = []
    assert admit_waiting(rt, keys_of(waiting), sent.append) == 1

    # Then the stopped one is sent on holding nothing (the crawl gives its jobs back), the
    # other on the account, and neither waits any more
    assert [(m.dispatch_id, len(m.lease_ids)) for m in sent] == [
        (waiting.dispatch_id, 0),
        (other.dispatch_id, 1),
    ]
    assert _held(rt) == (1, 0)
    assert rt.db.waiting_batches.count_documents({}) == 0


def test_a_batch_taken_by_a_pass_that_died_is_admitted_on_fresh_leases(rt, clock):
    # Given a waiting batch that a pass took first and leased for (on leases of 120 s), then
    # died
    waiting = _batch(rt, 1, selenium=False)
    park(rt, waiting, clock.now())
    assert rt.waiting.take(waiting.dispatch_id, "dead-pass", clock.now()) is not None
    need = Need(True, False, "twitter")
    dead = ResourcePools(rt.leases, 120).acquire(need, waiting.dispatch_id, clock.now(), RUN)
    assert dead.leases is not None
    clock.advance(TAKE_HOLD_S)  # the take's hold ran out; the dead pass's lease has not

    # When the next pass takes it again
    sent: list[BatchMessage] = []
    assert admit_waiting(rt, keys_of(waiting), sent.append) == 1

    # Then the dead pass's lease was freed and the batch holds only its own
    (admitted,) = sent
    live = {lease["id"] for lease in rt.leases.live_leases(clock.now())}
    assert live == set(admitted.lease_ids)
    assert _held(rt) == (1, 0)


def test_a_starved_batch_gives_its_jobs_back_and_its_run_records_the_pool(rt, clock):
    # Given a run of a schedule, whose login batch waits for an account another batch holds
    rt.db.schedules.insert_one({"_id": "lease-flow", "owner": "team-a"})
    rt.runs.open(RUN, "lease-flow", clock.at(-60), clock.now())
    _admit(rt, _batch(rt, 1, selenium=False))
    waiting = _batch(rt, 2, selenium=False).model_copy(update={"stages_ms": {"plan": 4.0}})
    _admit(rt, waiting)

    # When it waited past its bound
    clock.advance(WAIT_S)
    reports: list = []
    with structlog.testing.capture_logs() as logs:
        assert starve_overdue(rt, reports.append) == 1

    # Then its jobs are pending again, counted starved, reported in the admit phase
    reason = f"waited {WAIT_S:.0f}s for the account pool (twitter)"
    jobs = list(rt.db.profiles.find({"_id": {"$in": waiting.decoded_job_ids()}}))
    assert {(d["state"], d["last_outcome"]) for d in jobs} == {(int(JobState.PENDING), "starved")}
    assert [(r.run_id, r.dispatch_id, r.collection, r.phase, r.stages_ms) for r in reports] == [
        (RUN, waiting.dispatch_id, "profiles", "admit", {"plan": 4.0})
    ]
    starved = [e for e in logs if e["event"] == "batch_starved"]
    assert starved == [
        {
            "event": "batch_starved",
            "log_level": "warning",
            "dispatch_id": waiting.dispatch_id,
            "jobs": 2,
            "reason": reason,
        }
    ]
    # and the run shows the shortage, and its fire time counts as missed for that pool
    (shortage,) = rt.runs.get(RUN)["shortages"]
    assert shortage == {
        "dispatch_id": waiting.dispatch_id,
        "jobs": 2,
        "reason": reason,
        "at": clock.now(),
    }
    (missed,) = rt.db.missed_runs.find({})
    assert (missed["schedule_id"], missed["run_id"], missed["reason"], missed["pools"]) == (
        "lease-flow",
        RUN,
        "starved",
        ["account:twitter"],
    )
    assert missed["recorded_at"].replace(tzinfo=NOW.tzinfo) == clock.now()
    assert rt.db.waiting_batches.count_documents({}) == 0


def test_a_batch_short_of_the_node_starves_naming_the_node_only(rt, clock):
    # Given a run whose batch needing the account and the node waits, the node held elsewhere
    rt.db.schedules.insert_one({"_id": "lease-flow"})
    rt.runs.open(RUN, "lease-flow", clock.at(-60), clock.now())
    _admit(rt, _batch(rt, 1, login=False))
    both = _batch(rt, 1)
    assert _admit(rt, both) == []  # the pass found the node short

    # When it waited past its bound
    clock.advance(WAIT_S + 7)
    assert starve_overdue(rt, lambda report: None) == 1

    # Then the reason and the missed run name the node's pool, not the account's it also needs
    (shortage,) = rt.runs.get(RUN)["shortages"]
    assert shortage["reason"] == f"waited {WAIT_S + 7:.0f}s for the selenium pool"
    assert rt.db.missed_runs.find_one({})["pools"] == ["selenium"]


def test_a_starvation_without_a_known_pool_is_recorded_as_unknown_once(rt, clock, registry):
    rt.db.schedules.insert_one({"_id": "lease-flow"})
    rt.runs.open(RUN, "lease-flow", clock.at(-60), clock.now())
    message = _batch(rt, 2, selenium=False)
    reports: list = []

    assert starve(rt, message, reports.append, "no pool") == 2
    # a redelivery reports the same again, and the miss is still one row
    assert starve(rt, message, reports.append, "no pool") == 2

    assert [r.dispatch_id for r in reports] == [message.dispatch_id] * 2
    (missed,) = rt.db.missed_runs.find({})
    assert (missed["pools"], missed["run_id"]) == (["unknown"], RUN)
    assert len(rt.runs.get(RUN)["shortages"]) == 1
    assert _samples(registry, "crawlsched_missed_runs_total") == {
        ("crawlsched_missed_runs_total", "starved"): 1
    }


def test_a_starvation_short_of_two_pools_counts_one_missed_run(rt, clock, registry):
    rt.db.schedules.insert_one({"_id": "lease-flow"})
    rt.runs.open(RUN, "lease-flow", clock.at(-60), clock.now())

    starve(rt, _batch(rt, 1), lambda report: None, "both", ["selenium", "account:twitter"])

    assert rt.db.missed_runs.find_one({})["pools"] == ["account:twitter", "selenium"]
    assert _samples(registry, "crawlsched_missed_runs_total") == {
        ("crawlsched_missed_runs_total", "starved"): 1
    }


def test_a_starved_batch_of_a_run_whose_schedule_is_gone_records_no_miss(rt, clock):
    rt.runs.open(RUN, "lease-flow", clock.at(-60), clock.now())
    reports: list = []

    assert starve(rt, _batch(rt, 1, selenium=False), reports.append, "gone", ["selenium"]) == 1

    assert len(reports) == 1
    assert rt.db.missed_runs.count_documents({}) == 0


def test_a_pass_admits_every_batch_the_pools_have_room_for(rt, clock):
    # Given a node batch and a login batch waiting, and both pools free
    for message in (_batch(rt, 1, login=False), _batch(rt, 1, selenium=False)):
        park(rt, message, clock.now())
    rt.db.counter.reset()

    assert admit_waiting(rt, None, lambda message: None) == 2
    # In a fixed number of commands: batches taken for the first time have no earlier pass's
    # leases to free, so none is looked for (the pass's load reads each of the three pools once)
    assert dict(rt.db.counter.boundary) == {
        "find": 8,
        "find_one_and_update": 2,
        "update_one": 4,
        "update_many": 2,
        "delete_one": 2,
    }


def _holders(rt) -> list:
    return [doc.get("taken_by") for doc in rt.db.waiting_batches.find({})]


def test_a_pass_holds_each_batch_it_takes_under_a_token_of_its_own(rt, clock):
    # While a pass sends a batch on, the batch is marked with that pass's token and no other:
    # a pass that died holding a batch cannot later remove it from under the one that took
    # it over.
    for message in (_batch(rt, 1, login=False), _batch(rt, 1, selenium=False)):
        park(rt, message, clock.now())
    holders: list = []

    assert admit_waiting(rt, None, lambda message: holders.extend(_holders(rt))) == 2
    tokens = [token for token in holders if token is not None]
    assert len(tokens) == 2 and len(set(tokens)) == 2
    assert all(isinstance(token, str) and len(token) >= 16 for token in tokens)


def test_a_starvation_sweep_holds_each_batch_under_a_token_of_its_own(rt, clock):
    for message in (_batch(rt, 1, login=False), _batch(rt, 1, selenium=False)):
        park(rt, message, clock.now())
    clock.advance(WAIT_S + 1)
    holders: list = []

    assert starve_overdue(rt, lambda report: holders.extend(_holders(rt))) == 2
    tokens = [token for token in holders if token is not None]
    assert len(tokens) == 2 and len(set(tokens)) == 2
    assert all(isinstance(token, str) and len(token) >= 16 for token in tokens)


def test_a_starved_batch_of_a_run_nobody_knows_only_gives_its_jobs_back(rt, clock):
    message = _batch(rt, 1, selenium=False)
    reports: list = []

    assert starve(rt, message, reports.append, "gone", ["account:twitter"]) == 1

    assert [r.phase for r in reports] == ["admit"]
    assert rt.db.missed_runs.count_documents({}) == 0


def test_a_starvation_that_finds_no_job_of_its_dispatch_reports_nothing(rt, clock):
    # Given a batch whose jobs were already given back under another outcome
    message = _batch(rt, 1, selenium=False)
    rt.jobs("profiles").release(message.dispatch_id, "stopped")
    reports: list = []

    assert starve(rt, message, reports.append, "late") == 0
    assert reports == []


def test_requeue_puts_the_rest_back_under_a_dispatch_of_its_own(rt, clock):
    message = _admitted(rt, _batch(rt, 3))
    rest_ids = message.decoded_job_ids()[1:]

    with structlog.testing.capture_logs() as logs:
        rest = requeue(rt, message, rest_ids, "node lost")

    assert rest is not None and rest.dispatch_id != message.dispatch_id
    assert (rest.job_ids, rest.lease_ids) == (message.job_ids[1:], [])
    (waiting,) = _waiting_jobs(rt)
    assert (waiting["_id"], waiting["targets"]) == (rest.dispatch_id, ["job1", "job2"])
    assert [e for e in logs if e["event"] == "batch_requeued"] == [
        {
            "event": "batch_requeued",
            "log_level": "warning",
            "dispatch_id": message.dispatch_id,
            "new_dispatch_id": rest.dispatch_id,
            "jobs": 2,
            "reason": "node lost",
        }
    ]


def test_requeue_of_nothing_or_of_jobs_the_dispatch_no_longer_holds_parks_nothing(rt, clock):
    message = _admitted(rt, _batch(rt, 2))
    assert requeue(rt, message, [], "nothing left") is None
    rt.jobs("profiles").release(message.dispatch_id, "stopped")
    assert requeue(rt, message, message.decoded_job_ids(), "too late") is None
    assert _waiting_jobs(rt) == []


def test_a_new_batch_goes_straight_through_by_default_on_leases_that_name_it(rt, clock):
    message = _batch(rt, 1)
    rt.db.counter.reset()
    sent: list[BatchMessage] = []

    assert admit(rt, message, sent.append) == 1

    # Never parked (no waiting document written), waited nothing, on leases held by its
    # dispatch and run
    assert "find_one_and_update" not in dict(rt.db.counter.boundary)
    assert sent[0].stages_ms["wait"] == 0.0
    assert rt.db.run_resources.find_one({"_id": message.dispatch_id})["waited_s"] == 0.0
    live = rt.leases.live_leases(clock.now())
    assert {(lease["holder"], lease["run_id"]) for lease in live} == {(message.dispatch_id, RUN)}
    assert {lease["id"] for lease in live} == set(sent[0].lease_ids)


def test_a_parked_batch_wakes_a_pass_over_its_own_pools_only(rt, clock):
    # Given a node batch waiting for the node, which is now free with no pass run since
    (node_holder,) = _admit(rt, _batch(rt, 1, login=False))
    node_batch = _batch(rt, 1, login=False)
    assert _admit(rt, node_batch) == []
    rt.pools.release(node_holder.lease_ids, clock.now())
    # and the account held
    _admit(rt, _batch(rt, 1, selenium=False))

    # When a login batch arrives and parks, its pass looks at the account's batches only
    assert _admit(rt, _batch(rt, 1, selenium=False)) == []

    # Then the node batch still waits for a pass of its own pool
    assert node_batch.dispatch_id in {d["_id"] for d in rt.db.waiting_batches.find({})}


def test_a_pass_skips_a_batch_another_pass_holds_and_admits_the_next(rt, clock):
    # Given two login batches waiting for the account, the first taken by another pass
    (holder,) = _admit(rt, _batch(rt, 1, selenium=False))
    first = _batch(rt, 1, selenium=False)
    _admit(rt, first)
    clock.advance(1)
    second = _batch(rt, 1, selenium=False)
    park(rt, second, clock.now())
    rt.pools.release(holder.lease_ids, clock.now())
    assert rt.waiting.take(first.dispatch_id, "other-pass", clock.now()) is not None
    # (this pass read the waiting batches just before the other took the first)
    taken = rt.db.waiting_batches.find_one({"_id": first.dispatch_id})
    free = rt.waiting.candidates
    rt.waiting.candidates = lambda keys, now: [taken, *free(keys, now)]

    sent: list[BatchMessage] = []
    assert admit_waiting(rt, keys_of(first), sent.append) == 1

    assert [m.dispatch_id for m in sent] == [second.dispatch_id]


def test_a_pass_tries_no_batch_behind_one_whose_pool_ran_short(rt, clock):
    # Given the node held, and two node batches waiting
    _admit(rt, _batch(rt, 1, login=False))
    first, second = _batch(rt, 1, login=False), _batch(rt, 1, login=False)
    _admit(rt, first)
    clock.advance(1)
    park(rt, second, clock.now())

    # When a pass finds the node short for the first
    assert admit_waiting(rt, None, lambda message: None) == 0

    # Then it does not take the second at all
    docs = {d["_id"]: d for d in rt.db.waiting_batches.find({})}
    assert docs[first.dispatch_id]["last_short"] == "selenium"
    assert (docs[second.dispatch_id]["last_short"], docs[second.dispatch_id].get("takes")) == (
        None,
        None,
    )


def test_a_pass_with_nothing_waiting_admits_nothing(rt, clock):
    assert admit_waiting(rt, None, lambda message: None) == 0


def test_a_pass_goes_on_to_the_next_overdue_batch_when_another_pass_holds_one(rt, clock):
    # Given two login batches waiting past their bound, the first taken by another pass
    _admit(rt, _batch(rt, 1, selenium=False))
    first, second = _batch(rt, 1, selenium=False), _batch(rt, 1, selenium=False)
    _admit(rt, first)
    _admit(rt, second)
    clock.advance(WAIT_S)
    # (this sweep read the overdue batches just before the other pass took the first)
    overdue = rt.waiting.overdue(clock.now())
    assert rt.waiting.take(first.dispatch_id, "other-pass", clock.now()) is not None
    rt.waiting.overdue = lambda now: sorted(overdue, key=lambda d: d["_id"] != first.dispatch_id)

    reports: list = []
    assert starve_overdue(rt, reports.append) == 1

    assert [r.dispatch_id for r in reports] == [second.dispatch_id]


def _samples(registry, *names: str) -> dict:
    """The non-zero samples of these metrics, by (name, label values...)."""
    return {
        (s.name, *s.labels.values()): s.value
        for family in registry.collect()
        for s in family.samples
        if s.name in names and s.value
    }


def test_the_gatekeepers_count_what_they_parked_admitted_starved_and_requeued(rt, clock, registry):
    # Given a run of a schedule; one login batch holds the account, another waits for it
    rt.db.schedules.insert_one({"_id": "lease-flow"})
    rt.runs.open(RUN, "lease-flow", clock.at(-60), clock.now())
    (holder,) = _admit(rt, _batch(rt, 1, selenium=False))
    _admit(rt, _batch(rt, 2, selenium=False))
    # When the waiting one starves, and a batch admitted next loses its node mid-way
    clock.advance(WAIT_S)
    starve_overdue(rt, lambda report: None)
    rt.pools.release(holder.lease_ids, clock.now())
    message = _admitted(rt, _batch(rt, 3))
    requeue(rt, message, message.decoded_job_ids()[1:], "node lost")

    login, both = "need_only_login", "need_selenium_and_login"
    assert _samples(
        registry,
        "crawlsched_batches_parked_total",
        "crawlsched_batches_admitted_total",
        "crawlsched_admission_wait_seconds_count",
        "crawlsched_batches_starved_total",
        "crawlsched_jobs_finished_total",
        "crawlsched_missed_runs_total",
        "crawlsched_batches_requeued_total",
    ) == {
        ("crawlsched_batches_parked_total", login, "twitter"): 2,
        ("crawlsched_batches_parked_total", both, "twitter"): 1,
        ("crawlsched_batches_admitted_total", login, "twitter"): 1,
        ("crawlsched_batches_admitted_total", both, "twitter"): 1,
        ("crawlsched_admission_wait_seconds_count", login): 1,
        ("crawlsched_admission_wait_seconds_count", both): 1,
        ("crawlsched_batches_starved_total", "account", "twitter"): 1,
        ("crawlsched_jobs_finished_total", "profile", "twitter", "starved"): 2,
        ("crawlsched_missed_runs_total", "starved"): 1,
        ("crawlsched_batches_requeued_total", "profile", "twitter"): 1,
    }


def test_a_starvation_sweep_counts_every_batch_it_starved(rt, clock):
    _admit(rt, _batch(rt, 1, selenium=False))
    for _ in range(2):
        _admit(rt, _batch(rt, 1, selenium=False))
    clock.advance(WAIT_S)

    assert starve_overdue(rt, lambda report: None) == 2


# -- what a crawled batch leaves behind ------------------------------------------------------


def test_crawl_bounds_come_from_the_media_else_from_the_settings(rt):
    media = {"max_depth": "2", "max_pages": 40, "follow_offsite": True, "extra_hosts": ["a.test"]}
    assert bounds_of(rt, media) == CrawlBounds(2, 40, True, ("a.test",))

    settings = rt.settings
    assert bounds_of(rt, {"follow_offsite": "yes"}) == CrawlBounds(
        settings.crawl_max_depth, settings.crawl_max_pages, False, ()
    )


def test_a_crawled_batch_writes_one_history_row_per_job_naming_who_served_it(rt, clock):
    message = _admitted(rt, _batch(rt, 2))
    SCRIPT["step"] = lambda index, job: clock.advance(1)

    assert _crawl(rt, message) == {"succeeded": 2}

    rows = list(rt.db.task_history.find({"dispatch_id": message.dispatch_id}))
    assert len(rows) == 2
    common = {
        "run_id": RUN,
        "schedule_id": "lease-flow",
        "dispatch_id": message.dispatch_id,
        "collection": "profiles",
        "task": "profile",
        "media_name": "twitter",
        "account": "acct",
        "node": NODE,
        "worker": rt.worker_id,
    }
    assert all({k: row[k] for k in common} == common for row in rows)


def test_a_batch_whose_leases_ran_out_before_it_started_waits_again_whole(rt, clock):
    # Given an admitted batch whose worker picked it up only after its leases' TTL
    message = _admitted(rt, _batch(rt, 3))
    clock.advance(TTL_S + 1)
    SCRIPT["step"] = lambda index, job: pytest.fail("nothing may be crawled")

    # When it is crawled, it crawls nothing and counts nothing
    with structlog.testing.capture_logs() as logs:
        assert _crawl(rt, message) == {}
    requeued = [e["reason"] for e in logs if e["event"] == "batch_requeued"]
    assert requeued == ["account lease revoked or expired"]

    # Then all its jobs wait again, under a dispatch of their own
    (waiting,) = _waiting_jobs(rt)
    assert waiting["targets"] == ["job0", "job1", "job2"]
    assert waiting["_id"] != message.dispatch_id


def test_an_account_locked_for_one_task_passes_over_that_task_only(rt, clock):
    # Given the only account locked for the profile task (the site limited that endpoint), a
    # profile batch waiting first, and a publication batch of the same account behind it
    rt.db.accounts.update_one(
        {"username": "acct"},
        {"$set": {"task_locks": {"profile": clock.now() + timedelta(minutes=15)}}},
    )
    profile = _batch(rt, 1, selenium=False)
    publication = _batch(rt, 1, selenium=False).model_copy(update={"task": "publication"})
    park(rt, profile, clock.now())
    clock.advance(1)
    park(rt, publication, clock.now())
    sent: list[BatchMessage] = []

    # When a pass runs
    assert admit_waiting(rt, None, sent.append) == 1

    # Then the publication batch went on with the account, and only the profile batch waits,
    # short of the account for its task
    assert [m.dispatch_id for m in sent] == [publication.dispatch_id]
    [waiting] = rt.db.waiting_batches.find({})
    assert waiting["_id"] == profile.dispatch_id
    assert waiting["last_short"] == "account:twitter/profile"
