"""The whole flow on the real RabbitMQ: in-process worker threads, and `dramatiq` CLI workers."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crawlsched.catalog import JOB_COLLECTIONS, JobState
from crawlsched.cli.demo import losses
from crawlsched.demo.site import DemoSite
from crawlsched.logs import configure_logging
from crawlsched.runtime import Runtime, get_runtime
from crawlsched.settings import Settings
from tests.support.rabbit import crawl_queue_consumers, publish_raw, queue_depth, queue_holding
from tests.support.seeding import all_runs_finished, fire_all_now, seed
from tests.support.waiting import wait_for
from tests.support.workers import TEST_SECRET_KEY, TEST_SIGNING_KEY, DramatiqWorkers, crawlsched_env

pytestmark = pytest.mark.rabbitmq


def assert_nothing_lost(rt: Runtime, runs: list[dict]) -> None:
    assert losses(rt, runs) == []
    for run in runs:
        assert run["planned"] > 0
        assert sum(run["counts"].values()) == run["planned"], run


def test_pipeline_in_process_worker_on_rabbitmq(
    rabbitmq_broker, rabbitmq_worker, chromedriver_node
):
    # Given the demo's jobs in all four categories and a local site
    from crawlsched.actors import ticker

    rt = get_runtime()
    with DemoSite() as site:
        seeded = seed(rt, site.base_url, node_url=chromedriver_node)
        fire_all_now(rt)
        # When one tick goes through RabbitMQ
        ticker.tick.send()
        runs = wait_for(lambda: all_runs_finished(rt), 60, "both sweeps to finish")
    # Then every planned job ended once, results were stored, and no lease is held
    assert_nothing_lost(rt, runs)
    planned = sum(r["planned"] for r in runs)
    assert planned == seeded["profiles"] + seeded["websites"]
    succeeded = sum(r["counts"].get("succeeded", 0) for r in runs)
    assert succeeded > 0
    assert rt.db.profile_data.count_documents({}) + rt.db.articles.count_documents({}) > 0
    categories = {k for r in runs for k in r["plan_stats"] if k.startswith("jobs.")}
    assert len(categories) == 4


def _mongo_runtime(mongo_url: str, db_name: str, broker_url: str) -> Runtime:
    return Runtime(
        Settings(
            mongo_url=mongo_url,
            mongo_db=db_name,
            broker_url=broker_url,
            secret_key=TEST_SECRET_KEY,
            message_signing_key=TEST_SIGNING_KEY,
        )
    )


@pytest.mark.multiprocess
def test_pipeline_cli_workers_two_processes(
    rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, mongo_database_name, chromedriver_node
):
    from crawlsched.actors import ticker

    rt = _mongo_runtime(multiprocess_mongo_url, mongo_database_name, rabbitmq_url)
    env = crawlsched_env(rabbitmq_url, multiprocess_mongo_url, mongo_database_name)
    with DemoSite() as site, DramatiqWorkers(env, processes=2, threads=2) as workers:
        seed(rt, site.base_url, node_url=chromedriver_node)
        fire_all_now(rt)
        ticker.tick.send()
        try:
            runs = wait_for(lambda: all_runs_finished(rt), 90, "both sweeps to finish")
        except AssertionError:
            print(workers.output()[-5000:])
            raise
        # Both forked worker processes consume the crawl queues (a channel each): which of them
        # happens to take the batches is the broker's and the scheduler's business.
        consumers = crawl_queue_consumers(rabbitmq_url)
    assert_nothing_lost(rt, runs)
    # Scarce pools (3 accounts, 2 browser slots, more batches than that): batches waited, none
    # starved, and each account or node served several batches of the run.
    assert all(run["counts"].get("starved", 0) == 0 for run in runs)
    profiles = next(r for r in runs if r["schedule_id"] == "sweep-profiles")
    served = rt.assignments.for_run(profiles["_id"])
    assert len(served) > 3
    assert consumers and all(n == 2 for n in consumers.values()), consumers
    # Results name the host:pid of the worker process that stored them.
    crawled_by = set(rt.db.profile_data.distinct("crawled_by")) | set(
        rt.db.articles.distinct("crawled_by")
    )
    assert crawled_by and all(re.fullmatch(r"[^:]+:[0-9]+", w) for w in crawled_by), crawled_by


@pytest.mark.multiprocess
def test_sigkill_worker_mid_run_loses_nothing(
    rabbitmq_broker,
    rabbitmq_url,
    multiprocess_mongo_url,
    mongo_database_name,
    chromedriver_node,
    tmp_path,
):
    # Given two independent worker groups and a driver slow enough to be killed mid-batch
    from crawlsched.actors import ticker

    rt = _mongo_runtime(multiprocess_mongo_url, mongo_database_name, rabbitmq_url)
    env = crawlsched_env(
        rabbitmq_url,
        multiprocess_mongo_url,
        mongo_database_name,
        CRAWLSCHED_DRIVER_MODULES='["tests.support.slow_driver"]',
        CRAWLSCHED_TEST_SLOW_DRIVER_S="0.15",
        # A batch whose message died with the victim is reclaimed when its dispatch lease
        # runs out (counted expired, one attempt): 30 s here instead of 15 minutes. A batch
        # crawls in a few seconds, far inside it.
        CRAWLSCHED_DISPATCH_LEASE_S="30",
    )
    with DemoSite() as site:
        seed(rt, site.base_url, driver_class="slow", node_url=chromedriver_node)
        fire_all_now(rt)
        victim_log, survivor_log = tmp_path / "victim.log", tmp_path / "survivor.log"
        victim_env = {**env, "CRAWLSCHED_TEST_START_LOG": str(victim_log)}
        survivor_env = {**env, "CRAWLSCHED_TEST_START_LOG": str(survivor_log)}
        victim = DramatiqWorkers(victim_env, processes=1, threads=4).start()
        survivor = DramatiqWorkers(survivor_env, processes=1, threads=4).start()
        clock = None
        try:
            ticker.tick.send()
            # When the victim is in the middle of a batch, SIGKILL it
            wait_for(victim_log.exists, 60, "the victim to start crawling a batch")
            assert all_runs_finished(rt) is None, "too fast to kill anything mid-run"
            victim.kill()
            started_by_victim = _dispatches(victim_log)
            # A clock keeps ticking, as in any deployment: a batch the victim's admission pass
            # had taken when it died is free again once its hold lapses, and only the ticker's
            # sweep (not a lease release, all of which may be over) admits it then.
            clock = subprocess.Popen(
                [str(Path(sys.executable).parent / "crawlsched"), "clock", "--interval", "1"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            # Then the other group finishes everything: redelivered batches are re-run
            try:
                runs = wait_for(lambda: all_runs_finished(rt), 240, "runs to finish after SIGKILL")
            except AssertionError as e:
                raise AssertionError(f"{e}; state: {_stuck_state(rt)}") from None
        finally:
            victim.kill()
            survivor.stop()
            if clock is not None:
                clock.terminate()
                clock.wait(timeout=30)
    assert_nothing_lost(rt, runs)
    # The victim held a batch in flight, and that same crawl message (same dispatch id, so not
    # re-planned) was redelivered to the survivor, which ran it.
    redelivered = started_by_victim & _dispatches(survivor_log)
    assert started_by_victim, "the victim had no batch in flight"
    assert redelivered, f"none of {sorted(started_by_victim)} was run again by the survivor"
    for collection in JOB_COLLECTIONS:
        running = rt.jobs(collection).summary().get(str(int(JobState.RUNNING)), 0)
        assert running == 0


def _stuck_state(rt: Runtime) -> dict:
    """What a run that did not finish is waiting on: for the failure message."""
    return {
        "runs": [
            {k: r.get(k) for k in ("_id", "state", "outstanding", "planned", "counts")}
            for r in rt.db.runs.find({}, {"reports": 0})
        ],
        "waiting": list(rt.db.waiting_batches.find({}, {"message": 0})),
        "running_jobs": {c: rt.jobs(c).summary() for c in JOB_COLLECTIONS},
        "leases": [
            (doc.get("_id"), doc.get("leases"))
            for name in ("accounts", "selenium_nodes")
            for doc in rt.db[name].find({}, {"leases": 1})
        ],
    }


def _dispatches(start_log) -> set[str]:
    """Dispatch ids of the batches whose crawl a worker started (tests.support.slow_driver)."""
    if not start_log.exists():
        return set()
    return {line.split()[0] for line in start_log.read_text().splitlines() if line.strip()}


@pytest.mark.multiprocess
def test_two_clocks_never_plan_a_fire_time_twice(
    rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, mongo_database_name
):
    # Given sweeps that fire every second and two clocks ticking five times a second
    rt = _mongo_runtime(multiprocess_mongo_url, mongo_database_name, rabbitmq_url)
    rt.create_indexes()
    rt.schedules.ensure_defaults(rt.now())
    rt.db.schedules.update_many({}, {"$set": {"interval_s": 1, "anchor": rt.now()}})
    env = crawlsched_env(rabbitmq_url, multiprocess_mongo_url, mongo_database_name)
    cli = str(Path(sys.executable).parent / "crawlsched")
    queues = ("crawlsched.ticks", "crawlsched.plan")
    with DramatiqWorkers(env, processes=2, threads=4, queues=queues) as workers:
        clocks = [
            subprocess.Popen(
                [cli, "clock", "--interval", "0.2", "--count", "20"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        for clock in clocks:
            assert clock.wait(timeout=60) == 0, clock.stderr.read().decode()[-2000:]
        fired = wait_for(
            lambda: sum(s.get("fired", 0) for s in rt.schedules.all()) >= 4,
            30,
            "several fire times",
        )
        assert fired
        # No tick left, not even one a ticker holds: the schedules' counts are final.
        wait_for(lambda: queue_holding(rabbitmq_url, "crawlsched.ticks") == 0, 60, "ticks done")
        total_fired = sum(s["fired"] for s in rt.schedules.all())
        # Every fired time reaches a run, however long its plan message takes: an empty ready
        # queue is not enough (a message being planned is unacked, one whose store call timed
        # out under load waits in the delay queue for its retry).
        try:
            wait_for(
                lambda: rt.db.runs.count_documents({}) >= total_fired, 180, "every fire planned"
            )
        except AssertionError as e:
            raise AssertionError(f"{e}; workers said: {workers.output()[-3000:]}") from None
    # Then each fire time was won by exactly one ticker and planned exactly once
    runs = list(rt.db.runs.find({}, {"schedule_id": 1, "fire_at": 1}))
    assert len(runs) == total_fired
    assert len({(r["schedule_id"], r["fire_at"]) for r in runs}) == len(runs)


def test_malformed_messages_are_dead_lettered_and_worker_goes_on(
    rabbitmq_broker, rabbitmq_url, embedded_mongo_url
):
    from dramatiq import Worker

    from crawlsched.actors import planner, ticker

    # Given an undecodable body on a crawl queue and a plan message with a bad argument
    rt = get_runtime()
    rt.create_indexes()
    rt.schedules.ensure_defaults(rt.now())
    worker = Worker(rabbitmq_broker, worker_timeout=100, worker_threads=2)
    worker.start()
    try:
        # (Published once the worker consumes the queue: a body sent to a queue not declared
        # yet would be dropped by RabbitMQ, not dead-lettered.)
        wait_for(
            lambda: crawl_queue_consumers(rabbitmq_url).get("crawlsched.crawl.profile"),
            30,
            "the worker to consume crawlsched.crawl.profile",
        )
        publish_raw(rabbitmq_url, "crawlsched.crawl.profile", b"\x00 not a dramatiq message")
        planner.plan_crawls.send("sweep-profiles", "not-a-date")
        # When the worker has consumed both (and a good tick after them)
        wait_for(
            lambda: queue_depth(rabbitmq_url, "crawlsched.crawl.profile.XQ") == 1,
            30,
            "the undecodable message in crawlsched.crawl.profile.XQ",
        )
        wait_for(
            lambda: queue_depth(rabbitmq_url, "crawlsched.plan.XQ") == 1,
            30,
            "the bad plan message in crawlsched.plan.XQ",
        )
        ticker.tick.send()
        runs = wait_for(lambda: all_runs_finished(rt), 30, "the sweeps after the bad messages")
    finally:
        worker.stop()
    # Then both were dead-lettered once (no retries of bad input) and good work still flows
    assert {r["schedule_id"] for r in runs} == {"sweep-profiles", "sweep-websites"}
    assert queue_depth(rabbitmq_url, "crawlsched.plan.XQ") == 1


def test_secrets_appear_in_no_message_log_output_or_result(
    rabbitmq_broker, rabbitmq_worker, chromedriver_node, capfd, monkeypatch
):
    # Given the demo's accounts (secrets "demo-secret-…"), every message body recorded, and
    # every log line: logging was configured with the sys.stderr of the broker fixture's set-up,
    # before capfd began, so its lines never reached capfd. Log to a stream of our own.
    import dramatiq

    log_stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log_stream)
    configure_logging("json", "INFO")

    from crawlsched.actors import ticker

    bodies: list[bytes] = []

    class RecordBodies(dramatiq.Middleware):
        def before_enqueue(self, broker, message, delay):
            bodies.append(message.encode())

    rabbitmq_broker.add_middleware(RecordBodies())
    rt = get_runtime()
    with DemoSite() as site:
        seed(rt, site.base_url, node_url=chromedriver_node)
        fire_all_now(rt)
        ticker.tick.send()
        runs = wait_for(lambda: all_runs_finished(rt), 60, "both sweeps to finish")
    assert_nothing_lost(rt, runs)
    assert sum(r["counts"].get("succeeded", 0) for r in runs) > 0
    assert rt.assignments.for_run(runs[0]["_id"]) or rt.assignments.for_run(runs[1]["_id"])

    # Then no secret is in any message, log line or stored document but encrypted
    output = capfd.readouterr()
    logged = log_stream.getvalue()
    stored = [repr(list(rt.db[name].find({}))) for name in rt.db.raw.list_collection_names()]
    assert len(bodies) > 10
    assert '"batch_admitted"' in logged  # the log lines searched below are really there
    for secret in ("demo-secret-twitter-1", "demo-secret-twitter-2", "demo-secret-instagram-1"):
        assert not any(secret.encode() in body for body in bodies)
        assert secret not in output.out and secret not in output.err and secret not in logged
        assert not any(secret in text for text in stored)
