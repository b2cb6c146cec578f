"""The metrics the crawling dashboard reads: discovery, politeness waits and blocks (counted
where they happen), hosts blocked and held and pages outstanding per running run (store gauges
read at scrape time). In process, on the embedded store; that a real worker group and clock
export every name the dashboards use is test_metrics_prometheus's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import mongomock
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.metrics import host_wait_reason, readings
from crawlsched.metrics.store_gauges import StoreCollector
from crawlsched.politeness.pacer import HostNotReady
from crawlsched.resources.host_rules import HostPolicy
from crawlsched.store.counting import CommandCounter, CountingDatabase
from crawlsched.store.hosts import MongoHostStore
from crawlsched.store.runs import MongoRunStore
from tests.test_metrics_flow import gauges, sample_sum
from tests.test_net_politeness import A, B, FakeClock, _pacer, _started

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_a_429_and_a_pacing_sleep_are_counted(registry):
    clock = FakeClock()
    pacer = _pacer(clock, 2.0, max_sleep_s=60)
    _started(pacer, clock)
    _started(pacer, clock)  # slept 2 s for the delay
    with pytest.raises(HostNotReady):
        pacer.observe(A, 429, "5")
    assert sample_sum(registry, "crawlsched_host_blocks_total", status="429") == 1
    assert sample_sum(registry, "crawlsched_host_blocks_total", status="503") == 0
    assert sample_sum(registry, "crawlsched_host_pacing_wait_seconds_count") == 1
    assert sample_sum(registry, "crawlsched_host_pacing_wait_seconds_sum") == 2.0
    # zero series for every reason from the start, so rates work from the first scrape
    for reason in ("held", "blocked", "paced", "budget"):
        assert sample_sum(registry, "crawlsched_host_waits_total", reason=reason) == 0


def test_every_store_command_is_counted_by_collection_and_method(registry):
    # Given a counting database, as every runtime's store is
    counter = CommandCounter()
    db = CountingDatabase(mongomock.MongoClient().db, counter)

    # When commands go to two collections
    db.hosts.insert_one({"_id": "a"})
    db.hosts.find_one({"_id": "a"})
    db.hosts.find_one({"_id": "b"})
    list(db.websites.find({}))

    # Then the metric agrees with the store's own tally, per collection and method
    assert sample_sum(registry, "crawlsched_store_commands_total", collection="hosts") == 3
    assert (
        sample_sum(
            registry, "crawlsched_store_commands_total", collection="hosts", method="find_one"
        )
        == 2
    )
    assert sample_sum(registry, "crawlsched_store_commands_total", collection="websites") == 1
    assert sample_sum(registry, "crawlsched_store_commands_total") == counter.boundary_total == 4


@pytest.mark.parametrize(
    ("why", "held", "reason"),
    [
        ("held by worker-2", True, "held"),
        ("handed over: another process asked for the host", True, "held"),
        ("blocked: HTTP 429, Retry-After 5", False, "blocked"),
        ("daily budget of 2 pages used", False, "budget"),
        ("paced: 30 s between pages", False, "paced"),
    ],
)
def test_why_a_host_was_not_ready_maps_to_a_closed_label(why, held, reason):
    assert host_wait_reason(why, held) == reason


def _collector(db) -> StoreCollector:
    return StoreCollector(lambda: db, lambda: NOW)


def test_store_gauges_show_hosts_blocked_and_held_and_each_running_runs_pages():
    db = mongomock.MongoClient(tz_aware=True).db
    hosts, runs = MongoHostStore(db), MongoRunStore(db)
    policy = HostPolicy(1.0, 1, 0)
    hosts.acquire(A, "worker-1", policy, NOW, 10.0)  # held
    hosts.block(B, NOW + timedelta(seconds=60), "HTTP 429", NOW)  # blocked
    hosts.block("http://c.org:80", NOW - timedelta(seconds=1), "HTTP 503", NOW)  # block over
    runs.open("run-1", "sweep-websites", NOW, NOW)
    runs.close_planning("run-1", 5, {}, NOW)
    runs.report("run-1", "report-1", {"succeeded": 2}, discovered=7)
    runs.open("run-2", "sweep-profiles", NOW, NOW)
    runs.close_planning("run-2", 3, {}, NOW)
    runs.report("run-2", "report-2", {"succeeded": 3})
    runs.finish("run-2", NOW)

    read = gauges(_collector(db))
    assert read[("crawlsched_hosts", (("state", "blocked"),))] == 1
    assert read[("crawlsched_hosts", (("state", "held"),))] == 1
    labels = (("run", "run-1"), ("schedule", "sweep-websites"))
    assert read[("crawlsched_run_outstanding_jobs", labels)] == 5 - 2 + 7
    assert read[("crawlsched_run_discovered_jobs", labels)] == 7
    # an ended run has no series
    assert not [k for k in read if dict(k[1]).get("run") == "run-2"]


def test_host_waits_count_under_one_pool_label_whatever_the_host():
    docs = [
        {"needs": [f"host:http://site-{i}.org:80"], "jobs": 2, "enqueued_at": NOW}
        for i in range(50)
    ]
    waiting = readings.waiting_by_pool(docs, NOW)
    assert set(waiting) == {("host", "")}
    assert waiting[("host", "")].jobs == 100


@given(
    st.lists(st.tuples(st.integers(-5, 10_000), st.integers(0, 10_000)), min_size=0, max_size=60)
)
def test_busiest_runs_are_bounded_and_the_busiest(rows):
    runs = [
        {"_id": f"run-{i}", "schedule_id": "s", "outstanding": o, "discovered": d}
        for i, (o, d) in enumerate(rows)
    ]
    shown = readings.busiest_runs(runs)
    assert len(shown) == min(len(runs), readings.TOP_RUNS)
    assert all(r["outstanding"] >= 0 for r in shown)
    shown_ids = {r["run"] for r in shown}
    least_shown = min((r["outstanding"] for r in shown), default=0)
    for run in runs:
        if run["_id"] not in shown_ids:  # only runs with no more outstanding are left out
            assert max(run["outstanding"], 0) <= least_shown
