"""Admission on the stub broker: batches wait for what they need, in order, or starve past a bound.

Real actors, real stores (embedded), in-process worker threads; the driver is the test plug-in
`slow`, so a batch holds its account long enough for the others to queue behind it.
"""

from __future__ import annotations

import time
from datetime import timedelta

from crawlsched.catalog import JobState
from crawlsched.demo.seed import demo_reference
from crawlsched.planning.run_names import FINISHED
from crawlsched.resources.pools import Need
from crawlsched.resources.rules import AccountLimits
from crawlsched.runtime import Runtime, get_runtime
from tests.support.waiting import wait_for

SLOW = {"driver_modules": ["tests.support.slow_driver"]}


def _twitter_jobs(rt: Runtime, n: int, human_validation: int, prefix: str) -> None:
    now = rt.now()
    twitter = rt.reference.media_by_name("twitter")
    rt.jobs("profiles").insert_new(
        [
            {
                "target": f"{prefix}{i}",
                "media_name": "twitter",
                "media_name_id": twitter["_id"],
                "task": "profile",
                "state": int(JobState.PENDING),
                "enabled": True,
                "execution_date": now - timedelta(seconds=1),
                "human_validation": human_validation,
                "certitude": 0.5,
                "modified_at": now - timedelta(minutes=i),
                "attempt_count": 0,
            }
            for i in range(n)
        ]
    )


def _setup(rt: Runtime, accounts: int) -> None:
    reference = demo_reference("http://127.0.0.1:9")
    media = [m.model_copy(update={"driver_class": "slow"}) for m in reference.media]
    rt.create_indexes()
    rt.reference.load(reference.model_copy(update={"media": media}))
    rt.schedules.ensure_defaults(rt.now())
    for i in range(accounts):
        rt.inventory.add_account("twitter", f"acct{i}", f"secret-{i}", AccountLimits(), rt.now())


def _fire_profiles(rt: Runtime) -> None:
    from crawlsched.actors import ticker

    rt.schedules.fire_now("sweep-profiles", rt.now())
    ticker.tick.send()


def run_waiting_for_an_account(stub_pipeline, jobs: int = 30) -> tuple[Runtime, str]:
    """A sweep of `jobs` profile jobs with no account to crawl them: its batches wait. The
    runtime, and the run's id."""
    stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=0)
    _twitter_jobs(rt, jobs, 0, "u")
    _fire_profiles(rt)
    wait_for(lambda: sum(d["jobs"] for d in rt.waiting.all()) == jobs, 30, f"{jobs} jobs waiting")
    return rt, rt.waiting.all()[0]["run_id"]


def _finished_run(rt: Runtime, ticks: bool = False):
    from crawlsched.actors import ticker

    def probe():
        runs = [r for r in rt.runs.recent() if r["schedule_id"] == "sweep-profiles"]
        if runs and all(r["state"] == FINISHED for r in runs):
            return runs
        if ticks:
            ticker.tick.send()
        return None

    return probe


def test_admission_batches_wait_for_the_one_account_and_none_starves(stub_pipeline, monkeypatch):
    # Given one twitter account and 60 jobs: three batches of 25/25/10 that all need it
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.02")
    stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=1)
    _twitter_jobs(rt, 60, 0, "u")

    # When the sweep fires once (no further ticks: only releases wake the waiting batches)
    _fire_profiles(rt)
    (run,) = wait_for(_finished_run(rt), 60, "the profile run to finish")

    # Then every job succeeded once, nothing starved, and the batches took turns on the account
    assert run["planned"] == 60
    assert run["counts"] == {"succeeded": 60}
    served = rt.assignments.for_run(run["_id"])
    assert len(served) == 3
    assert {row["account"] for row in served} == {"acct0"}
    assert sum(row["waited_s"] > 0 for row in served) >= 2
    assert rt.waiting.all() == []
    assert rt.inventory.overview(rt.now())["account"]["held"] == 0


def test_admission_starves_only_past_the_bound_naming_the_pool(stub_pipeline):
    # Given no twitter account at all and a wait bound of one second
    stub_pipeline(admission_wait_s=1.0, **SLOW)
    rt = get_runtime()
    _setup(rt, accounts=0)
    _twitter_jobs(rt, 30, 0, "u")

    # When the sweep fires, the batches wait: the run is open and shows them waiting
    _fire_profiles(rt)
    waiting = wait_for(rt.waiting.all, 30, "batches to wait")
    assert sum(doc["jobs"] for doc in waiting) == 30
    run_id = waiting[0]["run_id"]
    assert rt.runs.get(run_id)["state"] != FINISHED

    # Then once the bound has passed, the ticker's sweep starves them with the reason
    (run,) = wait_for(_finished_run(rt, ticks=True), 60, "the run to finish starved")
    assert run["counts"] == {"starved": 30}
    assert run["shortages"] and all(
        "account pool (twitter)" in s["reason"] for s in run["shortages"]
    )
    pending = rt.jobs("profiles").summary()
    assert pending == {str(int(JobState.PENDING)): 30}  # given back untouched, not failed
    # And the fire time is a missed run, reason starved, with the pool that ran short
    (missed,) = rt.missed_runs.list("sweep-profiles")
    assert (missed["reason"], missed["run_id"], missed["pools"]) == (
        "starved",
        run["_id"],
        ["account:twitter"],
    )


def test_admission_order_follows_priority_not_arrival(stub_pipeline, monkeypatch):
    # Given one account held by someone else
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.01")
    stub_pipeline(threads=2, **SLOW)
    rt = get_runtime()
    _setup(rt, accounts=1)
    held = rt.pools.acquire(Need(True, False, "twitter"), "someone-else", rt.now())
    assert held.leases

    # When a run of low-priority jobs arrives first and a run of high-priority jobs second
    _twitter_jobs(rt, 25, 0, "low")
    _fire_profiles(rt)
    wait_for(lambda: len(rt.waiting.all()) == 1, 30, "the first run's batch to wait")
    time.sleep(1.1)  # run ids have one-second resolution: the next firing is a new run
    _twitter_jobs(rt, 25, 1, "high")
    _fire_profiles(rt)
    wait_for(lambda: len(rt.waiting.all()) == 2, 30, "the second run's batch to wait")

    # And the account is released (its release wakes the waiting batches)
    from crawlsched.actors.sends import send_wake

    rt.pools.release(held.leases, rt.now())
    send_wake({"account:twitter"})
    runs = wait_for(
        lambda: (done := _finished_run(rt)()) and len(done) == 2 and done,
        60,
        "both profile runs to finish",
    )

    # Then the high-priority batch was admitted first although it arrived last
    order = [
        row["run_id"] for row in sorted(rt.db.run_resources.find({}), key=lambda r: r["granted_at"])
    ]
    high_run = max(runs, key=lambda r: r["fire_at"])["_id"]
    assert order[0] == high_run
    assert all(r["counts"] == {"succeeded": 25} for r in runs)
