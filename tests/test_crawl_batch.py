"""The crawl of one batch (`crawl.batch`): what the driver is given, what is kept of what it
found, and what the batch records, reports and gives back.

Real crawl code on the embedded store, one thread, the test's clock; the driver is a plug-in
of this module that runs the test's script with the context the crawl hands it. The lease and
admission side of the same flow is in test_lease_flow.py.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.catalog import MODEL_COLLECTIONS, JobState
from crawlsched.crawl import frontier, recovery, resources
from crawlsched.crawl import parts as batch_parts
from crawlsched.crawl.batch import crawl_batch
from crawlsched.demo.seed import demo_reference
from crawlsched.drivers.base import Account
from crawlsched.drivers.context import CrawlBounds
from crawlsched.flow.admission import admit, admit_waiting, keys_of
from crawlsched.flow.coordination import record_report
from crawlsched.flow.ticking import reclaim_expired
from crawlsched.messages import DISPATCH_ID_PATTERN, BatchMessage, ReportMessage
from crawlsched.planning import frontier_rules
from crawlsched.planning.run_names import ENDED
from crawlsched.resources.rules import DOWN, AccountLimits
from crawlsched.runtime import Runtime
from crawlsched.store.children import child_id
from crawlsched.store.jobs import MongoJobStore
from crawlsched.store.pipeline import TASKS_COLLECTION, children_filter
from crawlsched.store.results import Item
from tests.conftest import settings_for_tests
from tests.support.claimed import Clock, claimed_batch
from tests.support.factories import NOW

RUN = "crawl-batch@20240601T120000Z"
NODE = "http://node-a"
SECRET_HOST = "login.twitter.test"

# What the driver does per job, called with (job index, job, context): set by each test.
SCRIPT: dict[str, Callable] = {}
CONTEXTS: list[Any] = []  # the context of every job the driver was called for


class ScriptedDriver:
    def crawl(self, job, context) -> None:
        CONTEXTS.append(context)
        # A planned job's index; a discovered page's is -1 (its URL says which it is).
        index = int(job.target.split("-")[0].removeprefix("job")) if job.target[:3] == "job" else -1
        SCRIPT.get("step", lambda *args: None)(index, job, context)


DRIVERS = {"crawl-batch": ScriptedDriver}


@pytest.fixture
def clock():
    # The runtime's environment runs on it: the lease keeper and the stop check throttle on
    # its monotonic clock too.
    clock = Clock(NOW)
    yield clock
    SCRIPT.clear()
    CONTEXTS.clear()


@pytest.fixture
def rt(embedded_mongo_url, clock):
    settings = settings_for_tests(
        mongo_url=embedded_mongo_url,
        broker_url="stub://",
        driver_modules=["tests.test_crawl_batch"],
    )
    rt = Runtime(settings, env=clock.env())
    rt.create_indexes()
    rt.reference.load(demo_reference("http://127.0.0.1:9"))
    # Twitter's own bounds and credential host, each unlike the settings' defaults
    rt.db.childs_socialmedia.update_one(
        {"media_name": "twitter"},
        {"$set": {"secret_hosts": [SECRET_HOST], "max_depth": 2, "max_pages": 3}},
    )
    rt.inventory.add_account("twitter", "acct", "hunter2", AccountLimits(), clock.now())
    rt.inventory.add_node(NODE, "chromedriver", 1, clock.now())
    rt.db.runs.insert_one({"_id": RUN, "state": "running"})
    return rt


def _admitted(rt, n: int, login=True, selenium=True, **fields) -> BatchMessage:
    message = claimed_batch(
        rt, n, run_id=RUN, driver_class="crawl-batch", login=login, selenium=selenium, **fields
    )
    if not (login or selenium):
        return message
    sent: list[BatchMessage] = []
    assert admit(rt, message, sent.append) == 1
    return sent[0]


def _crawl(rt, message: BatchMessage, **hooks) -> tuple[dict[str, int], list[ReportMessage]]:
    reports: list[ReportMessage] = []
    counts = crawl_batch(rt, message, report=reports.append, **hooks)
    return counts, reports


def _jobs(rt, message: BatchMessage) -> dict[str, dict]:
    docs = rt.db.profiles.find({"_id": {"$in": message.decoded_job_ids()}})
    return {d["target"].split("-")[0]: d for d in docs}


# -- what the driver is given ----------------------------------------------------------------


def test_the_driver_gets_the_leased_account_and_the_media_s_hosts_bounds_and_tasks(rt):
    message = _admitted(rt, 1, crawl_limit=7)

    assert _crawl(rt, message)[0] == {"succeeded": 1}

    (context,) = CONTEXTS
    assert context.account == Account("acct", "hunter2")
    assert context.secret_hosts == (SECRET_HOST,)
    assert context.allowed_networks == rt.allowed_networks
    assert context.crawl_limit == 7
    assert context.bounds == CrawlBounds(max_depth=2, max_pages=3)
    # Its HTTP client carries the same account, sent only to the same hosts
    assert context.http.account == Account("acct", "hunter2")
    assert context.http.secret_hosts == (SECRET_HOST,)
    assert context.http.allowed_networks == rt.allowed_networks


def test_the_driver_may_discover_only_tasks_both_its_media_and_its_collection_have(rt):
    # Twitter has no `stories` rows though the profiles collection has that task; `friend`
    # it has. A discovery of a task the media lacks is the job's failure.
    def step(index, job, context):
        assert context.discover("https://twitter.test/friends/a", task="friend")
        context.discover("https://twitter.test/stories/a", task="stories")

    SCRIPT["step"] = step
    message = _admitted(rt, 1)

    assert _crawl(rt, message)[0] == {"failed": 1}
    (job,) = _jobs(rt, message).values()
    assert "has no task 'stories'" in job["last_error"]


@pytest.mark.parametrize("without", ["login", "credential"])
def test_a_batch_without_a_credential_crawls_with_no_account(rt, without):
    if without == "credential":  # the account's stored secret is gone since it was leased
        rt.db.accounts.update_one({"username": "acct"}, {"$unset": {"secret_enc": ""}})
    message = _admitted(rt, 1, login=without == "credential")

    assert _crawl(rt, message)[0] == {"succeeded": 1}

    (context,) = CONTEXTS
    assert context.account is None
    assert context.http.account is None


def test_is_new_answers_for_the_model_and_key_asked(rt):
    model_ids = rt.model_ids()
    rt.results.save([Item("earlier", "profile", {"key": "k-old"})], model_ids, {}, rt.now())
    answers = {}

    def step(index, job, context):
        for model, key in [("profile", "k-old"), ("profile", "k-new"), ("friend", "k-old")]:
            answers[model, key] = context.is_new(model, key)

    SCRIPT["step"] = step
    assert _crawl(rt, _admitted(rt, 1))[0] == {"succeeded": 1}
    assert answers == {
        ("profile", "k-old"): False,
        ("profile", "k-new"): True,
        ("friend", "k-old"): True,
    }


def test_a_node_that_cannot_open_a_browser_is_marked_down_and_the_batch_waits_again(
    rt, monkeypatch
):
    @contextlib.contextmanager
    def refuse(url, **options):  # as a node that does not answer: the session never opens
        raise ConnectionRefusedError(f"nothing listens at {url}")
        yield

    monkeypatch.setattr(resources, "open_browser", refuse)
    SCRIPT["step"] = lambda index, job, context: context.browser
    message = _admitted(rt, 2)

    assert _crawl(rt, message)[0] == {}

    (node,) = rt.db.selenium_nodes.find({})
    assert node["health"] == DOWN
    assert "could not open a browser session" in node["health_reason"]
    (waiting,) = rt.db.waiting_batches.find({})
    assert sorted(BatchMessage.parse(waiting["message"]).job_ids) == sorted(message.job_ids)


# -- what is kept of what the driver found ---------------------------------------------------


def test_results_are_stored_tagged_and_counted_on_their_job(rt, clock):
    def step(index, job, context):
        clock.advance(5)
        context.save("profile", [{"key": f"p{index}", "name": f"n{index}"}])
        context.save("friend", [{"key": "f-a"}, {"key": f"f-{index}"}])

    SCRIPT["step"] = step
    message = _admitted(rt, 2, selenium=False)

    assert _crawl(rt, message)[0] == {"succeeded": 2}

    kept_at = clock.now()
    profiles = {d["key"]: d for d in rt.db[MODEL_COLLECTIONS["profile"]].find({})}
    assert set(profiles) == {"p0", "p1"}
    jobs = _jobs(rt, message)
    for index in (0, 1):
        doc = profiles[f"p{index}"]
        tags = {k: doc[k] for k in ("media_name", "run_id", "task", "crawled_by", "job_id")}
        assert tags == {
            "media_name": "twitter",
            "run_id": RUN,
            "task": "profile",
            "crawled_by": rt.worker_id,
            "job_id": jobs[f"job{index}"]["_id"],
        }
        assert doc["name"] == f"n{index}"
        assert doc["model_id"] == rt.model_ids()["profile"]
        assert doc["first_seen"] == doc["last_seen"] == kept_at
    # f-a, saved by both jobs, is new once: the second job counts it unchanged
    assert jobs["job0"]["last_items"] == {"new": 3}
    assert jobs["job1"]["last_items"] == {"new": 2, "unchanged": 1}
    assert jobs["job0"]["modified_at"] == kept_at


def test_discoveries_become_children_within_the_media_s_page_bound(rt, clock):
    def step(index, job, context):
        clock.advance(5)
        for page in range(4):  # one more than twitter's bound of 3 pages
            context.discover(f"https://twitter.test/{job.target}/p{page}", task="friend")
        context.discover("https://elsewhere.test/p")  # off the site: cut, not registered

    SCRIPT["step"] = step
    message = _admitted(rt, 1, login=False)

    assert _crawl(rt, message)[0] == {"succeeded": 1}

    (job,) = _jobs(rt, message).values()
    assert job["last_discovered"] == 4
    assert job["last_cut"] == {"offsite": 1, "pages": 1}
    children = list(rt.db.profiles.find({"scope_run": RUN, "depth": 1}))
    assert len(children) == 3
    for child in children:
        assert child["_id"] == child_id(RUN, "friend", child["url"])
        expected = {
            "task": "friend",
            "media_name": "twitter",
            "run_id": RUN,
            "found_by": message.dispatch_id,
            "parent_job": job["_id"],
            "site": "twitter.test",
            "created_at": clock.now(),
            "released": False,
        }
        assert {k: child[k] for k in expected} == expected
    # The crawled page's own marker is registered with its children
    marker = rt.db.profiles.find_one({"_id": child_id(RUN, "profile", job["url"])})
    assert marker["last_outcome"] == "planned"
    assert marker["created_at"] == clock.now()


def test_a_batch_that_found_nothing_still_marks_its_pages_in_the_run(rt, clock):
    def step(index, job, context):
        clock.advance(5)

    SCRIPT["step"] = step
    message = _admitted(rt, 2, login=False)

    assert _crawl(rt, message)[0] == {"succeeded": 2}

    for job in _jobs(rt, message).values():
        marker = rt.db.profiles.find_one({"_id": child_id(RUN, "profile", job["url"])})
        assert marker is not None, job["url"]
        assert (marker["scope_run"], marker["created_at"]) == (RUN, clock.now())


# -- what the batch records, reports and gives back ------------------------------------------


def test_the_report_names_the_dispatch_and_adds_the_crawl_time_to_the_stages(rt, clock):
    # The crawl takes 0.23456 s on its own clock: 234.6 ms, to a tenth
    SCRIPT["step"] = lambda index, job, context: clock.advance(0.11728)
    message = _admitted(rt, 2, stages_ms={"plan": 12.5})
    woken: list[frozenset[str]] = []

    counts, reports = _crawl(rt, message, wake=woken.append)

    assert counts == {"succeeded": 2}
    assert reports == [
        ReportMessage(
            run_id=RUN,
            dispatch_id=message.dispatch_id,
            collection="profiles",
            phase="crawl",
            stages_ms={**message.stages_ms, "crawl": 234.6},
        )
    ]
    assert message.stages_ms["plan"] == 12.5
    # The pools it gave back are woken: a batch waiting for them may go now
    assert woken == [keys_of(message)]


def test_a_delivery_that_recorded_every_job_reads_no_outcome_back_and_a_redelivery_does(
    rt, monkeypatch
):
    reads = []
    outcomes_of = MongoJobStore.outcomes_of

    def counted(self, *args):
        reads.append(args)
        return outcomes_of(self, *args)

    monkeypatch.setattr(MongoJobStore, "outcomes_of", counted)
    message = _admitted(rt, 2)

    first, first_reports = _crawl(rt, message)
    assert (first, len(first_reports), reads) == ({"succeeded": 2}, 1, [])

    # The same message again (RabbitMQ redelivered it): nothing is crawled twice, the same
    # report is sent again from what the first delivery wrote
    again, again_reports = _crawl(rt, message, first_delivery=False)
    assert again == first
    assert [r.dispatch_id for r in again_reports] == [message.dispatch_id]
    assert len(reads) == 1
    assert len(CONTEXTS) == 2


def test_finished_jobs_are_counted_per_task_media_and_outcome(rt, registry):
    SCRIPT["step"] = lambda index, job, context: index == 1 and 1 / 0
    _crawl(rt, _admitted(rt, 3))

    finished = {
        tuple(s.labels.values()): s.value
        for family in registry.collect()
        for s in family.samples
        if s.name == "crawlsched_jobs_finished_total"
    }
    assert finished == {("profile", "twitter", "succeeded"): 2, ("profile", "twitter", "failed"): 1}


@pytest.mark.parametrize("scope", ["run", "task"])
def test_a_batch_of_a_stopped_run_or_task_crawls_nothing_and_gives_its_jobs_back(rt, scope):
    stop = {"stop_requested": True} if scope == "run" else {"stopped_tasks": ["profile"]}
    rt.db.runs.update_one({"_id": RUN}, {"$set": stop})
    message = _admitted(rt, 3, login=False, selenium=False)

    with structlog.testing.capture_logs() as logs:
        counts, reports = _crawl(rt, message)

    assert CONTEXTS == []
    assert counts == {"stopped": 3}
    assert [r.dispatch_id for r in reports] == [message.dispatch_id]
    assert {job["last_outcome"] for job in _jobs(rt, message).values()} == {"stopped"}
    stopped = [e for e in logs if e["event"] == "batch_stopped"]
    assert [(e["dispatch_id"], e["jobs"]) for e in stopped] == [(message.dispatch_id, 3)]


def test_a_stop_seen_mid_batch_is_logged_with_the_jobs_it_gave_back(rt, clock):
    def step(index, job, context):
        clock.advance(rt.settings.stop_check_s)
        rt.db.runs.update_one({"_id": RUN}, {"$set": {"stop_requested": True}})

    SCRIPT["step"] = step
    message = _admitted(rt, 4, login=False, selenium=False)

    with structlog.testing.capture_logs() as logs:
        assert _crawl(rt, message)[0] == {"succeeded": 1, "stopped": 3}

    stopped = [e for e in logs if e["event"] == "batch_stopped"]
    assert [(e["dispatch_id"], e["jobs"]) for e in stopped] == [(message.dispatch_id, 3)]


# -- the dispatch lease: kept while the crawl progresses, lost when it does not ---------------


def _lease_from_now(rt, message: BatchMessage) -> None:
    """The dispatch lease as the planner sets it: one lease length from now."""
    deadline = rt.now() + timedelta(seconds=rt.settings.dispatch_lease_s)
    rt.jobs(message.collection).extend_lease(message.dispatch_id, deadline)


def test_a_crawl_that_outlives_its_dispatch_lease_while_it_progresses_keeps_it(rt, clock):
    # Given a batch of five jobs that each take 40 % of the dispatch lease (twice the lease in
    # all), and the ticker reclaiming expired holds between every two of them
    lease_s = rt.settings.dispatch_lease_s
    reclaimed: list[int] = []

    def step(index, job, context):
        clock.advance(0.4 * lease_s)
        reclaimed.append(reclaim_expired(rt, lambda report: None))

    SCRIPT["step"] = step
    message = _admitted(rt, 5, login=False, selenium=False)
    _lease_from_now(rt, message)

    # When it is crawled
    counts, reports = _crawl(rt, message)

    # Then the ticker never took it: every job succeeded under its own dispatch and reported
    assert clock.monotonic() >= 2 * lease_s
    assert reclaimed == [0, 0, 0, 0, 0]
    assert counts == {"succeeded": 5}
    assert [r.dispatch_id for r in reports] == [message.dispatch_id]
    assert rt.history.for_run(RUN) and all(
        row["outcome"] == "succeeded" for row in rt.history.for_run(RUN)
    )


def test_a_crawl_that_outlives_its_lease_after_a_hand_over_keeps_the_next_part_s(rt, clock):
    # Given a batch of ten whose first page finds two pages (a part after eight), whose last
    # two pages each take 60 % of the dispatch lease, and the ticker reclaiming between pages
    _discovering(rt, clock)
    lease_s = rt.settings.dispatch_lease_s
    reclaimed: list[int] = []
    crawled: list[int] = []
    step = SCRIPT["step"]

    def slow_after_the_part(index, job, context):
        crawled.append(index)
        step(index, job, context)
        if index >= 8:
            clock.advance(0.6 * lease_s)
        reclaimed.append(reclaim_expired(rt, lambda report: None))

    SCRIPT["step"] = slow_after_the_part
    message = _admitted(rt, 10, login=False)
    # When it is crawled
    counts, reports = _crawl(rt, message)
    # Then the lease renewed was the next part's (the old id holds nothing): nothing was
    # reclaimed, and the next part ended its pages on their merits
    assert clock.monotonic() >= lease_s
    assert set(reclaimed) == {0}
    assert [i for i in crawled if i >= 0] == list(range(10))
    assert len(reports) >= 2 and counts.get("succeeded", 0) >= 2


def test_each_request_is_progress_that_keeps_the_lease_of_a_long_single_job(rt, clock, monkeypatch):
    # Given one job that sends ten requests, each a quarter of the lease apart
    lease_s = rt.settings.dispatch_lease_s
    reclaimed: list[int] = []

    def step(index, job, context):
        for _ in range(10):
            clock.advance(0.25 * lease_s)
            context.http.on_request()  # what PoliteHttp calls before every request it sends
            reclaimed.append(reclaim_expired(rt, lambda report: None))

    SCRIPT["step"] = step
    message = _admitted(rt, 1, login=False, selenium=False)
    _lease_from_now(rt, message)

    # Then the job is never reclaimed and ends on its own merits
    assert _crawl(rt, message)[0] == {"succeeded": 1}
    assert set(reclaimed) == {0}


@pytest.mark.parametrize(("waited", "renewals"), [(0.0, 0), (0.5, 1)])
def test_a_fresh_claim_is_not_renewed_on_its_first_page_and_one_that_waited_is(
    rt, clock, monkeypatch, waited, renewals
):
    # Given a batch claimed with a whole lease, its message taken at once or after it waited
    # half the lease (parked for an account, say)
    lease_s = rt.settings.dispatch_lease_s
    renewed: list[str] = []
    store_class = type(rt.jobs("profiles"))
    real = store_class.renew_dispatch

    def counted(self, dispatch_id, deadline):
        renewed.append(dispatch_id)
        return real(self, dispatch_id, deadline)

    monkeypatch.setattr(store_class, "renew_dispatch", counted)
    message = _admitted(rt, 3, login=False, selenium=False)
    _lease_from_now(rt, message)
    clock.advance(waited * lease_s)
    # When it is crawled quickly (no page takes long)
    assert _crawl(rt, message)[0] == {"succeeded": 3}
    # Then a lease with more than two thirds left was not renewed; a shorter one was, once
    assert renewed == [message.dispatch_id] * renewals


def test_a_stuck_crawl_is_reclaimed_its_late_work_counts_nothing_and_its_jobs_go_back(rt, clock):
    # Given a batch of three whose first job hangs for longer than the dispatch lease
    lease_s = rt.settings.dispatch_lease_s
    reclaimed: list[int] = []

    def step(index, job, context):
        if index == 0:
            clock.advance(lease_s + 1)
            reclaimed.append(reclaim_expired(rt, lambda report: None))

    SCRIPT["step"] = step
    message = _admitted(rt, 3, login=False, selenium=False)
    _lease_from_now(rt, message)

    # When the crawl wakes up and goes on
    counts, reports = _crawl(rt, message)

    # Then the ticker reclaimed all three while it hung; the crawl noticed at its next sign of
    # progress, recorded and reported nothing, and the jobs wait in their run for another try
    assert reclaimed == [3]
    assert (counts, reports) == ({}, [])
    for doc in _jobs(rt, message).values():
        assert (doc["state"], doc["last_outcome"], doc["redo_run"]) == (1, "redo", RUN)
        assert doc.get("attempt_count", 0) == 0
    assert len(CONTEXTS) == 1  # the driver never ran job1 and job2


# -- the message against the store -------------------------------------------------------------


def _forged(rt, message: BatchMessage, forgery: str) -> BatchMessage:
    if forgery == "driver":  # a real driver, not the one the store names for twitter
        return message.model_copy(update={"driver_class": "http"})
    if forgery == "media id":
        return message.model_copy(update={"media_id": message.media_id + 1000})
    if forgery == "no account needed":  # the store's task needs one
        return message.model_copy(update={"need_login": not message.need_login})
    if forgery == "no browser needed":
        return message.model_copy(update={"need_selenium": not message.need_selenium})
    if forgery == "crawl limit":
        return message.model_copy(update={"crawl_limit": message.crawl_limit + 1})
    if forgery == "no proxy needed":  # the store's media goes out through proxies
        rt.db.childs_socialmedia.update_one(
            {"media_name": message.media_name}, {"$set": {"proxy": {"group": "home"}}}
        )
        return message
    # another media, named as the store has it, over twitter's jobs
    tiktok = rt.reference.media_by_name("tiktok")
    rt.db.childs_socialmedia.update_one(
        {"media_name": "tiktok"}, {"$set": {"driver_class": "crawl-batch"}}
    )
    return message.model_copy(update={"media_name": "tiktok", "media_id": tiktok["media_name_id"]})


@pytest.mark.parametrize(
    "forgery",
    [
        "driver",
        "media id",
        "jobs of another media",
        "no account needed",
        "no browser needed",
        "crawl limit",
        "no proxy needed",
    ],
)
def test_a_message_disagreeing_with_the_store_is_refused_and_crawls_nothing(rt, forgery):
    from crawlsched.messages import BadMessage

    SCRIPT["step"] = lambda index, job, context: context.save("profile", [{"key": "k"}])
    message = _forged(rt, _admitted(rt, 2), forgery)

    with pytest.raises(BadMessage, match="refused"):
        _crawl(rt, message)

    # No driver ran, nothing was stored, the jobs stay claimed (dispatch expiry gives them
    # back) and the batch's leases were given back.
    assert CONTEXTS == []
    assert rt.db[MODEL_COLLECTIONS["profile"]].count_documents({}) == 0
    jobs = _jobs(rt, message).values()
    assert {job.get("last_outcome") for job in jobs} == {None}
    assert {job["dispatch_id"] for job in jobs} == {message.dispatch_id}
    assert rt.inventory.overview(rt.now())["account"]["held"] == 0
    assert rt.inventory.overview(rt.now())["selenium"]["held"] == 0


def test_the_crawl_runs_the_driver_the_store_names_even_after_a_reference_reload(rt):
    message = _admitted(rt, 1)
    rt.media("twitter")  # cached by this process, naming the scripted driver
    rt.db.childs_socialmedia.update_one(
        {"media_name": "twitter"}, {"$set": {"driver_class": "noop"}}
    )

    renamed = message.model_copy(update={"driver_class": "noop"})
    assert _crawl(rt, renamed)[0] == {"succeeded": 1}
    assert CONTEXTS == []  # the built-in noop driver ran, not the cached row's scripted one


def test_jobs_of_a_host_held_elsewhere_wait_for_it_and_the_batch_crawls_the_others(rt, clock):
    # Given a batch of four jobs on two hosts, one of them held by another worker process
    from crawlsched.resources.host_rules import host_key

    message = _admitted(rt, 4, login=False, selenium=False)
    jobs = _jobs(rt, message)
    for name, host in (("job0", "a"), ("job1", "b"), ("job2", "a"), ("job3", "b")):
        rt.db.profiles.update_one(
            {"_id": jobs[name]["_id"]}, {"$set": {"url": f"https://{host}.test/{name}"}}
        )
    held_by_other, _ = rt.hosts.acquire("https://a.test:443", "other", rt.host_policy, NOW, 30)
    crawled: list[str] = []

    def step(index, job, context):
        with rt.pacer.slot(host_key(job.url)):  # as PoliteHttp asks before each request
            crawled.append(job.url)

    SCRIPT["step"] = step
    woken, woken_at = [], []

    # When the batch is crawled
    counts, _ = _crawl(rt, message, wake=woken.append, wake_at=lambda k, t: woken_at.append((k, t)))

    # Then the other host's jobs were crawled, and the held host's wait for it: parked,
    # named by the host, and woken when the holder's slice ends at the latest
    assert crawled == ["https://b.test/job1", "https://b.test/job3"]
    assert counts == {"succeeded": 2}
    (waiting,) = rt.waiting.all()
    assert waiting["needs"] == ["host:https://a.test:443"] and waiting["jobs"] == 2
    assert waiting.get("not_before") is None  # a held host wakes them by its release
    assert woken_at == [(frozenset({"host:https://a.test:443"}), held_by_other.lease_until)]
    again = set(rt.jobs("profiles").claimed_ids(waiting["_id"]))
    assert again == {jobs["job0"]["_id"], jobs["job2"]["_id"]}


def test_a_new_sites_robots_txt_is_read_first_and_its_page_waits_while_other_hosts_go(
    rt, clock, monkeypatch
):
    # Given a 1 s delay per host and a batch of four jobs on three hosts no process knows yet
    from crawlsched.drivers.fetching import PoliteHttp
    from crawlsched.resources.host_rules import HostPolicy, host_key

    rt.pacer.default = HostPolicy(1.0, 1, 0)
    message = _admitted(rt, 4, login=False, selenium=False)
    jobs = _jobs(rt, message)
    for name, host in (("job0", "a"), ("job1", "a"), ("job2", "b"), ("job3", "c")):
        rt.db.profiles.update_one(
            {"_id": jobs[name]["_id"]}, {"$set": {"url": f"https://{host}.test/{name}"}}
        )
    sent: list[tuple[str, str, float]] = []
    known: set[str] = set()

    def robots_first(self, url):  # a robots.txt request, paced as PoliteHttp paces it
        key = host_key(url)
        if key in known:
            return False
        known.add(key)
        with rt.pacer.slot(key):
            sent.append(("robots", key, clock.monotonic()))
        return True

    def step(index, job, context):
        with rt.pacer.slot(host_key(job.url)):
            sent.append(("page", job.url, clock.monotonic()))

    monkeypatch.setattr(PoliteHttp, "robots_first", robots_first)
    SCRIPT["step"] = step

    # When the batch is crawled by one thread
    counts, _ = _crawl(rt, message)

    # Then each site's robots.txt goes first, the three at once; each page follows its own
    # host's robots.txt by the delay, the other hosts' requests in between
    assert counts == {"succeeded": 4}
    assert sent == [
        ("robots", "https://a.test:443", 0.0),
        ("robots", "https://b.test:443", 0.0),
        ("robots", "https://c.test:443", 0.0),
        ("page", "https://a.test/job1", 1.0),
        ("page", "https://b.test/job2", 1.0),
        ("page", "https://c.test/job3", 1.0),
        ("page", "https://a.test/job0", 2.0),
    ]


def test_a_host_the_batch_is_done_with_is_given_back_and_its_waiters_woken_at_once(
    rt, clock, monkeypatch
):
    # Given a 1 s delay per host and a batch of one job on host a and two on host b
    from crawlsched.drivers.fetching import PoliteHttp
    from crawlsched.resources.host_rules import HostPolicy, host_key

    rt.pacer.default = HostPolicy(1.0, 1, 0)
    monkeypatch.setattr(PoliteHttp, "robots_first", lambda self, url: False)
    message = _admitted(rt, 3, login=False, selenium=False)
    jobs = _jobs(rt, message)
    for name, host in (("job0", "a"), ("job1", "b"), ("job2", "b")):
        rt.db.profiles.update_one(
            {"_id": jobs[name]["_id"]}, {"$set": {"url": f"https://{host}.test/{name}"}}
        )
    seen: list[tuple] = []

    def step(index, job, context):
        with rt.pacer.slot(host_key(job.url)):
            seen.append(("page", job.url, clock.monotonic()))
            # another process asks for the host meanwhile (refused: this one holds it)
            rt.hosts.acquire(host_key(job.url), "other", rt.pacer.default, rt.now(), 10.0)

    SCRIPT["step"] = step

    # When the batch is crawled
    _crawl(rt, message, wake=lambda keys: seen.append(("wake", sorted(keys))))

    # Then host a went back, and its waiters were woken, as soon as its one job was done,
    # while the batch still waited a delay for host b; b went back at the batch's end
    assert seen == [
        ("page", "https://a.test/job0", 0.0),
        ("wake", ["host:https://a.test:443"]),
        ("page", "https://b.test/job1", 0.0),
        ("page", "https://b.test/job2", 1.0),
        ("wake", ["host:https://b.test:443"]),
    ]
    assert rt.hosts.held_until("https://a.test:443", clock.now()) is None


def test_a_batch_parking_for_a_held_host_marks_it_wanted_in_one_write(rt, monkeypatch):
    # Given a host held by another worker process, and a batch whose rest waits for it
    from crawlsched.store.counting import CommandCounter, CountingCollection

    key = "https://a.test:443"
    held_by_other, _ = rt.hosts.acquire(key, "other", rt.host_policy, NOW, 30)
    monkeypatch.setattr(frontier, "requeue", lambda *args, **kwargs: None)  # jobs aside
    host_commands = CommandCounter()
    monkeypatch.setattr(rt.hosts, "_hosts", CountingCollection(rt.db.hosts.raw, host_commands))
    woken_at = []

    # When it parks
    wake_now = frontier.wait_for_hosts(
        rt, _admitted(rt, 1, login=False, selenium=False), ["job0"], "host not ready", {key: None},
        None, lambda keys, when: woken_at.append((keys, when)),
    )  # fmt: skip

    # Then it is woken at the holder's slice end at the latest, learned in one write that
    # also marks the host wanted, so the holder's release wakes it sooner (two reads once:
    # whether it is held, then until when)
    assert wake_now == set()
    assert woken_at == [(frozenset({f"host:{key}"}), held_by_other.lease_until)]
    assert dict(host_commands.boundary) == {"find_one_and_update": 1}
    assert rt.hosts.release(key, "other", None, 0, NOW) is True


def test_jobs_of_a_host_given_back_while_the_batch_crawled_the_others_are_crawled_not_parked(
    rt, clock
):
    # Given a batch of four jobs on two hosts, one held by another worker process that gives
    # it back while the batch crawls the other host
    from crawlsched.resources.host_rules import host_key

    message = _admitted(rt, 4, login=False, selenium=False)
    jobs = _jobs(rt, message)
    for name, host in (("job0", "a"), ("job1", "b"), ("job2", "a"), ("job3", "b")):
        rt.db.profiles.update_one(
            {"_id": jobs[name]["_id"]}, {"$set": {"url": f"https://{host}.test/{name}"}}
        )
    a_host = "https://a.test:443"
    rt.hosts.acquire(a_host, "other", rt.host_policy, NOW, 30)
    crawled: list[str] = []

    def step(index, job, context):
        with rt.pacer.slot(host_key(job.url)):
            crawled.append(job.url)
        if job.url.startswith("https://b.test/"):
            rt.hosts.release(a_host, "other", None, 0, rt.now())

    SCRIPT["step"] = step

    # When the batch is crawled
    counts, _ = _crawl(rt, message)

    # Then the held host was asked for once more before its jobs were parked: all four were
    # crawled in this delivery and nothing waits
    assert sorted(crawled) == [
        f"https://{h}.test/job{i}" for h, i in (("a", 0), ("a", 2), ("b", 1), ("b", 3))
    ]
    assert crawled[:1] == ["https://b.test/job1"]
    assert counts == {"succeeded": 4}
    assert rt.waiting.all() == []


# -- a batch hands the pages it found to its run while it goes on -----------------------------


def _discovering(rt, clock):
    """Job 0 finds two pages; every job takes a second; parts handed over as soon as they are
    big enough (8 pages, `frontier_rules.MIN_PART_PAGES`)."""
    rt.settings = rt.settings.model_copy(update={"discovery_flush_s": 1e-6})

    def step(index, job, context):
        clock.advance(1)
        if index == 0:
            for page in range(2):
                context.discover(f"https://twitter.test/{job.target}/p{page}", task="friend")

    SCRIPT["step"] = step


def test_a_part_handed_over_is_recorded_and_reported_before_the_rest_is_crawled(rt, clock):
    # Given a batch of ten whose first page finds two pages
    _discovering(rt, clock)
    message = _admitted(rt, 10, login=False)
    # When it is crawled
    counts, reports = _crawl(rt, message)
    # Then its first eight pages went out as a part: recorded under the batch's dispatch (the
    # children registered, found by it), reported, and the other two under a new one
    jobs = _jobs(rt, message)
    first = [jobs[f"job{n}"] for n in range(8)]
    rest = [jobs["job8"], jobs["job9"]]
    assert {doc["last_dispatch_id"] for doc in first} == {message.dispatch_id}
    assert {doc["last_dispatch_id"] for doc in rest} == {reports[1].dispatch_id}
    assert [r.dispatch_id for r in reports] == [message.dispatch_id, reports[1].dispatch_id]
    assert reports[1].dispatch_id != message.dispatch_id
    children = list(rt.db.profiles.find({"scope_run": RUN, "depth": 1}))
    assert {c["found_by"] for c in children} == {message.dispatch_id} and len(children) == 2
    assert counts == {"succeeded": 2}  # the last part's
    # Planning and admission were counted once, with the first report
    assert "crawl" in reports[1].stages_ms and set(reports[1].stages_ms) == {"crawl"}


def test_a_page_reclaimed_during_a_hand_over_is_not_crawled_by_the_batch(rt, clock, monkeypatch):
    # Given a batch of ten whose first page finds two pages (a part after eight), and the
    # ticker reclaiming its last page just as the hand-over moves the rest on
    _discovering(rt, clock)
    crawled: list[int] = []
    step = SCRIPT["step"]
    SCRIPT["step"] = lambda index, job, context: (crawled.append(index), step(index, job, context))
    message = _admitted(rt, 10, login=False)
    last = message.decoded_job_ids()[9]
    reassign = MongoJobStore.reassign

    def reclaimed_first(self, dispatch_id, new_dispatch_id, job_ids, *args):
        self._jobs.update_one({"_id": last}, {"$set": {"dispatch_id": "reclaimer"}})
        return reassign(self, dispatch_id, new_dispatch_id, job_ids, *args)

    monkeypatch.setattr(MongoJobStore, "reassign", reclaimed_first)
    # When it is crawled
    counts, _ = _crawl(rt, message)
    # Then the batch crawled its first nine pages and not the one it no longer held
    assert sorted(i for i in crawled if i >= 0) == list(range(9))
    assert rt.db.profiles.find_one({"_id": last})["dispatch_id"] == "reclaimer"
    assert counts == {"succeeded": 1}


def _queued_work(rt, clock, monkeypatch, jobs: int) -> None:
    """Hand-overs due every second of the test's clock; the profile task's batches hold 4
    pages (work enough queued: `QUEUED_BATCHES_ENOUGH` of them, 8 pages); and a batch of the
    run with `jobs` pages that has not begun."""
    claimed_batch(
        rt, jobs, run_id=RUN, driver_class="crawl-batch", login=False, selenium=False,
        open_to_take_over=True,
    )  # fmt: skip
    twitter = rt.reference.media_by_name("twitter")
    rt.db[TASKS_COLLECTION].update_one(
        {"media_name_id": twitter["_id"], "name": "profile"}, {"$set": {"batch_limit": 4}}
    )
    _discovering(rt, clock)
    rt.settings = rt.settings.model_copy(update={"discovery_flush_s": 1.0})


@pytest.mark.parametrize(("queued", "parts"), [(8, 1), (7, 2)])
def test_a_part_is_kept_back_while_the_run_has_work_enough_queued(
    rt, clock, monkeypatch, queued, parts
):
    # Given a batch of ten whose first page finds two pages, a page a second, and the run's
    # batches that have not begun holding two batches' worth of pages (or one page less)
    _queued_work(rt, clock, monkeypatch, queued)
    message = _admitted(rt, 10, login=False)
    # When it is crawled
    counts, reports = _crawl(rt, message)
    # Then with work enough queued no thread needed its found pages early: one part, one
    # report; with less, its first eight pages were handed over as soon as they could be
    assert len(reports) == parts
    assert counts == {"succeeded": 10 if parts == 1 else 2}
    children = list(rt.db.profiles.find({"scope_run": RUN, "depth": 1}))
    assert {c["found_by"] for c in children} == {message.dispatch_id} and len(children) == 2


def test_a_part_kept_back_is_handed_over_after_ten_periods_all_the_same(rt, clock, monkeypatch):
    # Given work enough queued, and a batch of 24 whose pages each find one page, a page a
    # second, hand-overs due every second
    _queued_work(rt, clock, monkeypatch, 8)

    def step(index, job, context):
        clock.advance(1)
        context.discover(f"https://twitter.test/{job.target}/p", task="friend")

    SCRIPT["step"] = step
    message = _admitted(rt, 24, login=False)
    # When it is crawled
    counts, reports = _crawl(rt, message)
    # Then each part was kept back ten periods at the most: parts of 10, 10 and 4 pages
    assert len(reports) == 3
    dispatches = [doc["last_dispatch_id"] for doc in _jobs(rt, message).values()]
    assert sorted(dispatches.count(r.dispatch_id) for r in reports) == [4, 10, 10]
    assert counts == {"succeeded": 4}


def test_a_crash_after_a_hand_over_loses_nothing_and_waits_for_no_lease(rt, clock):
    # Given a batch of ten whose first page finds two pages, and a worker that dies when it
    # reports its first part of eight (after the part was recorded and the rest moved)
    _discovering(rt, clock)
    message = _admitted(rt, 10, login=False)

    def dies(report: ReportMessage) -> None:
        raise SystemExit("worker killed")

    with pytest.raises(SystemExit):
        crawl_batch(rt, message, report=dies)
    part = batch_parts.part_dispatch_id(message.dispatch_id, 1)
    running = rt.db.profiles.find({"state": int(JobState.RUNNING)})
    assert {doc["dispatch_id"] for doc in running} == {part}
    # When the message is delivered again (the broker never saw it acknowledged)
    counts, reports = _crawl(rt, message, first_delivery=False)
    # Then it crawls nothing again, and sends the first part's report it could not send
    assert [r.dispatch_id for r in reports] == [message.dispatch_id]
    assert counts == {"succeeded": 8}
    jobs = _jobs(rt, message)
    assert all(jobs[f"job{n}"]["last_outcome"] == "succeeded" for n in range(8))
    assert len(CONTEXTS) == 8  # the driver ran for the first part's pages only
    # And the rest, held by the part's dispatch id that no message names, is back waiting at
    # once, under a dispatch of its own: no dispatch lease to wait for
    rest = (jobs["job8"], jobs["job9"])
    (waiting,) = rt.waiting.all()
    assert {doc["dispatch_id"] for doc in rest} == {waiting["_id"]} != {part}
    assert waiting["jobs"] == 2
    # And admitted, it crawls the last two pages: each of the ten crawled once, all counted
    sent: list[BatchMessage] = []
    assert admit_waiting(rt, None, sent.append) == 1
    counts, reports = _crawl(rt, sent[0])
    assert counts == {"succeeded": 2} and [r.dispatch_id for r in reports] == [waiting["_id"]]
    assert len(CONTEXTS) == 10
    assert all(doc["last_outcome"] == "succeeded" for doc in _jobs(rt, message).values())


@settings(max_examples=200)
@given(st.text(alphabet="0123456789abcdef", min_size=32, max_size=32), st.integers(1, 10**6))
def test_a_part_s_dispatch_id_is_a_dispatch_id_worked_out_from_its_message_s(root, part):
    made = batch_parts.part_dispatch_id(root, part)
    assert re.fullmatch(DISPATCH_ID_PATTERN, made)
    assert made == batch_parts.part_dispatch_id(root, part) != root
    assert made not in {batch_parts.part_dispatch_id(root, part + 1), root}


def test_a_redelivery_finds_the_rest_after_hundreds_of_parts_and_only_its_own(rt, clock):
    # Given two batches whose rests were left by their dead workers under their 300th part's
    # id and their 1st
    first = _admitted(rt, 3, login=False, selenium=False)
    other = _admitted(rt, 2, login=False, selenium=False)
    store = rt.jobs(first.collection)
    late = batch_parts.part_dispatch_id(first.dispatch_id, 300)
    store.reassign(first.dispatch_id, late, first.decoded_job_ids())
    early = batch_parts.part_dispatch_id(other.dispatch_id, 1)
    store.reassign(other.dispatch_id, early, other.decoded_job_ids())
    # When the first batch's message is redelivered
    reports: list[ReportMessage] = []
    recovered = recovery.recover_parts(rt, first, reports.append)
    assert (recovered.requeued, recovered.reports, reports) == (3, 0, [])
    # (waiting for its host, and woken for it at once: it may be free already)
    assert recovered.wake == {"host:https://twitter.test:443"} == set(rt.waiting.all()[0]["needs"])
    # Then its three jobs wait again, under one dispatch; the other batch's rest is not touched
    (waiting,) = rt.waiting.all()
    assert waiting["jobs"] == 3
    assert store.claimed_ids(waiting["_id"]) and sorted(
        store.claimed_ids(waiting["_id"])
    ) == sorted(first.decoded_job_ids())
    assert sorted(store.claimed_ids(early)) == sorted(other.decoded_job_ids())
    again = recovery.recover_parts(rt, first, reports.append)  # (a second redelivery)
    assert again == recovery.PartsRecovered(requeued=0, reports=0)


def test_a_crash_between_a_later_part_s_record_and_its_report_has_the_report_sent_again(rt, clock):
    # Given a batch of twenty whose pages each find a page, and a worker that dies when it
    # reports its second part (recorded under the first part's id, the rest moved on)
    _discovering(rt, clock)

    def step(index, job, context):
        clock.advance(1)
        context.discover(f"https://twitter.test/{job.target}/p", task="friend")

    SCRIPT["step"] = step
    message = _admitted(rt, 20, login=False)
    rt.db.runs.update_one({"_id": RUN}, {"$set": {"planning": False, "outstanding": 20}})
    sent: list[ReportMessage] = []

    def dies_at_the_second(report: ReportMessage) -> None:
        if sent:
            raise SystemExit("worker killed")
        sent.append(report)

    with pytest.raises(SystemExit):
        crawl_batch(rt, message, report=dies_at_the_second)
    first_part = batch_parts.part_dispatch_id(message.dispatch_id, 1)
    assert [r.dispatch_id for r in sent] == [message.dispatch_id]
    assert rt.db.profiles.count_documents({"last_dispatch_id": first_part}) == 8
    # When the message is delivered again
    _, reports = _crawl(rt, message, first_delivery=False)
    # Then the second part's report, which no one sent, is sent now (with the first's again:
    # the coordinator ignores a report it applied), and the rest of four waits again
    assert sorted(r.dispatch_id for r in reports) == sorted([message.dispatch_id, first_part])
    for report in reports:
        record_report(rt, report)
    run = rt.runs.get(RUN)
    found = rt.db.profiles.count_documents({"scope_run": RUN, "depth": 1})
    assert run["counts"] == {"succeeded": 16} and run["discovered"] == found == 3  # (max_pages)
    assert run["outstanding"] == 20 - 16 + found  # the rest of four and the pages found
    (waiting,) = rt.waiting.all()
    assert waiting["jobs"] == 4


# -- a batch keeps the pages it found of hosts its process holds ------------------------------


def _keeping(rt, monkeypatch, applied: list, fails: BaseException | None = None):
    """Parts handed over as soon as they may be; every host held and paced by this process
    (the driver sends no request: the pacer is told so); twitter's run bounds wide enough.
    Returns the `apply_report` a crawl worker passes: it records what it was asked, then
    applies the report as the coordinator would (or raises `fails`)."""
    rt.settings = rt.settings.model_copy(update={"discovery_flush_s": 1e-6})
    rt.db.childs_socialmedia.update_one(
        {"media_name": "twitter"}, {"$set": {"max_depth": 3, "max_pages": 100}}
    )
    run = {"planning": False, "outstanding": 2, "created_at": NOW}
    rt.db.runs.update_one({"_id": RUN}, {"$set": run})
    monkeypatch.setattr(rt.pacer, "keeps", lambda key, idle=False: True)
    planned: list = []

    def apply(report: ReportMessage, kept: int) -> None:
        applied.append((report.dispatch_id, kept))
        if fails is not None:
            raise fails
        record_report(rt, report, plan_children=lambda *args: planned.append(args), kept=kept)

    apply.planned = planned
    return apply


def _finding(rt, found: dict[str, list[str]], crawled: list[str], counted: list[bool]):
    """A driver step: a page finds the pages `found` lists for its URL's last segment (of its
    own task); each discovered page crawled notes whether its run counted it by then."""

    def step(index, job, context):
        rt.env.sleep(1e-3)  # a page takes its time: a part is a period old after one
        crawled.append(job.url)
        if index < 0:
            doc = rt.db.profiles.find_one({"_id": job.job_id}, {"released": 1})
            counted.append(doc.get("released") is True)
        for path in found.get(job.url.rsplit("/", 1)[-1], []):
            context.discover(f"https://twitter.test/{path}", task="profile")

    return step


def test_a_batch_crawls_the_pages_it_found_of_a_host_its_process_holds_once_its_run_counts_them(
    rt, clock, monkeypatch, registry
):
    # Given a batch of two whose first page finds three pages, each of which finds one more,
    # all of one host its process holds and paces
    applied: list = []
    apply = _keeping(rt, monkeypatch, applied)
    message = _admitted(rt, 2, login=False, selenium=False)
    crawled, counted = [], []
    found = {"job0": ["a1", "a2", "a3"], "a1": ["b1"], "a2": ["b2"], "a3": ["b3"]}
    SCRIPT["step"] = _finding(rt, found, crawled, counted)
    # When it is crawled
    reports: list[ReportMessage] = []
    counts = crawl_batch(rt, message, report=reports.append, apply_report=apply)
    # Then the six pages found were crawled by the batch itself, each once, and each only
    # after the report of the part that found it was applied here (the run counted it)
    found_pages = [f"https://twitter.test/{x}{n}" for x in "ab" for n in (1, 2, 3)]
    assert sorted(url for url in crawled if "/job" not in url) == found_pages
    assert len(crawled) == len(set(crawled)) == 8
    assert counted == [True] * 6
    # Two hand-overs kept three pages each, their reports applied here with no planning asked
    # for; the last part's report goes to the coordinator as any batch's end
    assert [kept for _, kept in applied] == [3, 3] and apply.planned == []
    parts = [batch_parts.part_dispatch_id(message.dispatch_id, n) for n in (1, 2)]
    assert [dispatch_id for dispatch_id, _ in applied] == [message.dispatch_id, parts[0]]
    assert [r.dispatch_id for r in reports] == [parts[1]] and counts == {"succeeded": 3}
    children = list(rt.db.profiles.find({"scope_run": RUN, "depth": {"$gte": 1}}))
    assert {c["last_dispatch_id"] for c in children if c["depth"] == 1} == {parts[0]}
    assert all(c["last_outcome"] == "succeeded" for c in children) and len(children) == 6
    # And once the last report is applied, the run has counted every page in and off
    record_report(rt, reports[0])
    run = rt.runs.get(RUN)
    assert run["discovered"] == 6 and run["counts"] == {"succeeded": 8}
    assert run["state"] in ENDED and run["result"] == "succeeded"
    kept_total = {
        tuple(s.labels.values()): s.value
        for family in registry.collect()
        for s in family.samples
        if s.name == "crawlsched_pages_kept_total"
    }
    assert kept_total == {("profile", "twitter"): 6}


def test_a_page_found_again_while_the_batch_holds_it_is_crawled_once(rt, clock, monkeypatch):
    # Given a batch whose first page finds a1 and a2, and a1 finds a2 again (kept already, not
    # crawled yet) with a3; a part handed over after each page
    apply = _keeping(rt, monkeypatch, [])
    monkeypatch.setattr(frontier_rules, "MIN_PART_PAGES", 1)
    message = _admitted(rt, 2, login=False, selenium=False)
    crawled: list[str] = []
    found = {"job0": ["a1", "a2"], "a1": ["a2", "a3"]}
    SCRIPT["step"] = _finding(rt, found, crawled, [])
    # When it is crawled
    crawl_batch(rt, message, report=lambda report: None, apply_report=apply)
    # Then every page was crawled once
    assert sorted(crawled) == sorted(
        f"https://twitter.test/{page}" for page in ("job0", "job1", "a1", "a2", "a3")
    )
    # (and the store's claim hands back only what it took, never a page the dispatch held)
    store = rt.jobs("profiles")
    held = rt.db.profiles.find_one({"url": "https://twitter.test/a3"})
    assert store.keep_found([held["_id"]], held["found_by"], held["last_dispatch_id"], NOW) == []


def test_a_part_s_report_not_applied_here_goes_to_the_coordinator_and_the_pages_wait_for_it(
    rt, clock, monkeypatch
):
    # Given a batch whose first page finds three pages of a host its process holds, and a
    # store that fails when the part's report is applied in the crawl thread
    applied: list = []
    apply = _keeping(rt, monkeypatch, applied, fails=RuntimeError("store unreachable"))
    message = _admitted(rt, 2, login=False, selenium=False)
    crawled: list[str] = []
    SCRIPT["step"] = _finding(rt, {"job0": ["a1", "a2", "a3"]}, crawled, [])
    # When it is crawled
    reports: list[ReportMessage] = []
    crawl_batch(rt, message, report=reports.append, apply_report=apply)
    # Then the report went to the coordinator instead, and the batch crawled none of the three:
    # their run does not count them yet, so they went back to be planned once it does
    assert [r.dispatch_id for r in reports] == [message.dispatch_id] and len(applied) == 1
    assert sorted(crawled) == ["https://twitter.test/job0", "https://twitter.test/job1"]
    pages = list(rt.db.profiles.find({"scope_run": RUN, "depth": 1}))
    assert len(pages) == 3
    assert all(p["state"] == int(JobState.PENDING) and p.get("dispatch_id") is None for p in pages)
    assert not any(p["released"] for p in pages)
    # And the coordinator's count releases them to the run's pass
    record_report(rt, reports[0])
    assert rt.db.profiles.count_documents(children_filter(RUN)) == 3


def test_a_redelivery_gives_the_pages_a_dead_batch_kept_before_its_run_counted_them_back(
    rt, clock, monkeypatch
):
    # Given a batch of three whose first page finds two pages of a host its process holds, and
    # a worker killed after the part kept them, before its report was applied
    apply = _keeping(rt, monkeypatch, [], fails=SystemExit("worker killed"))
    message = _admitted(rt, 3, login=False, selenium=False)
    SCRIPT["step"] = _finding(rt, {"job0": ["a1", "a2"]}, [], [])
    rt.settings = rt.settings.model_copy(update={"discovery_flush_s": 1e-6})
    monkeypatch.setattr(frontier_rules, "MIN_PART_PAGES", 1)
    with pytest.raises(SystemExit):
        crawl_batch(rt, message, report=lambda report: None, apply_report=apply)
    part = batch_parts.part_dispatch_id(message.dispatch_id, 1)
    held = list(rt.db.profiles.find({"dispatch_id": part}))
    assert sorted(d.get("url", d.get("target"))[-2:] for d in held if d.get("depth")) == [
        "a1",
        "a2",
    ]
    # When its message is delivered again
    reports: list[ReportMessage] = []
    crawl_batch(rt, message, report=reports.append, first_delivery=False)
    # Then the part's report is sent again, the two pages its run does not count yet wait to
    # be planned once it does (not to be crawled before), and the rest of the batch waits again
    assert {r.dispatch_id for r in reports} == {message.dispatch_id}
    pages = list(rt.db.profiles.find({"scope_run": RUN, "depth": 1}))
    assert all(p["state"] == int(JobState.PENDING) and p.get("dispatch_id") is None for p in pages)
    (waiting,) = rt.waiting.all()
    assert waiting["jobs"] == 2  # job1 and job2
    record_report(rt, reports[0])
    assert rt.db.profiles.count_documents(children_filter(RUN)) == 2


@pytest.mark.parametrize("paused", [False, True])
def test_a_batch_keeps_what_it_can_crawl_in_its_time_and_nothing_once_its_run_is_paused(
    rt, clock, monkeypatch, paused
):
    # Given a batch whose first page finds five pages of a host paced at 159 s, so that what
    # its time limit of 600 s lets it crawl well before it is three pages (and, in the second
    # case, a run paused meanwhile)
    apply = _keeping(rt, monkeypatch, [])
    monkeypatch.setattr(rt.pacer, "delay_of", lambda key: 159.0)
    assert rt.settings.crawl_time_limit_s == 600
    message = _admitted(rt, 2, login=False, selenium=False)
    crawled: list[str] = []
    step = _finding(rt, {"job0": [f"a{n}" for n in range(1, 6)]}, crawled, [])

    def then_pause(index, job, context):
        step(index, job, context)
        if paused and index == 1:
            rt.db.runs.update_one({"_id": RUN}, {"$set": {"paused": True}})
            clock.advance(rt.settings.stop_check_s)  # (the stop watch reads again)

    SCRIPT["step"] = then_pause
    # When it is crawled
    reports: list[ReportMessage] = []
    crawl_batch(rt, message, report=reports.append, apply_report=apply)
    # Then it crawled three of them itself, and the other two went to the run to be planned
    # (all five, when the run was paused: they wait with it)
    kept = [url for url in crawled if "/a" in url]
    assert len(kept) == (0 if paused else 3)
    for report in reports:
        record_report(rt, report)
    assert rt.db.profiles.count_documents(children_filter(RUN)) == 5 - len(kept)
