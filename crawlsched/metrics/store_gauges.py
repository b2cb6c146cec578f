"""Gauges read from MongoDB at scrape time: what is due, waiting, leased, up, open.

They describe the shared store, not one process, so one exporter serves them (the clock's,
see `crawlsched clock`), not every worker. Each scrape makes a few bounded reads: one `$group`
per job collection over the due jobs (its size is tasks x media, whatever the number of jobs),
and the small waiting, account, node, proxy, reference and open-run collections. A failed read shows
as `crawlsched_store_up 0` instead of failing the scrape.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.logs import get_logger
from crawlsched.metrics import readings
from crawlsched.planning.run_names import ENDED, PLANNING, RUNNING
from crawlsched.store.counting import CountingDatabase
from crawlsched.store.pipeline import MEDIA_COLLECTION, TASKS_COLLECTION, due_filter

log = get_logger(__name__)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class StoreCollector(Collector):
    def __init__(self, db: Callable[[], CountingDatabase], now: Callable[[], datetime]) -> None:
        self._db = db  # a callable: the client is opened on first scrape, in the serving process
        self._now = now

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        try:
            families = self._read(self._db(), self._now())
            up = 1
        except Exception as e:  # a scrape must still answer; the gauge below says it failed
            log.warning("store_gauges_failed", error=f"{type(e).__name__}: {e}"[:300])
            families, up = [], 0
        yield from families
        yield GaugeMetricFamily(
            "crawlsched_store_up", "1 if the last scrape read the store, else 0.", value=up
        )
        yield GaugeMetricFamily(
            "crawlsched_store_read_seconds",
            "Time the store gauges took to read.",
            value=time.perf_counter() - started,
        )

    def _read(self, db: CountingDatabase, now: datetime) -> list[Metric]:
        groups = []
        for collection in JOB_COLLECTIONS:
            pipeline = [
                {"$match": due_filter(now)},
                {"$group": {"_id": {"task": "$task", "media": "$media_name"}, "n": {"$sum": 1}}},
            ]
            for row in db[collection].aggregate(pipeline):
                groups.append((str(row["_id"].get("task")), str(row["_id"].get("media")), row["n"]))
        media = db[MEDIA_COLLECTION].find({}, {"media_name": 1, "media_name_id": 1, "enabled": 1})
        tasks = db[TASKS_COLLECTION].find(
            {}, {"media_name_id": 1, "name": 1, "need_login": 1, "need_selenium": 1, "enabled": 1}
        )
        due = readings.due_by_category(groups, list(media), list(tasks))
        waiting = readings.waiting_by_pool(
            db.waiting_batches.find({}, {"needs": 1, "jobs": 1, "enqueued_at": 1, "wait_until": 1}),
            now,
        )
        lease_fields = {"secret_enc": 0}
        account_slots, account_states = readings.account_pool(
            db.accounts.find({}, lease_fields), now
        )
        node_slots, node_states = readings.node_pool(db.selenium_nodes.find({}), now)
        proxy_slots, proxy_states = readings.proxy_pool(db.proxies.find({}, lease_fields), now)
        open_runs = db.runs.aggregate(
            [
                {"$match": {"state": {"$nin": list(ENDED)}}},
                {"$group": {"_id": "$state", "n": {"$sum": 1}}},
            ]
        )
        # Zero series for every pool that exists and every state, so that "nothing waits" and
        # "no node is up" are readings, not missing series.
        slots = {**account_slots, **node_slots, **proxy_slots}
        for key in slots:
            waiting.setdefault(key, readings.Waiting())
        for state in readings.NODE_STATES:
            node_states.setdefault(state, 0)
        hosts = readings.hosts_by_state(
            db.hosts.find(
                {"$or": [{"blocked_until": {"$gt": now}}, {"lease_until": {"$gt": now}}]},
                {"blocked_until": 1, "holder": 1, "lease_until": 1},
            ),
            now,
        )
        busiest = readings.busiest_runs(
            db.runs.find(
                {"state": RUNNING},
                {"schedule_id": 1, "outstanding": 1, "discovered": 1},
            )
        )
        runs_by_state = dict.fromkeys([(PLANNING,), (RUNNING,)], 0)
        runs_by_state.update({(str(r["_id"]),): r["n"] for r in open_runs})
        return [
            *_due_family(due),
            *_waiting_families(waiting),
            *_pool_families(slots),
            _count_family("crawlsched_accounts", "Accounts by media and state.", ["media", "state"],
                          account_states),
            _count_family("crawlsched_nodes", "Selenium nodes by state.", ["state"],
                          {(k,): v for k, v in node_states.items()}),
            _count_family("crawlsched_proxies", "Proxies by state (cooling: resting after "
                          "failures).", ["state"], {(k,): v for k, v in proxy_states.items()}),
            _count_family("crawlsched_open_runs", "Runs not finished, by state.", ["state"],
                          runs_by_state),
            _count_family("crawlsched_hosts", "Hosts blocked now, and held now by a worker.",
                          ["state"], {(k,): v for k, v in hosts.items()}),
            *_run_families(busiest),
        ]  # fmt: skip


def _count_family(name: str, doc: str, labels: list[str], counts) -> GaugeMetricFamily:
    family = _gauge(name, doc, labels)
    for key, n in sorted(counts.items()):
        family.add_metric(list(key), n)
    return family


def _due_family(due) -> list[Metric]:
    return [
        _count_family(
            "crawlsched_due_jobs",
            "Jobs due now, by task and the category the planner would route them to.",
            ["task", "category"],
            due,
        )
    ]


def _waiting_families(waiting: dict) -> list[Metric]:
    labels = ["pool", "media"]
    batches = _gauge("crawlsched_waiting_batches", "Batches waiting for a pool.", labels)
    jobs = _gauge("crawlsched_waiting_jobs", "Jobs in batches waiting for a pool.", labels)
    overdue = _gauge(
        "crawlsched_starving_batches",
        "Waiting batches past their wait bound (the next tick starves them).",
        labels,
    )
    oldest = _gauge(
        "crawlsched_oldest_wait_seconds", "How long the oldest waiting batch has waited.", labels
    )
    for key, entry in sorted(waiting.items()):
        batches.add_metric(list(key), entry.batches)
        jobs.add_metric(list(key), entry.jobs)
        overdue.add_metric(list(key), entry.overdue)
        oldest.add_metric(list(key), entry.oldest_s)
    return [batches, jobs, overdue, oldest]


def _run_families(busiest: list[dict]) -> list[Metric]:
    labels = ["schedule", "run"]
    outstanding = _gauge(
        "crawlsched_run_outstanding_jobs",
        f"Pages a running run still waits for (its {readings.TOP_RUNS} busiest runs).",
        labels,
    )
    discovered = _gauge(
        "crawlsched_run_discovered_jobs",
        f"Pages a running run discovered so far (its {readings.TOP_RUNS} busiest runs).",
        labels,
    )
    for row in busiest:
        outstanding.add_metric([row["schedule"], row["run"]], row["outstanding"])
        discovered.add_metric([row["schedule"], row["run"]], row["discovered"])
    return [outstanding, discovered]


def _pool_families(slots: dict) -> list[Metric]:
    labels = ["pool", "media"]
    capacity = _gauge(
        "crawlsched_pool_capacity",
        "Leases the pool's usable resources can hold now (active accounts, up nodes, active "
        "proxies).",
        labels,
    )
    held = _gauge("crawlsched_pool_leases_held", "Live leases held in the pool.", labels)
    open_slots = _gauge(
        "crawlsched_pool_open_slots", "Leases the pool could grant now (capacity - held).", labels
    )
    for key, (cap, n) in sorted(slots.items()):
        capacity.add_metric(list(key), cap)
        held.add_metric(list(key), n)
        open_slots.add_metric(list(key), max(cap - n, 0))
    return [capacity, held, open_slots]
