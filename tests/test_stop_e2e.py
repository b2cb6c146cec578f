"""Stop a run mid-crawl on the real RabbitMQ, with `dramatiq` CLI workers and the CLI's stop.

Workers are two forked processes sharing the multi-process test MongoDB; the driver is the
test plug-in `slow` (100 ms per job), so the stop lands in the middle of the batches.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crawlsched.planning.run_names import ENDED, STOPPED
from tests.support.waiting import wait_for
from tests.support.workers import DramatiqWorkers, crawlsched_env
from tests.test_admission_flow import _setup, _twitter_jobs
from tests.test_e2e_rabbitmq import _mongo_runtime
from tests.test_events_and_webhooks import EventConsumer

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]

THREADS = 2 * 2  # processes times threads per process


def test_stop_run_mid_crawl_with_cli_workers(
    rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, mongo_database_name
):
    from crawlsched.actors import ticker

    # Given 2 accounts, 150 profile jobs (6 batches) and a consumer on crawlsched.events
    rt = _mongo_runtime(multiprocess_mongo_url, mongo_database_name, rabbitmq_url)
    _setup(rt, accounts=2)
    _twitter_jobs(rt, 150, 0, "u")
    consumer = EventConsumer(rabbitmq_url)
    env = crawlsched_env(
        rabbitmq_url,
        multiprocess_mongo_url,
        mongo_database_name,
        CRAWLSCHED_DRIVER_MODULES='["tests.support.slow_driver"]',
        CRAWLSCHED_TEST_SLOW_DRIVER_S="0.1",
        CRAWLSCHED_STOP_CHECK_S="0.05",  # below one job's time: a check before every job
    )
    cli = str(Path(sys.executable).parent / "crawlsched")
    with DramatiqWorkers(env, processes=2, threads=2) as workers:
        rt.schedules.fire_now("sweep-profiles", rt.now())
        ticker.tick.send()
        try:
            wait_for(lambda: rt.db.task_history.count_documents({}) >= 10, 90, "crawling to start")
            run = rt.db.runs.find_one({"schedule_id": "sweep-profiles"})
            assert run["state"] not in ENDED, "too fast to stop anything mid-run"

            # When the operator stops the run with the CLI
            stop = subprocess.run(
                [cli, "run", "stop", run["_id"], "--json"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert stop.returncode == 0, stop.stderr
            assert json.loads(stop.stdout)["stopping"] == [run["_id"]]

            # Then in-flight work ends within a bounded time and the run ends stopped
            ended = wait_for(
                lambda: (r := rt.runs.get(run["_id"])) and r["state"] in ENDED and r,
                60,
                "the run to end after the stop",
            )
        except AssertionError:
            print(workers.output()[-5000:])
            raise
    events = [
        (key, body["event"]) for key, body in consumer.drain() if body.get("run_id") == run["_id"]
    ]
    consumer.close()
    assert ended["state"] == STOPPED
    counts = ended["counts"]
    stopped_at = ended["stop_requested_at"]  # written by the CLI when the stop took effect
    assert sum(counts.values()) == ended["planned"] == 150, counts
    assert counts.get("stopped", 0) > 0 and counts.get("succeeded", 0) >= 10
    # Nothing was dispatched after the stop: at most one job per worker thread had passed
    # its check just before it, and no batch was admitted (leased) afterwards
    late = rt.db.task_history.count_documents({"started_at": {"$gt": stopped_at}})
    assert late <= THREADS, late
    assert rt.db.task_history.count_documents({}) == counts["succeeded"]
    # Reported stopped exactly once, on the exchange and in the activity feed
    assert events == [("run.started", "RunStarted"), ("run.stopped", "RunStopped")]
    assert rt.db.activity.count_documents({"run_id": run["_id"], "event": "RunStopped"}) == 1
    # Every lease came back; no job is left running; nothing waits
    assert rt.inventory.overview(rt.now())["account"]["held"] == 0
    assert rt.jobs("profiles").summary().get("2", 0) == 0
    assert rt.waiting.all() == []
    print(
        f"stop→end {(ended['finished_at'] - stopped_at).total_seconds():.2f}s, "
        f"late starts {late}, counts {counts}"
    )
