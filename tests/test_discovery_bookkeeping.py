"""The discovery bookkeeping a run's end depends on, guarded one rule at a time.

Each rule here was changed by hand once and no other test noticed: a report releases only its
own dispatch's children; the ticker asks again for a lost children pass; pages still running
are outstanding per depth; a restart re-sends a lost report of given-up jobs as what it is and
frees a pool whose only lease died; the embedded store reads every cursor under its lock; a
host that only ends with the site's name is off-site; and a crawl that tries a reclaimed
dispatch's pages again adopts what the dead one discovered but never reported.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from crawlsched.catalog import JobState
from crawlsched.drivers.base import CrawlJob
from crawlsched.drivers.context import CrawlBounds, CrawlContext, Discovery
from crawlsched.flow.children import SWEEP_AFTER_S, sweep_waiting_children
from crawlsched.flow.coordination import record_report
from crawlsched.flow.restart import recover_lost_messages
from crawlsched.flow.views import by_depth
from crawlsched.messages import ReportMessage
from crawlsched.runtime import Runtime
from crawlsched.store.children import Found, MongoChildStore, child_id
from crawlsched.store.client import open_database
from tests.conftest import settings_for_tests

NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
RUN = "bookkeeping@20261125T090000Z"
MEDIA = {"media_name": "web", "media_name_id": 5}
A, B = "a" * 32, "b" * 32  # dispatch ids as messages carry them


@pytest.fixture(params=["embedded", "server"])
def rt(request, embedded_mongo_url):
    """A runtime on the embedded store, and on the multi-process server: the same rules hold
    on the wire protocol's answers (an upsert's result, a bulk write's duplicate keys)."""
    if request.param == "embedded":
        where = {"mongo_url": embedded_mongo_url}
    else:
        name = request.getfixturevalue("mongo_database_name")
        where = {"mongo_url": request.getfixturevalue("multiprocess_mongo_url"), "mongo_db": name}
    runtime = Runtime(settings_for_tests(**where, broker_url="stub://"), clock=lambda: NOW)
    runtime.create_indexes()
    runtime.runs.open(RUN, "bookkeeping", NOW, NOW)
    runtime.runs.close_planning(RUN, 2, {}, NOW)
    yield runtime
    if request.param == "server":
        runtime.db.raw.client.drop_database(runtime.settings.mongo_db)


def _found(parent: str, *urls: str) -> list[Found]:
    return [Found(parent, Discovery(url, "article", 1, "site.test")) for url in urls]


def _crawled(rt, dispatch: str, job: str) -> None:
    """A planned job of the run that `dispatch` crawled and recorded."""
    rt.db.websites.insert_one(
        {
            "_id": job,
            "run_id": RUN,
            "last_dispatch_id": dispatch,
            "last_outcome": "succeeded",
            "state": int(JobState.PENDING),
        }
    )


def _holding(rt, dispatch: str, job: str) -> None:
    """A job of the run that `dispatch` holds: claimed, crawling, not yet recorded."""
    rt.db.websites.insert_one(
        {"_id": job, "run_id": RUN, "dispatch_id": dispatch, "state": int(JobState.RUNNING)}
    )


AGAIN, LIVE, DEAD = "f" * 32, "e" * 32, "d" * 32  # (as messages carry them)


def _report(dispatch: str) -> ReportMessage:
    return ReportMessage(run_id=RUN, dispatch_id=dispatch, collection="websites", phase="crawl")


def test_a_report_releases_and_counts_only_the_children_of_the_pages_it_ended(rt):
    # Given two dispatches of one run that each registered children; only A has reported
    children = MongoChildStore(rt.db, "websites")
    children.register(
        RUN, A, MEDIA, _found("pa", "http://site.test/a1", "http://site.test/a2"), 100, NOW
    )
    children.register(RUN, B, MEDIA, _found("pb", "http://site.test/b1"), 100, NOW)
    _crawled(rt, A, "pa")

    # When A's report is applied
    asked: list = []
    record_report(rt, _report(A), plan_children=lambda r, c: asked.append((r, c)))

    # Then A's two children are released and counted in; B's stay unreleased and uncounted
    released = {d["url"]: d["released"] for d in rt.db.websites.find({"scope_run": RUN})}
    assert released == {
        "http://site.test/a1": True,
        "http://site.test/a2": True,
        "http://site.test/b1": False,
    }
    run = rt.runs.get(RUN)
    assert (run["discovered"], run["outstanding"]) == (2, 2 - 1 + 2)
    assert asked == [(RUN, "websites")]


def _released_child(rt, released_at: datetime) -> None:
    rt.db.websites.insert_one(
        {
            "_id": f"child:{uuid.uuid4().hex}",
            "scope_run": RUN,
            "state": int(JobState.PENDING),
            "released": True,
            "released_at": released_at,
        }
    )


def test_the_ticker_asks_again_for_a_children_pass_that_was_lost(rt):
    # Given released children nobody planned: one run's since long ago, one's just now
    _released_child(rt, NOW - timedelta(seconds=SWEEP_AFTER_S + 1))
    asked: list = []

    # Then the sweep asks for that run's pass, once
    assert sweep_waiting_children(rt, lambda r, c: asked.append((r, c))) == 1
    assert asked == [(RUN, "websites")]

    # And children released just now are left to the pass already on its way
    rt.db.websites.delete_many({})
    _released_child(rt, NOW)
    assert sweep_waiting_children(rt, lambda r, c: asked.append((r, c))) == 0


def test_pages_still_running_count_as_outstanding_in_the_per_depth_view(rt):
    # Given depth-1 children: one pending, one running, one ended
    for state in (JobState.PENDING, JobState.RUNNING, JobState.FAILED):
        rt.db.websites.insert_one(
            {"_id": uuid.uuid4().hex, "scope_run": RUN, "depth": 1, "state": int(state)}
        )
    rt.db.runs.update_one({"_id": RUN}, {"$set": {"outstanding": 2}})

    (_, depth1) = by_depth(rt, rt.runs.get(RUN))

    assert (depth1["discovered"], depth1["outstanding"], depth1["done"]) == (3, 2, 1)


def test_after_a_restart_a_lost_report_of_given_up_jobs_is_sent_again_as_what_it_is(rt):
    # Given a run one of whose dispatches gave jobs up (its expire report was lost with the
    # process), and an account pool whose only lease was held by a batch of the dead process
    rt.db.websites.insert_one(
        {
            "_id": "gone",
            "run_id": RUN,
            "last_dispatch_id": "d" * 32,
            "last_outcome": "expired",
            "state": int(JobState.FAILED),
        }
    )
    rt.db.accounts.insert_one(
        {"_id": "acct", "media_name": "web", "leases": [{"lease_id": "L", "holder": "D"}]}
    )
    plans, reports = [], []

    recovered = recover_lost_messages(rt, lambda s, at: plans.append(s), reports.append)

    # Then the report goes again in the phase that wrote it (expire), and the pool is free
    assert [(r.dispatch_id, r.phase, r.collection) for r in reports] == [
        ("d" * 32, "expire", "websites")
    ]
    assert recovered["resources_freed"] == 1
    assert rt.db.accounts.find_one({"_id": "acct"})["leases"] == []


@pytest.mark.parametrize("how", ["find", "sorted", "aggregate"])
def test_the_embedded_store_reads_every_cursor_under_its_lock(how):
    db = open_database(f"mongomock://cursor-lock-{uuid.uuid4().hex}", "t")
    db.jobs.insert_many([{"_id": i} for i in range(5)])
    cursors = {
        "find": lambda: db.jobs.find({}),
        "sorted": lambda: db.jobs.find({}).sort("_id", -1).limit(3),
        "aggregate": lambda: db.jobs.aggregate([{"$match": {}}]),
    }
    cursor = cursors[how]()
    first: list = []
    read = threading.Event()

    def reader() -> None:
        first.append(next(iter(cursor)))
        read.set()

    # While another thread holds the store's lock, nothing of the cursor can be read
    with db.locked():
        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        assert not read.wait(0.5)
    # Once it lets go, the read goes through
    assert read.wait(30)
    thread.join(30)
    assert first and "_id" in first[0]


def test_a_host_that_merely_ends_with_the_site_s_name_is_off_site():
    context = CrawlContext(bounds=CrawlBounds(max_depth=5))
    job = CrawlJob("j", "t", "https://twitter.test/a", "article", "web", 10, document={}, depth=0)
    context.begin(job)

    assert context.discover("https://twitter.test/b")
    assert context.discover("https://www.twitter.test/c")  # the same site, www. or not
    assert not context.discover("https://eviltwitter.test/x")
    assert not context.discover("https://twitter.test.evil.example/x")
    assert dict(context.cut) == {"offsite": 2}


def test_a_page_s_children_are_counted_with_its_end_whoever_registered_them(rt):
    # Given dispatch DEAD registered two children of page p and died before recording p
    children = MongoChildStore(rt.db, "websites")
    urls = ("http://site.test/x", "http://site.test/y")
    children.register(RUN, DEAD, MEDIA, _found("p", *urls), 100, NOW)
    # When p is crawled again under dispatch AGAIN, finds the same links and z too, and ends
    registered = children.register(
        RUN, AGAIN, MEDIA, _found("p", *urls, "http://site.test/z"), 100, NOW
    )
    _crawled(rt, AGAIN, "p")
    record_report(rt, _report(AGAIN))
    # Then nothing was inserted twice, and AGAIN's report counts and releases all three: they
    # are p's children, counted with p's end
    assert registered.new == {"p": 1}
    assert rt.db.websites.count_documents({"_id": child_id(RUN, "article", urls[0])}) == 1
    released = {d["url"]: d["released"] for d in rt.db.websites.find({"scope_run": RUN})}
    assert released == dict.fromkeys((*urls, "http://site.test/z"), True)
    assert rt.runs.get(RUN)["discovered"] == 3


def test_children_a_late_copy_registers_after_its_page_was_counted_keep_no_run_open(rt):
    # Given page p recorded by LIVE with one child, and LIVE's report applied
    children = MongoChildStore(rt.db, "websites")
    children.register(RUN, LIVE, MEDIA, _found("p", "http://site.test/x"), 100, NOW)
    _crawled(rt, LIVE, "p")
    record_report(rt, _report(LIVE))
    before = rt.runs.get(RUN)
    # When a copy of LIVE's batch that crawled p beside it registers a link LIVE never saw
    children.register(RUN, LIVE, MEDIA, _found("p", "http://site.test/late"), 100, NOW)
    # Then the run counts nothing more (p's end was counted: the copy's view is dropped), and
    # the late child stays unreleased, planned by nobody
    after = rt.runs.get(RUN)
    assert (after["discovered"], after["outstanding"]) == (
        before["discovered"],
        before["outstanding"],
    )
    late = rt.db.websites.find_one({"url": "http://site.test/late"})
    assert late["released"] is False


def test_a_child_a_dead_crawl_inserts_between_the_read_and_the_write_is_counted_once(
    rt, monkeypatch
):
    # Given dispatch DEAD, reclaimed (its worker slept on a host past its lease), which wakes
    # up and registers what page p found at the very moment p's new crawl AGAIN does: after
    # AGAIN read which children exist, before AGAIN's insert
    children = MongoChildStore(rt.db, "websites")
    urls = ("http://site.test/x", "http://site.test/y")
    real_write = children._jobs.bulk_write
    raced = []

    def dead_inserts_first(ops, **kwargs):
        if not raced:  # only AGAIN's write is raced
            raced.append(True)
            MongoChildStore(rt.db, "websites").register(
                RUN, DEAD, MEDIA, _found("p", *urls), 100, NOW
            )
        return real_write(ops, **kwargs)

    monkeypatch.setattr(children._jobs, "bulk_write", dead_inserts_first, raising=False)
    # When AGAIN registers the same links, records p and reports
    children.register(RUN, AGAIN, MEDIA, _found("p", *urls), 100, NOW)
    _crawled(rt, AGAIN, "p")
    record_report(rt, _report(AGAIN))
    # Then both children exist once, and AGAIN's report counted both with p's end
    assert raced and rt.db.websites.count_documents({"scope_run": RUN}) == 2
    assert rt.runs.get(RUN)["discovered"] == 2


def test_an_ended_run_drops_the_children_it_never_counted_and_takes_no_more(rt):
    # Given page p recorded by LIVE with one child, LIVE's report applied, and a late copy of
    # LIVE's batch that registered a child LIVE never saw (unreleased, counted by nobody)
    children = MongoChildStore(rt.db, "websites")
    children.register(RUN, LIVE, MEDIA, _found("p", "http://site.test/x"), 100, NOW)
    _crawled(rt, LIVE, "p")
    record_report(rt, _report(LIVE))
    children.register(RUN, LIVE, MEDIA, _found("p", "http://site.test/late"), 100, NOW)
    # When the rest of the run ends (the other planned page, and p's child x)
    _crawled(rt, AGAIN, "q")
    rt.db.websites.update_one(
        {"url": "http://site.test/x"},
        {"$set": {"last_dispatch_id": DEAD, "last_outcome": "succeeded", "run_id": RUN}},
    )
    record_report(rt, _report(AGAIN))
    record_report(rt, _report(DEAD))
    assert rt.runs.get(RUN)["state"] == "finished"
    # Then the late child is gone (it would show as a page still to crawl), x is kept
    urls = {d["url"] for d in rt.db.websites.find({"scope_run": RUN})}
    assert urls == {"http://site.test/x"}
    # And a copy that registers after the end inserts nothing
    registered = children.register(
        RUN, LIVE, MEDIA, _found("p", "http://site.test/later"), 100, NOW
    )
    assert registered.new == {} and registered.cut_pages == {"p": 1}
    assert rt.db.websites.count_documents({"url": "http://site.test/later"}) == 0
