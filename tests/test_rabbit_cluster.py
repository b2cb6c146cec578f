"""A RabbitMQ node dies in the middle of a run, on a three-node cluster started for the test.

Two `dramatiq` CLI worker processes and a `crawlsched clock` run against the cluster, with
every node's URL in CRAWLSCHED_BROKER_URL. When the first batches are being crawled, the node
that holds the crawl queue (a quorum queue's leader, a classic queue's home) dies: SIGKILL of
its Erlang VM. (A graceful `rabbitmqctl stop_app` of that node, and repeated trials of both, are
the `rabbit_stop` and `rabbit_node` faults of `benchmarks/bench_faults.py`.)

- On quorum queues the run finishes: workers reconnect to another node, every job ends exactly
  once (counted once by the run, one execution in the task history), no message is
  dead-lettered. The dispatch lease is an hour, so nothing waited for one to run out.
- On classic queues (the default, for one node) the same death loses what the node held: the
  run cannot finish. The test asserts that something was lost (else the death hit nothing and
  the quorum runs prove nothing), and prints both runs' figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Literal

import pytest

from crawlsched.catalog import JobState
from crawlsched.demo.seed import demo_reference
from crawlsched.planning.run_names import FINISHED
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.rabbit_cluster import RabbitCluster, cluster_unavailable
from tests.support.services import service_unavailable
from tests.support.waiting import wait_for
from tests.support.workers import TEST_SECRET_KEY, DramatiqWorkers, crawlsched_env

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]

JOBS = 400  # web's batch limit is 50: 8 batches, twice what 2 processes of 2 threads hold
SLOW_S = "0.05"  # per job: a batch crawls in about 2.5 s
CRAWL_QUEUE = "crawlsched.crawl.article"
CLASSIC_WATCH_S = 40  # how long the classic run is watched after the death, for its figures

Death = Literal["stop_app", "sigkill"]


@pytest.fixture
def cluster():
    if reason := cluster_unavailable():
        service_unavailable(f"no RabbitMQ cluster: {reason}")
    started = RabbitCluster()
    try:
        started.start()
        yield started
    finally:
        started.remove()


def _seed(rt: Runtime) -> list:
    reference = demo_reference("http://127.0.0.1:9")
    media = [
        m.model_copy(update={"driver_class": "slow"}) if m.name == "web" else m
        for m in reference.media
    ]
    rt.create_indexes()
    rt.reference.load(reference.model_copy(update={"media": media}))
    rt.schedules.ensure_defaults(rt.now())
    now = rt.now()
    web = rt.reference.media_by_name("web")
    rt.jobs("websites").insert_new(
        [
            {
                "target": f"http://127.0.0.1:9/page{i}",
                "media_name": "web",
                "media_name_id": web["_id"],
                "task": "article",
                "state": int(JobState.PENDING),
                "enabled": True,
                "execution_date": now,
                "human_validation": 0,
                "certitude": 0.5,
                "modified_at": now,
                "attempt_count": 0,
            }
            for i in range(JOBS)
        ]
    )
    rt.schedules.fire_now("sweep-websites", rt.now())
    return [d["_id"] for d in rt.db.websites.find({}, {"_id": 1})]


def _starts(log: Path) -> list[tuple[str, float]]:
    """(dispatch id, unix time) of every job start the slow driver logged."""
    if not log.exists():
        return []
    rows = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            rows.append((parts[0], float(parts[2])))
    return rows


def _run_through_a_death(
    cluster: RabbitCluster,
    mongo_url: str,
    db_name: str,
    queue_type: str,
    death: Death,
    tmp_path: Path,
) -> dict:
    rt = Runtime(
        Settings(
            mongo_url=mongo_url,
            mongo_db=db_name,
            broker_url="stub://",
            secret_key=TEST_SECRET_KEY,
            # The test server answers slowly under load: give it time rather than cancel.
            connect_timeout_s=60,
        )
    )
    _seed(rt)
    start_log = tmp_path / f"starts-{queue_type}-{death}.log"
    env = crawlsched_env(
        cluster.url,
        mongo_url,
        db_name,
        CRAWLSCHED_QUEUE_TYPE=queue_type,
        CRAWLSCHED_DRIVER_MODULES='["tests.support.slow_driver"]',
        CRAWLSCHED_TEST_SLOW_DRIVER_S=SLOW_S,
        CRAWLSCHED_TEST_START_LOG=str(start_log),
        # An hour: a run that finishes did not wait for a lost batch to be reclaimed.
        CRAWLSCHED_DISPATCH_LEASE_S="3600",
        CRAWLSCHED_CONNECT_TIMEOUT_S="30",
        # A worker holds as many crawl messages as it has threads, no more: the rest wait in
        # the queue, on the node that dies (dramatiq's default prefetches twice as many).
        dramatiq_queue_prefetch="2",
    )
    workers = DramatiqWorkers(env, processes=2, threads=2).start()
    clock_out = (tmp_path / f"clock-{queue_type}-{death}.log").open("wb")
    clock = subprocess.Popen(
        [str(Path(sys.executable).parent / "crawlsched"), "clock", "--interval", "1"],
        env=env,
        stdout=clock_out,
        stderr=subprocess.STDOUT,
    )
    figures: dict = {"queue_type": queue_type, "death": death, "planned": JOBS}
    try:
        # When the first batches are being crawled
        wait_for(lambda: _starts(start_log), 120, "the first crawl to start")
        survivor = cluster.nodes[-1]
        homes = cluster.queue_homes(survivor)
        victim = cluster.node_named(homes[CRAWL_QUEUE])
        asker = next(n for n in cluster.nodes if n is not victim)
        waiting = cluster.queue_depths(asker).get(CRAWL_QUEUE, 0)
        ended_before = _ended(rt)
        assert ended_before < JOBS, "the run ended before the node could be stopped"
        # Then the node that holds the crawl queue dies
        died_at = time.time()
        if death == "stop_app":
            cluster.stop_app(victim)
        else:
            cluster.sigkill(victim)
        figures.update(
            victim=victim.name.split("@")[0],
            crawl_messages_on_it=waiting,
            jobs_ended_before=ended_before,
        )
        if queue_type == "quorum":
            wait_for(
                lambda: _run(rt) is not None and _run(rt)["state"] == FINISHED,
                240,
                f"the run to finish after {death} of {victim.name}",
            )
        else:
            time.sleep(CLASSIC_WATCH_S)  # a bounded watch: it is the figures we want
        after = [t for dispatch, t in _first_starts(start_log).items() if t > died_at]
        figures["s_to_first_new_batch"] = round(min(after) - died_at, 1) if after else None
        # Ticks are disposable (max_age 60 s, no retries: the next tick does the same work),
        # so a tick that outlived the outage on a loaded machine is dead-lettered by design.
        # Any other dead letter is work the outage lost.
        dead = {n: d for n, d in cluster.queue_depths(asker).items() if n.endswith(".XQ") and d}
        figures["ticks_expired"] = dead.pop("crawlsched.ticks.XQ", 0)
        figures["dead_lettered"] = sum(dead.values())
    finally:
        clock.terminate()
        clock.wait(timeout=30)
        clock_out.close()
        workers.stop()
    run = _run(rt) or {}
    executions = Counter(row["job_id"] for row in rt.db.task_history.find({}, {"job_id": 1}))
    figures.update(
        run_finished=run.get("state") == FINISHED,
        jobs_ended=_ended(rt),
        jobs_counted_by_run=sum((run.get("counts") or {}).values()),
        jobs_ended_twice=sum(1 for n in executions.values() if n > 1),
        jobs_never_ended=JOBS - _ended(rt),
        batches_lost=len(
            {d["dispatch_id"] for d in rt.db.websites.find({"state": 2}, {"dispatch_id": 1})}
        ),
    )
    print("cluster run:", json.dumps(figures))
    return figures


def _run(rt: Runtime) -> dict | None:
    runs = [r for r in rt.runs.recent() if r["schedule_id"] == "sweep-websites"]
    return runs[0] if runs else None


def _ended(rt: Runtime) -> int:
    return rt.db.websites.count_documents(
        {"state": {"$ne": int(JobState.RUNNING)}, "run_id": {"$exists": True}}
    )


def _first_starts(log: Path) -> dict[str, float]:
    first: dict[str, float] = {}
    for dispatch, at in _starts(log):
        first.setdefault(dispatch, at)
    return first


def test_quorum_queues_finish_the_run_when_a_node_dies(
    cluster, multiprocess_mongo_url, mongo_database_name, tmp_path
):
    figures = _run_through_a_death(
        cluster, multiprocess_mongo_url, mongo_database_name, "quorum", "sigkill", tmp_path
    )
    assert figures["run_finished"] is True
    assert figures["jobs_counted_by_run"] == JOBS
    assert figures["jobs_ended"] == JOBS
    assert figures["jobs_ended_twice"] == 0
    assert figures["dead_lettered"] == 0
    assert figures["s_to_first_new_batch"] is not None


def test_classic_queues_lose_what_the_dead_node_held(
    cluster, multiprocess_mongo_url, mongo_database_name, tmp_path
):
    figures = _run_through_a_death(
        cluster, multiprocess_mongo_url, mongo_database_name, "classic", "sigkill", tmp_path
    )
    # What quorum queues save: without them the run cannot finish while the node is away
    assert figures["run_finished"] is False
    assert figures["jobs_ended_twice"] == 0
