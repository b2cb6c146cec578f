"""A `dramatiq` worker group told to stop (SIGTERM to its first process, as Kubernetes, docker
and a KEDA scale-down send it) in the middle of crawling a link graph, on the real RabbitMQ and
the multi-process MongoDB server: it exits 0 within its drain time, having recorded the pages
it had in flight and given the rest back; a new group finishes the run. No page is lost or
fetched twice, the run ends once, no lease is held (tests/support/fault_checks.py).

Its heartbeat: `python -m crawlsched.probe ready` passes while the group takes work, and no
heartbeat is left to pass `live` once it has drained and exited.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pymongo
import pytest

from tests.support.fault_distributed import Services, distributed_trial
from tests.support.fault_standalone import after_fetches
from tests.support.link_graph import layered_graph
from tests.support.waiting import wait_for
from tests.support.workers import REPO, DramatiqWorkers, crawlsched_env

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]

# 40 pages over four levels, 3 dead links, 3 redirects: 46 URLs to crawl.
GRAPH = layered_graph(40, seed=31, fan_out=3, dead=3, redirects=3)
# Slow pages one at a time, in batches of 20, so batches are mid-crawl when the signal comes.
# The drain time has a wide margin for a loaded machine: that a drain ends in about a page's
# time, not its batch's, is the simulation's to check (tests/test_sim_crawl.py, `drain`).
DELAY_S = 0.6
BATCH = 20
DRAIN_S = 10.0
# After the drain, dramatiq's own stop: its consumers close (each waits out its poll), what was
# prefetched is requeued, the first process sees its workers gone (it looks once a second).
SHUTDOWN_TAIL_S = 20.0


def test_sigterm_mid_crawl_drains_the_group_and_loses_or_refetches_no_page(
    rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, tmp_path: Path
):
    services = Services(rabbitmq_url, multiprocess_mongo_url)
    reachable = len(GRAPH.reachable())
    # Given a crawl under way, when the worker group is told to stop with about a third of
    # the pages fetched, and a new group started once it has exited
    trial = distributed_trial(
        services, tmp_path, GRAPH, DELAY_S, "worker_term", after_fetches(reachable // 3),
        batch_limit=BATCH, CRAWLSCHED_DRAIN_S=str(DRAIN_S), CRAWLSCHED_HOST_CONCURRENCY="1",
    )  # fmt: skip
    logs = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in services.logs)
    # Then the signal came mid-run, and the group drained: exit 0 within its drain time
    assert trial.fault_at is not None, "the run ended before the signal"
    assert trial.drain_exit == 0, logs
    assert trial.drain_s is not None, logs
    assert trial.drain_s <= DRAIN_S + SHUTDOWN_TAIL_S, (trial.drain_s, logs)
    # And the run is right by every invariant, and no page was fetched twice: those in
    # flight were recorded, the rest given back unfetched
    assert trial.check.problems() == [], (trial.check, logs)
    assert trial.check.fetched_twice == 0, (trial.check, logs)
    whole = "".join(p.read_text(errors="replace") for p in services.logs)
    assert "drain_over_limit" not in whole, logs
    assert "Traceback" not in whole, whole[-6000:]
    print(
        f"outcomes {trial.check.outcomes}, drained in {trial.drain_s:.1f}s, "
        f"recovery {trial.recovery_s:.1f}s"
    )


def _probe(env: dict[str, str], which: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "crawlsched.probe", which],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_worker_heartbeat_passes_the_probes_while_it_runs_and_not_after_it_drained(
    rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, tmp_path: Path
):
    heartbeat = tmp_path / "hb" / "heartbeat"
    env = crawlsched_env(
        rabbitmq_url, multiprocess_mongo_url, f"drain_{os.getpid()}",
        CRAWLSCHED_WORKER_HEARTBEAT_FILE=str(heartbeat), CRAWLSCHED_WORKER_HEARTBEAT_S="0.5",
    )  # fmt: skip
    # Before any worker: nothing passes
    before = _probe(env, "live")
    assert before.returncode == 1 and "no heartbeat" in before.stderr, before
    group = DramatiqWorkers(env, processes=2, threads=1).start()
    try:
        # Given a running group: both probes pass, one heartbeat per worker process
        wait_for(lambda: _probe(env, "ready").returncode == 0, 120, "the ready probe to pass")
        assert _probe(env, "live").returncode == 0
        assert len(list(heartbeat.parent.glob("heartbeat.*"))) == 2
        # When it is told to stop: it exits 0, and its heartbeats pass nothing afterwards
        _took_s, code = group.terminate()
    finally:
        group.stop()
        with pymongo.MongoClient(multiprocess_mongo_url) as client:
            client.drop_database(env["CRAWLSCHED_MONGO_DB"])
    assert code == 0, group.output()[-3000:]
    after = _probe(env, "live")
    assert after.returncode == 1 and "no heartbeat of a running process" in after.stderr, after
    # A probe without a heartbeat file set is a usage error, not a pass
    unset = {k: v for k, v in env.items() if k != "CRAWLSCHED_WORKER_HEARTBEAT_FILE"}
    assert _probe(unset, "live").returncode == 2
