"""crawlsched's own metrics, in process: every counter agrees with what the store says happened.

Real actors on the stub broker and the embedded store, the demo's jobs, no Selenium node (so the
Selenium batches wait and then starve): the counters are read from the registry the metrics
were created in, the store gauges from a `StoreCollector` on the same store.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry

from crawlsched import metrics
from crawlsched.demo.site import DemoSite
from crawlsched.metrics.store_gauges import StoreCollector
from crawlsched.runtime import get_runtime
from tests.support.seeding import all_runs_finished, fire_all_now, seed


def sample_sum(registry: CollectorRegistry, name: str, **labels: str) -> float:
    total = 0.0
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def gauges(collector: StoreCollector) -> dict[tuple, float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in collector.collect()
        for s in family.samples
    }


def test_metrics_counters_equal_what_the_runs_did(stub_pipeline, registry):
    # Given the demo's jobs and pools without a node, and batches that starve after 1 s
    stub_pipeline(threads=4, admission_wait_s=1)
    from crawlsched.actors import ticker

    rt = get_runtime()
    collector = StoreCollector(lambda: rt.db, rt.now)
    with DemoSite() as site:
        seed(rt, site.base_url, node_url=None)
        fire_all_now(rt)
        due_before = gauges(collector)
        # When ticks come until both runs finish
        deadline = time.monotonic() + 60
        while (runs := all_runs_finished(rt)) is None:
            assert time.monotonic() < deadline, "runs did not finish within 60 s"
            ticker.tick.send()
            time.sleep(0.3)

    # Then the due-jobs gauge said what the planner then planned, per category
    planned_by_category = Counter()
    for run in runs:
        for key, n in run["plan_stats"].items():
            if key.startswith("jobs."):
                planned_by_category[key.removeprefix("jobs.")] += n
    due_by_category = Counter()
    for (name, labels), value in due_before.items():
        if name == "crawlsched_due_jobs":
            due_by_category[dict(labels)["category"]] += value
    assert due_by_category == planned_by_category
    assert due_before[("crawlsched_store_up", ())] == 1

    # And the counters equal the runs' own counts
    counts = Counter()
    for run in runs:
        counts.update(run["counts"])
    assert counts["starved"] > 0 and counts["succeeded"] > 0
    for outcome, n in counts.items():
        assert sample_sum(registry, "crawlsched_jobs_finished_total", outcome=outcome) == n
    assert sample_sum(registry, "crawlsched_jobs_dispatched_total") == sum(
        r["planned"] for r in runs
    )
    assert sample_sum(registry, "crawlsched_runs_planned_total") == 2
    assert sample_sum(registry, "crawlsched_runs_finished_total") == 2
    shortages = [s for r in runs for s in r.get("shortages", [])]
    assert sample_sum(registry, "crawlsched_batches_starved_total") == len(shortages)
    admitted = sum(len(rt.assignments.for_run(r["_id"])) for r in runs)
    assert admitted > 0
    assert sample_sum(registry, "crawlsched_batches_admitted_total") == admitted
    assert sample_sum(registry, "crawlsched_batches_parked_total") == admitted + len(shortages)
    assert sample_sum(registry, "crawlsched_schedule_lag_seconds_count") == 2
    assert sample_sum(registry, "crawlsched_ticks_total") >= 1

    # And afterwards only the starved jobs are due again (given back untouched), and nothing
    # waits, is held, or is open
    after = gauges(collector)
    assert sum(v for k, v in after.items() if k[0] == "crawlsched_due_jobs") == counts["starved"]
    for name in (
        "crawlsched_waiting_batches",
        "crawlsched_pool_leases_held",
        "crawlsched_open_runs",
    ):
        assert sum(v for k, v in after.items() if k[0] == name) == 0
    capacity = {
        dict(k[1])["media"]: v for k, v in after.items() if k[0] == "crawlsched_pool_capacity"
    }
    assert capacity == {"twitter": 2, "instagram": 1, "": 0}


def test_metrics_off_by_default_count_nothing(stub_pipeline):
    # Given metrics never enabled in this process
    metrics.disable()
    assert metrics.active() is None
    # When the flow calls them, nothing happens (no registry, no error)
    metrics.jobs_finished("profile", "twitter", {"succeeded": 3})
    metrics.batch_starved("selenium", "profile", "twitter", 2)
    assert metrics.active() is None


def test_store_gauges_report_a_failed_read_instead_of_failing_the_scrape():
    def broken():
        raise ConnectionError("store away")

    samples = {
        s.name: s.value for f in StoreCollector(broken, time.time).collect() for s in f.samples
    }
    assert samples["crawlsched_store_up"] == 0


def test_missed_fire_times_are_counted_by_reason_from_a_closed_set(registry):
    metrics.schedule_fired()
    metrics.missed_runs("no_clock", 3)
    metrics.missed_runs("overlap")
    assert sample_sum(registry, "crawlsched_missed_runs_total", reason="no_clock") == 3
    assert sample_sum(registry, "crawlsched_missed_runs_total", reason="overlap") == 1
    assert sample_sum(registry, "crawlsched_schedules_fired_total") == 1
    with pytest.raises(ValueError, match="not one of"):
        metrics.missed_runs("https://example.com/some-url")


def test_a_late_tick_counts_the_fire_times_it_skipped(registry, embedded_mongo_url):
    from datetime import timedelta

    from crawlsched.flow.ticking import fire_due
    from crawlsched.runtime import Runtime
    from tests.conftest import settings_for_tests

    # Given a 60 s schedule whose fire time passed 210 s ago (the scheduler was down)
    rt = Runtime(settings_for_tests(mongo_url=embedded_mongo_url))
    now = rt.now()
    rt.db.schedules.insert_one(
        {"_id": "every-minute", "collections": ["profiles"], "interval_s": 60, "enabled": True,
         "anchor": now - timedelta(seconds=210), "next_fire_at": now - timedelta(seconds=210)}
    )  # fmt: skip
    fired = []
    # When a tick comes
    assert fire_due(rt, lambda schedule_id, fire_at: fired.append(schedule_id)) == 1
    # Then it fired once and counted the three fire times it skipped, as it recorded them
    assert fired == ["every-minute"]
    assert sample_sum(registry, "crawlsched_missed_runs_total", reason="no_clock") == 3
    recorded = rt.missed_runs.list("every-minute", None, 100)
    assert [row["reason"] for row in recorded] == ["no_clock"] * 3
