"""A running batch takes over the jobs of its run's batches that have not begun
(`crawl/taking.py`, `JobClaims.take_over`).

Real crawl code on the embedded store; the driver is a plug-in of this module that records
what it crawls. Each job is crawled by exactly one batch: the one that took it over (which
records and reports it) or its own, which marks the jobs it read begun (reading them again when
a taker came between the two).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import timedelta

import pytest

from crawlsched.crawl.batch import crawl_batch
from crawlsched.demo.seed import demo_reference
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.resources.host_grouping import origin_url_pattern
from crawlsched.runtime import Runtime
from tests.conftest import settings_for_tests
from tests.support.claimed import claimed_batch
from tests.test_metrics_flow import sample_sum

RUN = "take-over@20240601T120000Z"
CRAWLED: Counter = Counter()
ON_CRAWL: list = []  # called with each job before it is recorded as crawled


class Recording:
    jobs_at_once = True

    def crawl(self, job, context) -> None:
        for hook in ON_CRAWL:
            hook(job)
        CRAWLED[job.target] += 1
        context.save("profile", [{"key": job.target, "name": job.target}])


class Paced(Recording):
    """Each page asks the process's host pacer for its place first, as `PoliteHttp` does."""

    def crawl(self, job, context) -> None:
        pacer = PACER[0]
        with pacer.slot(pacer.key_of(job.url)):
            super().crawl(job, context)


PACER: list = []  # the runtime's pacer, for `Paced`
DRIVERS = {"take-over-recording": Recording, "take-over-paced": Paced}


@pytest.fixture
def rt(embedded_mongo_url):
    settings = settings_for_tests(
        mongo_url=embedded_mongo_url,
        broker_url="stub://",
        driver_modules=["tests.test_take_over"],
        crawl_lanes=4,
    )
    rt = Runtime(settings)
    rt.create_indexes()
    rt.reference.load(demo_reference("http://127.0.0.1:9"))
    rt.db.runs.insert_one({"_id": RUN, "state": "running"})
    CRAWLED.clear()
    yield rt
    CRAWLED.clear()
    ON_CRAWL.clear()
    PACER.clear()


def _batch(
    rt, n: int, host: str, open_to_take_over: bool = True, driver: str = "take-over-recording"
) -> BatchMessage:
    """n jobs of the run, one per host `<host>-<i>.test` (or all of one host: `host` alone)."""
    message = claimed_batch(
        rt, n, run_id=RUN, driver_class=driver, login=False, selenium=False,
        open_to_take_over=open_to_take_over,
    )  # fmt: skip
    for i, job_id in enumerate(message.decoded_job_ids()):
        name = host if host.endswith(".test") else f"{host}-{i}.test"
        rt.db.profiles.update_one({"_id": job_id}, {"$set": {"url": f"https://{name}/p{i}"}})
    return message


def _crawl(rt, message: BatchMessage) -> tuple[dict[str, int], list[ReportMessage]]:
    reports: list[ReportMessage] = []
    return crawl_batch(rt, message, report=reports.append), reports


def _targets(rt, message: BatchMessage) -> set[str]:
    return {d["target"] for d in rt.db.profiles.find({"_id": {"$in": message.decoded_job_ids()}})}


def test_a_batch_takes_over_a_queued_batch_whose_message_then_crawls_nothing(rt, registry):
    # Given two batches of the run, neither begun: A's two jobs of one host, B's four of four
    # other hosts
    a = _batch(rt, 2, "a.test")
    b = _batch(rt, 4, "b")
    # When A is crawled, its own host's second page waits for its first, and then B's message
    counts_a, reports_a = _crawl(rt, a)
    rt.counter.boundary.clear()
    counts_b, reports_b = _crawl(rt, b)
    commands_b = dict(rt.counter.boundary)
    # Then A crawled B's jobs too, each once; B found none of its own left, and reported nothing
    assert counts_a == {"succeeded": 6}
    assert set(CRAWLED) == _targets(rt, a) | _targets(rt, b)
    assert set(CRAWLED.values()) == {1}
    assert (counts_b, reports_b) == ({}, [])
    # in one store command: the read of its jobs (none left to begin)
    assert commands_b == {"find": 1}
    # and A reported them all, recorded under its own dispatch
    assert [r.dispatch_id for r in reports_a] == [a.dispatch_id]
    for doc in rt.db.profiles.find({"_id": {"$in": b.decoded_job_ids()}}):
        assert (doc["last_dispatch_id"], doc["last_outcome"]) == (a.dispatch_id, "succeeded")
        assert "unstarted" not in doc
    taken = sample_sum(
        registry, "crawlsched_jobs_taken_over_total", task="profile", media="twitter"
    )
    assert taken == 4


def test_a_batch_that_has_begun_keeps_its_jobs(rt):
    a = _batch(rt, 2, "a.test")
    b = _batch(rt, 3, "b")
    store = rt.jobs("profiles")
    # B's message came first: its jobs are its own
    store.begin(b.dispatch_id, b.decoded_job_ids())
    deadline = rt.now() + timedelta(minutes=5)
    assert store.take_over(b.decoded_job_ids(), a.dispatch_id, deadline) == []
    assert store.open_to_take_over(RUN, "profile", "twitter", a.dispatch_id, 10) == []
    counts_a, _ = _crawl(rt, a)
    counts_b, reports_b = _crawl(rt, b)
    assert (counts_a, counts_b) == ({"succeeded": 2}, {"succeeded": 3})
    assert [r.dispatch_id for r in reports_b] == [b.dispatch_id]
    assert set(CRAWLED.values()) == {1}


def test_a_job_taken_over_between_its_batch_s_read_and_begin_is_crawled_by_the_taker_only(
    rt, monkeypatch
):
    # Given batch B of three, and batch A taking B's first job over just after B read its jobs
    # (before it marked them begun)
    a = _batch(rt, 1, "a.test", open_to_take_over=False)
    b = _batch(rt, 3, "b")
    store = rt.jobs("profiles")
    first = b.decoded_job_ids()[:1]
    reads = []
    load_claimed = type(store).load_claimed

    def read_then_taken(self, dispatch_id, job_ids):
        jobs = load_claimed(self, dispatch_id, job_ids)
        reads.append(len(jobs))
        if len(reads) == 1:
            assert store.take_over(first, a.dispatch_id, rt.now() + timedelta(minutes=5))
        return jobs

    monkeypatch.setattr(type(store), "load_claimed", read_then_taken)
    # When B begins
    counts_b, _ = _crawl(rt, b)
    # Then its write began two of the three it read, so it read again and crawled those two;
    # the job taken over is A's, and crawled once, by A
    assert reads[:2] == [3, 2]
    assert counts_b == {"succeeded": 2}
    assert set(store.claimed_ids(a.dispatch_id)) == {*a.decoded_job_ids(), *first}
    counts_a, _ = _crawl(rt, a)
    assert counts_a == {"succeeded": 2}
    assert set(CRAWLED.values()) == {1} and len(CRAWLED) == 4


def test_a_taker_crawls_only_the_pages_the_store_moved_to_it(rt, monkeypatch):
    # Given batch A taking over, and batch B of three, whose message begins its first page
    # between A's look at the queue and A's take (the store then moves only the other two)
    a = _batch(rt, 1, "a.test", open_to_take_over=False)
    b = _batch(rt, 3, "b")
    store = rt.jobs("profiles")
    first = b.decoded_job_ids()[:1]
    look = type(store).open_to_take_over

    def look_then_b_begins(self, *args, **kwargs):
        seen = look(self, *args, **kwargs)
        if seen:
            store.begin(b.dispatch_id, first)
        return seen

    monkeypatch.setattr(type(store), "open_to_take_over", look_then_b_begins)
    # When A crawls, then B
    counts_a, _ = _crawl(rt, a)
    monkeypatch.undo()
    counts_b, _ = _crawl(rt, b)
    # Then A crawled its own page and the two it got; B its first; each page once
    assert counts_a == {"succeeded": 3} and counts_b == {"succeeded": 1}
    assert set(CRAWLED.values()) == {1} and len(CRAWLED) == 4


def test_a_job_taken_over_first_is_not_loaded_by_its_own_batch(rt):
    a = _batch(rt, 1, "a.test", open_to_take_over=False)  # B would take A's job over too
    b = _batch(rt, 3, "b")
    store = rt.jobs("profiles")
    first = b.decoded_job_ids()[:1]
    deadline = rt.now() + timedelta(minutes=5)
    assert store.take_over(first, a.dispatch_id, deadline) == first
    # B begins now: it loads and crawls only the two left to it
    counts_b, _ = _crawl(rt, b)
    assert counts_b == {"succeeded": 2}
    assert set(store.claimed_ids(a.dispatch_id)) == {*a.decoded_job_ids(), *first}
    assert set(CRAWLED.values()) == {1}


@pytest.mark.parametrize("why", ["needs an account", "paused", "stopped", "switched off"])
def test_nothing_is_taken_over_from_or_for_what_may_not(rt, why):
    # The run's state is read again at every look (no caching between reads here)
    rt.settings = rt.settings.model_copy(update={"stop_check_s": 0.0})
    a = _batch(rt, 1, "a.test")
    b = _batch(rt, 3, "b", open_to_take_over=why != "needs an account")
    if why == "switched off":
        rt.settings = rt.settings.model_copy(update={"crawl_take_over": False})
    elif why in ("paused", "stopped"):
        # while A crawls its own job, the run is paused or stopped
        field = "paused" if why == "paused" else "stop_requested"
        ON_CRAWL.append(lambda job: rt.db.runs.update_one({"_id": RUN}, {"$set": {field: True}}))
    counts_a, _ = _crawl(rt, a)
    # A crawled its own job and took nothing over
    assert counts_a == {"succeeded": 1}
    assert set(CRAWLED) == _targets(rt, a)
    assert len(rt.jobs("profiles").claimed_ids(b.dispatch_id)) == 3


def test_a_redelivered_taker_crawls_what_it_took_over_before_its_worker_died(rt):
    # Given A took one of B's jobs over, and its worker died before crawling it
    a = _batch(rt, 1, "a.test", open_to_take_over=False)
    b = _batch(rt, 3, "b", open_to_take_over=False)
    taken = b.decoded_job_ids()[:1]  # (the only one open to it, so A takes no more now)
    rt.db.profiles.update_one({"_id": taken[0]}, {"$set": {"unstarted": True}})
    deadline = rt.now() + timedelta(minutes=5)
    assert rt.jobs("profiles").take_over(taken, a.dispatch_id, deadline) == taken
    # When RabbitMQ delivers A's message again (it lists only A's own job)
    counts_a, reports_a = _crawl(rt, a)
    # Then A crawls the job it took too, at once, not after its dispatch lease
    assert counts_a == {"succeeded": 2}
    assert [r.dispatch_id for r in reports_a] == [a.dispatch_id]
    (doc,) = rt.db.profiles.find({"_id": taken[0]})
    assert (doc["last_dispatch_id"], doc["last_outcome"]) == (a.dispatch_id, "succeeded")
    counts_b, _ = _crawl(rt, b)
    assert counts_b == {"succeeded": 2}
    assert set(CRAWLED.values()) == {1}


@pytest.mark.parametrize("login", [False, True], ids=["no-account", "with-an-account"])
def test_the_rest_of_a_batch_parked_to_wait_is_open_to_take_over_unless_it_holds_leases(rt, login):
    from crawlsched.flow.admission import requeue

    a = _batch(rt, 1, "a.test")
    rt.jobs("profiles").begin(a.dispatch_id, a.decoded_job_ids())  # A runs
    parked = claimed_batch(
        rt, 3, run_id=RUN, driver_class="take-over-recording", login=login, selenium=False
    )
    store = rt.jobs("profiles")
    store.begin(parked.dispatch_id, parked.decoded_job_ids())  # it ran, and waits for a host now
    rest = requeue(rt, parked, parked.decoded_job_ids()[1:], "host not ready", rt.now())
    open_ = store.open_to_take_over(RUN, "profile", "twitter", a.dispatch_id, 10)
    assert {d["_id"] for d in open_} == (set() if login else set(rest.decoded_job_ids()))
    assert len(rest.decoded_job_ids()) == 2


def test_a_page_of_a_host_another_process_holds_or_a_block_stops_is_left_queued(rt):
    a = _batch(rt, 2, "a.test")
    b = _batch(rt, 4, "b")
    urls = [d["url"] for d in rt.db.profiles.find({"_id": {"$in": b.decoded_job_ids()}})]
    held, blocked = (rt.pacer.key_of(u) for u in sorted(urls)[:2])
    later = rt.now() + timedelta(minutes=1)
    rt.db.hosts.insert_many(
        [
            {"_id": held, "version": 1, "holder": "elsewhere:1:abc", "lease_until": later},
            {"_id": blocked, "version": 1, "blocked_until": later, "blocked_reason": "HTTP 429"},
        ]
    )
    counts_a, _ = _crawl(rt, a)
    assert counts_a == {"succeeded": 4}  # its own two, and two of B's four
    left = {d["url"] for d in rt.db.profiles.find({"dispatch_id": b.dispatch_id})}
    assert {rt.pacer.key_of(u) for u in left} == {held, blocked}


def test_a_batch_takes_over_only_in_its_first_seconds_so_it_ends_and_reports(rt, monkeypatch):
    from crawlsched.crawl import taking as take_over

    monkeypatch.setattr(take_over, "TAKE_OVER_FOR_S", 0.0)
    a = _batch(rt, 2, "a.test")
    b = _batch(rt, 3, "b")
    counts_a, _ = _crawl(rt, a)
    assert counts_a == {"succeeded": 2}
    assert len(rt.jobs("profiles").claimed_ids(b.dispatch_id)) == 3


def _counting(rt, monkeypatch, method: str) -> list[str]:
    """The hosts `rt.hosts.<method>` is called for, in order."""
    calls: list[str] = []
    inner = getattr(rt.hosts, method)

    def counted(key, *args, **kwargs):
        calls.append(key)
        return inner(key, *args, **kwargs)

    monkeypatch.setattr(rt.hosts, method, counted)
    return calls


@pytest.mark.parametrize("delay_s", [0.05, 0.0], ids=["paced", "unpaced"])
def test_a_paced_host_keeps_its_queued_pages_with_the_process_that_holds_it(
    rt, monkeypatch, delay_s
):
    # Given A's one page of a.test, and B queued behind it with three more pages of a.test
    # (pages of the same host the general take-over leaves alone: A is crawling that host)
    rt.pacer.default = dataclasses.replace(rt.pacer.default, delay_s=delay_s)
    PACER.append(rt.pacer)
    a = _batch(rt, 1, "a.test", driver="take-over-paced")
    b = _batch(rt, 3, "a.test", driver="take-over-paced")
    releases = _counting(rt, monkeypatch, "release")
    counts_a, reports_a = _crawl(rt, a)
    counts_b, _ = _crawl(rt, b)
    if delay_s:
        # Then, paced, A brings B's pages over before its own last page of the host is done:
        # it crawls all four under one hold of the host, and B finds nothing left
        assert (counts_a, counts_b) == ({"succeeded": 4}, {})
        assert [r.dispatch_id for r in reports_a] == [a.dispatch_id]
        assert releases == ["https://a.test:443"]
    else:
        # unpaced, the threads set the pace, not the host's clock: B crawls its own
        assert (counts_a, counts_b) == ({"succeeded": 1}, {"succeeded": 3})
    assert set(CRAWLED.values()) == {1}
    assert len(CRAWLED) == 4


def test_queued_pages_of_a_host_are_read_by_its_url_and_not_from_begun_batches(rt):
    a = _batch(rt, 1, "a.test")
    queued = _batch(rt, 3, "a.test")
    other = _batch(rt, 2, "b")
    begun = _batch(rt, 2, "a.test")
    store = rt.jobs("profiles")
    store.begin(begun.dispatch_id, begun.decoded_job_ids())
    # a URL whose host only begins like a.test's is another host's
    rt.db.profiles.update_one(
        {"_id": other.decoded_job_ids()[0]}, {"$set": {"url": "https://a.test.example/p"}}
    )
    pattern = origin_url_pattern("https://a.test:443")
    found = store.queued_of_host(RUN, "profile", "twitter", a.dispatch_id, pattern, 10)
    assert {d["_id"] for d in found} == set(queued.decoded_job_ids())
    assert len(store.queued_of_host(RUN, "profile", "twitter", a.dispatch_id, pattern, 2)) == 2
