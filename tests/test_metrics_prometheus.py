"""A real Prometheus scrapes a `dramatiq` worker group (2 processes) and the clock during a run.

Once per module: the demo's jobs on the multi-process MongoDB server, a Selenium node that is
down (so Selenium batches wait, then starve), `dramatiq crawlsched.actors --processes 2` and
`crawlsched clock` as subprocesses on the real RabbitMQ, Prometheus scraping both exporters
every second. Then the worker group is restarted and scraped again.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import dramatiq
import httpx
import pytest

from crawlsched.brokers.guards import SIGNATURE_OPTION, signature
from crawlsched.demo.site import DemoSite
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.deploy import METRIC_NAME, dashboard_queries, rule_expressions
from tests.support.mongo_server import fresh_database_name
from tests.support.ports import free_port, refusing_port
from tests.support.prometheus import PrometheusServer
from tests.support.rabbit import publish_raw
from tests.support.seeding import all_runs_finished, fire_all_now, seed
from tests.support.services import service_unavailable
from tests.support.waiting import wait_for
from tests.support.workers import (
    REPO,
    TEST_SECRET_KEY,
    TEST_SIGNING_KEY,
    DramatiqWorkers,
    crawlsched_env,
)

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]

WORKERS_JOB, CLOCK_JOB = "crawlsched-workers", "crawlsched-clock"


class GatedDemoSite(DemoSite):
    """The demo's site, holding every request until `release()`: its runs stay running (their
    pages in flight) as long as the test needs to look at them."""

    def __init__(self) -> None:
        super().__init__()
        self._open = threading.Event()
        handle, is_open = self._server.RequestHandlerClass.do_GET, self._open

        class Held(self._server.RequestHandlerClass):
            def do_GET(self) -> None:
                is_open.wait(120)
                handle(self)

        self._server.RequestHandlerClass = Held

    def release(self) -> None:
        self._open.set()

    def __exit__(self, *exc: object) -> None:
        self._open.set()
        super().__exit__(*exc)


def _total(prom: PrometheusServer, expr: str) -> float:
    return prom.value(f"sum({expr})") or 0.0


def _exporter_answers(address: str) -> bool:
    try:
        return httpx.get(f"http://{address}/metrics", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def observed(rabbitmq_url, multiprocess_mongo_url, tmp_path_factory):
    if not PrometheusServer.available():
        service_unavailable("prometheus is not installed (Debian package prometheus)")
    db_name = fresh_database_name("metrics_prometheus")
    worker_address, clock_address = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    env = crawlsched_env(
        rabbitmq_url,
        multiprocess_mongo_url,
        db_name,
        CRAWLSCHED_METRICS_DIR=str(tmp_path_factory.mktemp("metrics")),
        CRAWLSCHED_METRICS_ADDRESS=worker_address,
        CRAWLSCHED_CLOCK_METRICS_ADDRESS=clock_address,
        CRAWLSCHED_ADMISSION_WAIT_S="3",
        CRAWLSCHED_NODE_PROBE_INTERVAL_S="1",
    )
    rt = Runtime(
        Settings(
            mongo_url=multiprocess_mongo_url,
            mongo_db=db_name,
            broker_url=rabbitmq_url,
            secret_key=TEST_SECRET_KEY,
            message_signing_key=TEST_SIGNING_KEY,
        )
    )
    found: dict = {}
    targets = {WORKERS_JOB: [worker_address], CLOCK_JOB: [clock_address]}
    cli = str(Path(sys.executable).parent / "crawlsched")
    with GatedDemoSite() as site, PrometheusServer(targets) as prom, refusing_port() as dead:
        seed(rt, site.base_url, node_url=None)
        # A node nobody listens on: the ticker finds it down, Selenium batches starve.
        rt.inventory.add_node(f"http://127.0.0.1:{dead}", "chromedriver", 2, rt.now())
        fire_all_now(rt)
        workers = DramatiqWorkers(env, processes=2, threads=2).start()
        clock = subprocess.Popen(
            [cli, "clock", "--interval", "0.5"], cwd=REPO, env=env, stderr=subprocess.PIPE
        )
        try:
            # While the site holds every page, the runs are running for sure: Prometheus sees
            # the per-run gauges of the clock's exporter before anything can end.
            wait_for(
                lambda: (prom.value("count(crawlsched_run_outstanding_jobs > 0)") or 0) >= 1,
                60,
                "Prometheus to see a running run's outstanding pages",
            )
            site.release()
            runs = wait_for(lambda: all_runs_finished(rt), 120, "both sweeps to finish")
            found["runs"] = runs
            counts = Counter()
            for run in runs:
                counts.update(run["counts"])
            found["counts"] = counts
            # When Prometheus has scraped the final counts
            wait_for(
                lambda: _total(prom, "crawlsched_jobs_finished_total") == sum(counts.values()),
                60,
                f"Prometheus to see {sum(counts.values())} jobs finished",
            )
            wait_for(
                lambda: _total(prom, "crawlsched_runs_finished_total") == len(runs),
                30,
                "Prometheus to see the runs finished",
            )
            found["by_outcome"] = {
                outcome: _total(prom, f'crawlsched_jobs_finished_total{{outcome="{outcome}"}}')
                for outcome in counts
            }
            found["assignments"] = sum(len(rt.assignments.for_run(r["_id"])) for r in runs)
            found["shortages"] = sum(len(r.get("shortages", [])) for r in runs)
            for name in (
                "crawlsched_jobs_dispatched_total",
                "crawlsched_runs_planned_total",
                "crawlsched_runs_finished_total",
                "crawlsched_batches_admitted_total",
                "crawlsched_batches_starved_total",
                "crawlsched_batches_parked_total",
                "crawlsched_batches_requeued_total",
                'dramatiq_messages_total{actor_name="record_finished"}',
            ):
                found[name] = _total(prom, name)
            found["crawled_by"] = set(rt.db.profile_data.distinct("crawled_by")) | set(
                rt.db.articles.distinct("crawled_by")
            )
            # Processes whose counters the exporter sums (prometheus-client's multiprocess
            # files are named by pid); the clock writes its own too.
            found["counting_pids"] = {
                int(f.stem.rsplit("_", 1)[1])
                for f in Path(env["CRAWLSCHED_METRICS_DIR"]).glob("counter_*.db")
            } - {clock.pid}
            wait_for(
                lambda: prom.value('max(crawlsched_nodes{state="down"})') == 1,
                30,
                "the store gauges to show the node down",
            )
            found["twitter_capacity"] = prom.value(
                'max(crawlsched_pool_capacity{pool="account", media="twitter"})'
            )
            # A message that is dead-lettered (bad input is never retried): dramatiq's error and
            # reject counters get a series too.
            # Signed, so that it reaches the actor, whose check refuses it (an unsigned one
            # would be refused by the guard before any actor ran: no error counted).
            bad = dramatiq.Message(
                queue_name="crawlsched.plan",
                actor_name="plan_crawls",
                args=("sweep-profiles", "not-a-date"),
                kwargs={},
                options={},
            )
            bad.options[SIGNATURE_OPTION] = signature(TEST_SIGNING_KEY.encode(), bad)
            publish_raw(rabbitmq_url, "crawlsched.plan", bad.encode())
            wait_for(
                lambda: _total(prom, "dramatiq_message_rejects_total") >= 1,
                30,
                "Prometheus to see the dead-lettered message",
            )
            found["names"] = prom.names()
            found["query_errors"] = {}
            for where, expr in dashboard_and_rule_metric_queries():
                try:
                    prom.query(expr)
                except httpx.HTTPStatusError as e:
                    found["query_errors"][where] = e.response.text[:300]

            # When the worker group is restarted (same multiprocess directory)
            workers.stop()
            workers = DramatiqWorkers(env, processes=2, threads=2).start()
            wait_for(lambda: _exporter_answers(worker_address), 60, "the new group's exporter")
            ready_at = time.time()
            wait_for(
                lambda: (
                    (prom.value(f'timestamp(up{{job="{WORKERS_JOB}"}})') or 0) > ready_at + 2
                    and prom.value(f'up{{job="{WORKERS_JOB}"}}') == 1
                ),
                60,
                "Prometheus to scrape the new group",
            )
            found["after_restart_jobs_finished"] = _total(prom, "crawlsched_jobs_finished_total")
            found["after_restart_reports"] = _total(
                prom, 'dramatiq_messages_total{actor_name="record_finished"}'
            )
            found["after_restart_ticks"] = _total(prom, "crawlsched_ticks_total")
        except AssertionError:
            # What each side counted, by outcome: a mismatch names the outcome that differs.
            print("store counts:", dict(found.get("counts") or {}))
            print(
                "prometheus counts:",
                {
                    s["metric"].get("outcome"): s["value"][1]
                    for s in prom.query("sum by (outcome) (crawlsched_jobs_finished_total)")
                },
            )
            print(workers.output()[-5000:])
            raise
        finally:
            clock.terminate()
            clock.wait(timeout=20)
            workers.stop()
    return found


def test_prometheus_counters_equal_what_the_run_did(observed):
    runs, counts = observed["runs"], observed["counts"]
    # Both worker processes counted (RabbitMQ hands messages to its consumers in turn), so
    # the sums below add two processes' counts. (Which of them crawled the sweeps' few
    # batches is up to the scheduler: at least one.)
    assert len(observed["counting_pids"]) >= 2, observed["counting_pids"]
    assert len(observed["crawled_by"]) >= 1
    assert counts["starved"] > 0 and counts["succeeded"] > 0
    assert observed["by_outcome"] == {k: float(v) for k, v in counts.items()}
    assert observed["crawlsched_jobs_dispatched_total"] == sum(r["planned"] for r in runs)
    assert observed["crawlsched_runs_planned_total"] == len(runs) == 2
    assert observed["crawlsched_runs_finished_total"] == 2
    assert observed["crawlsched_batches_admitted_total"] == observed["assignments"] > 0
    assert observed["crawlsched_batches_starved_total"] == observed["shortages"] > 0
    # Every batch came to admission from the planner (parked) or back from a crawl that
    # could not finish it (requeued: its host held by the other process, a node lost), and
    # was admitted or starved once each time.
    assert (
        observed["crawlsched_batches_parked_total"] + observed["crawlsched_batches_requeued_total"]
        == observed["assignments"] + observed["shortages"]
    )
    # dramatiq's own actor metrics come through the same exporter: one message per report.
    assert observed['dramatiq_messages_total{actor_name="record_finished"}'] >= len(runs)
    assert observed["twitter_capacity"] == 2


def test_prometheus_restart_does_not_resurrect_old_counts(observed):
    assert observed["crawlsched_runs_finished_total"] == 2
    # The new group counted ticks of its own, and nothing of the old group's run.
    assert observed["after_restart_ticks"] > 0
    assert observed["after_restart_jobs_finished"] == 0
    assert observed["after_restart_reports"] == 0


def dashboard_and_rule_metric_queries() -> list[tuple[str, str]]:
    return [*dashboard_queries(), *rule_expressions()]


def dashboard_and_rule_metric_names() -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for where, expr in dashboard_and_rule_metric_queries():
        for name in METRIC_NAME.findall(expr):
            used.setdefault(name, set()).add(where)
    return used


def test_every_metric_in_dashboards_and_alerts_is_really_exported(observed):
    used = dashboard_and_rule_metric_names()
    assert len(used) > 20
    missing = {name: sorted(where) for name, where in used.items() if name not in observed["names"]}
    assert missing == {}


def test_every_dashboard_and_alert_query_is_valid_promql(observed):
    assert observed["query_errors"] == {}
