"""Pause, resume and retry-failed on the stub broker with real actors and the embedded store.

The driver is the test plug-in `slow` (tests/support/slow_driver.py): it sleeps per job, fails
targets containing "boom" every time and targets containing "flaky" on their first attempt.
"""

from __future__ import annotations

import time

import dramatiq
import pytest

from crawlsched.errors import RunNotFound, RunRefused
from crawlsched.flow.pausing import pause_run, resume_run
from crawlsched.flow.retrying import retry_failed
from crawlsched.flow.stopping import stop_run
from crawlsched.ids import encode_id
from crawlsched.planning.retention import EXPIRE_AT
from crawlsched.planning.run_control import display_state
from crawlsched.planning.run_names import FINISHED, RUNNING, STOPPED
from crawlsched.runtime import Runtime, get_runtime
from tests.support.waiting import wait_for
from tests.test_admission_flow import (
    SLOW,
    _fire_profiles,
    _setup,
    _twitter_jobs,
    run_waiting_for_an_account,
)


def _the_run(rt: Runtime) -> dict:
    return rt.db.runs.find_one({"schedule_id": "sweep-profiles", "parent_id": None})


def _send_pass(run_id: str, collection: str) -> None:
    from crawlsched.actors.sends import send_plan_children

    send_plan_children(run_id, collection)


def _events(rt: Runtime, run_id: str, event: str) -> list[dict]:
    return list(rt.db.activity.find({"run_id": run_id, "event": event}))


def _crawled(rt: Runtime) -> int:
    return rt.db.profiles.count_documents({"last_outcome": "succeeded"})


def _quiet(rt: Runtime) -> bool:
    """Nothing of the profiles is being crawled, and no batch waits for an account."""
    return rt.jobs("profiles").summary().get("2", 0) == 0 and not rt.waiting.all()


def test_paused_run_dispatches_nothing_then_resumes_and_ends_once(stub_pipeline, monkeypatch):
    from crawlsched.actors import ticker

    # Given 2 accounts and 400 jobs (16 batches of 25) at 20 ms a job, crawling
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.02")
    stub_pipeline(threads=4, stop_check_s=0.05, **SLOW)
    rt = get_runtime()
    _setup(rt, accounts=2)
    _twitter_jobs(rt, 400, 0, "u")
    _fire_profiles(rt)
    wait_for(lambda: _crawled(rt) >= 1, 60, "crawling to start")
    run_id = _the_run(rt)["_id"]

    # When the run is paused (twice: the second says it was paused already)
    first = pause_run(rt, run_id)
    again = pause_run(rt, run_id)
    assert first.runs == [run_id] and not first.already
    assert again.runs == [] and again.already

    # Then crawls under way finish, and nothing more is crawled, ticks or not
    wait_for(lambda: _quiet(rt), 60, "the batches under way to finish")
    # (Crawled pages are counted from the jobs: a job's outcome is written in the same update
    # that ends its claim, while its history row follows a moment later.)
    crawled = _crawled(rt)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        ticker.tick.send()
        time.sleep(0.3)
        assert _crawled(rt) == crawled
    assert crawled < 400, "the pause came too late to hold anything"
    # The held pages still count: once the reports of what was crawled are applied, exactly
    # those are outstanding, and the run has not ended
    run = wait_for(
        lambda: (r := rt.runs.get(run_id))["outstanding"] == 400 - crawled and r,
        30,
        "the reports of the crawled pages",
    )
    assert (run["state"], display_state(run)) == (RUNNING, "paused")
    assert rt.db.profiles.count_documents({"redo_run": run_id, "state": 1}) == 400 - crawled

    # When it is resumed, it ends once, every page crawled once
    summary = resume_run(rt, run_id, _send_pass)
    assert summary.runs == [run_id] and summary.held_jobs == 400 - crawled
    run = wait_for(lambda: (r := rt.runs.get(run_id))["state"] == FINISHED and r, 60, "the end")
    assert run["counts"] == {"succeeded": 400} and run["planned"] == 400
    assert rt.db.task_history.count_documents({}) == 400
    assert len(rt.db.task_history.distinct("job_id")) == 400
    wait_for(lambda: _events(rt, run_id, "RunFinished"), 30, "the end event")
    assert len(_events(rt, run_id, "RunFinished")) == 1
    assert "paused" not in run
    with pytest.raises(RunRefused, match="has ended"):
        pause_run(rt, run_id)
    with pytest.raises(RunRefused, match="no page that failed"):
        retry_failed(rt, run_id, _send_pass)


def test_pause_holds_batches_waiting_for_an_account(stub_pipeline):
    from crawlsched.actors import ticker

    # Given no account: the run's 30 jobs wait in two batches
    rt, run_id = run_waiting_for_an_account(stub_pipeline)

    # When it is paused, the waiting batches are taken back into the run (none can starve):
    # by the pause, or by the admission pass that had one in hand at that moment
    summary = pause_run(rt, run_id)
    assert 1 <= summary.held_batches <= 2 and summary.held_jobs in (5, 25, 30)

    def all_held() -> bool:
        ticker.tick.send()  # its admission pass takes a batch an earlier pass put back
        held = rt.db.profiles.count_documents({"redo_run": run_id, "state": 1})
        return not rt.waiting.all() and held == 30

    wait_for(all_held, 30, "every waiting batch held in its run", interval=0.3)
    assert rt.runs.get(run_id)["outstanding"] == 30
    # The ticks the wait sent may still be running (an admission pass with a batch in hand,
    # which the stop below cannot see): let every message end first.
    broker = dramatiq.get_broker()

    def settled() -> bool:
        for queue in broker.get_declared_queues():
            broker.join(queue, timeout=30_000)
        return all(q.unfinished_tasks == 0 for q in broker.queues.values())

    wait_for(settled, 60, "every message sent so far to be done")

    # And a stop of a paused run ends it stopped, the held pages given back untouched
    stop_run(rt, run_id)
    run = rt.runs.get(run_id)
    assert (run["state"], run["counts"]) == (STOPPED, {"stopped": 30})
    assert rt.db.profiles.count_documents({"state": 1, "attempt_count": 0}) == 30
    assert rt.db.profiles.count_documents({"redo_run": {"$ne": None}}) == 0
    with pytest.raises(RunRefused, match="was stopped"):
        retry_failed(rt, run_id, _send_pass)
    with pytest.raises(RunRefused, match="has ended"):
        resume_run(rt, run_id, _send_pass)


def test_retry_failed_reopens_the_run_and_ends_it_again(stub_pipeline, monkeypatch):
    # Given a run of 40 jobs where 6 fail on their first attempt and 2 always fail
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.0")
    stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=2)
    _twitter_jobs(rt, 32, 0, "ok")
    _twitter_jobs(rt, 6, 0, "flaky")
    _twitter_jobs(rt, 2, 0, "boom")
    _fire_profiles(rt)
    first = wait_for(
        lambda: (r := _the_run(rt)) and r["state"] == FINISHED and not r.get("announce") and r,
        60,
        "the first end",
    )
    run_id = first["_id"]
    assert first["counts"] == {"succeeded": 32, "failed": 8}
    crawled = rt.db.task_history.count_documents({})
    # (its pages in the run's id space, dated to expire a while after the end)
    dated = {"scope_run": run_id, EXPIRE_AT: {"$exists": True}}
    assert rt.db.profiles.count_documents(dated) > 0

    # When its failed pages are retried
    summary = retry_failed(rt, run_id, _send_pass)
    # Then the run's pages are kept again while it runs (the sweep would delete them, and
    # with them the run's dedup of what it crawled)
    assert rt.db.profiles.count_documents(dated) == 0

    # Then the run is reopened with those 8 pages, they (and only they) are crawled again,
    # and it ends once more with counts of every page's last try
    assert summary.reopened and summary.pages == {"failed": 8}
    run = wait_for(
        lambda: (r := rt.runs.get(run_id))["state"] == FINISHED and r.get("ends") == 2 and r,
        60,
        "the second end",
    )
    assert run["counts"] == {"succeeded": 38, "failed": 2}
    assert run["outstanding"] == 0 and run["planned"] == 40
    again = list(rt.db.task_history.find({}).sort("_id", 1))[crawled:]
    assert len(again) == 8
    failing = rt.db.profiles.find({"target": {"$regex": "flaky|boom"}}, {"_id": 1})
    assert {r["job_id"] for r in again} == {encode_id(j["_id"]) for j in failing}
    # Each end is announced with its own id: a receiver dropping duplicates hears both
    wait_for(lambda: len(_events(rt, run_id, "RunFinished")) == 2, 30, "the second end event")
    ids = sorted(e["event_id"] for e in _events(rt, run_id, "RunFinished"))
    assert ids == [f"{run_id}:RunFinished", f"{run_id}:RunFinished:2"]
    assert len(_events(rt, run_id, "RunRetried")) == 1

    # And a second retry takes the 2 that failed again (they fail on their own every time)
    wait_for(lambda: not rt.runs.get(run_id).get("announce"), 30, "the end announced")
    assert retry_failed(rt, run_id, _send_pass).pages == {"failed": 2}
    run = wait_for(lambda: (r := rt.runs.get(run_id)).get("ends") == 3 and r, 60, "a third end")
    assert run["counts"] == {"succeeded": 38, "failed": 2}
    assert rt.db.task_history.count_documents({}) == crawled + 8 + 2
    assert rt.db.profiles.count_documents({"retry_key": {"$exists": True}}) == 0


def test_unknown_runs_and_refusals(stub_pipeline):
    stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=0)
    for act in (
        lambda: pause_run(rt, "nope"),
        lambda: resume_run(rt, "nope", _send_pass),
        lambda: retry_failed(rt, "nope", _send_pass),
    ):
        with pytest.raises(RunNotFound):
            act()
