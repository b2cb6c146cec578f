"""Unknown-size runs on real parts: `dramatiq` CLI workers (2 processes) on the real RabbitMQ
and the multi-process MongoDB server crawl served link graphs, also through a SIGKILL.

The end of each run is checked in the workers' own end handler (tests/support/end_probe.py,
loaded as a driver module): at that moment no job of the run may be running, pending or
waiting.
"""

from __future__ import annotations

import os
import signal

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support import end_probe
from tests.support.graph_run import (
    announced_end,
    ended_run,
    start_graph_run,
    stored_paths,
    wait_for_end,
    worker_graph_env,
)
from tests.support.link_graph import GraphSite, LinkGraph, link_graphs
from tests.support.ticks import Ticks
from tests.support.waiting import wait_for
from tests.support.workers import DramatiqWorkers

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]
CLEAN_END = {"running": 0, "pending": 0, "waiting": 0}


@pytest.fixture
def graph_env(rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, mongo_database_name, tmp_path):
    """A runtime on the shared server, and the workers' environment with the end probe."""
    return worker_graph_env(rabbitmq_url, multiprocess_mongo_url, mongo_database_name, tmp_path)


def _assert_run_matches(rt, run, graph: LinkGraph, base_url: str, probe: str) -> None:
    expected = graph.reachable()
    assert stored_paths(rt, run["_id"], base_url) == graph.stored()
    assert run["discovered"] == len(expected) - 1
    assert sum(run["counts"].values()) == len(expected)
    # The end is stored before it is announced (and recorded by the probe): wait for the row.
    ends = wait_for(
        lambda: [row for row in end_probe.read(probe) if row["run_id"] == run["_id"]],
        60,
        "the run's end recorded by the end probe",
    )
    assert len(ends) == 1, ends  # ended exactly once
    assert {k: ends[0][k] for k in CLEAN_END} == CLEAN_END


RUN_NUMBERS = iter(range(10**6))


@settings(max_examples=4, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=link_graphs(max_pages=8, max_leaves=120))
def test_discovered_graph_on_cli_workers(graph_env, graph):
    rt, env, probe = graph_env
    if not hasattr(test_discovered_graph_on_cli_workers, "workers"):
        workers = DramatiqWorkers(env, processes=2, threads=2).start()
        test_discovered_graph_on_cli_workers.workers = workers
    workers = test_discovered_graph_on_cli_workers.workers
    try:
        with GraphSite(graph) as site:
            run_id = start_graph_run(rt, site.base_url, f"cli-graph-{next(RUN_NUMBERS)}")
            try:
                run = wait_for(lambda: announced_end(rt, run_id), 120, "the run to end")
            except AssertionError:
                print(workers.output()[-5000:])
                raise
            fetched = {p: n for p, n in site.fetches.items() if p != "/robots.txt"}
        assert fetched == dict.fromkeys(graph.reachable(), 1)
        _assert_run_matches(rt, run, graph, site.base_url, probe)
    except BaseException:
        workers.stop()
        del test_discovered_graph_on_cli_workers.workers
        raise


@pytest.fixture(autouse=True)
def _stop_shared_workers():
    yield
    workers = getattr(test_discovered_graph_on_cli_workers, "workers", None)
    if workers is not None:
        workers.stop()
        del test_discovered_graph_on_cli_workers.workers


def test_discovered_graph_survives_sigkill_of_a_worker(graph_env):
    rt, env, probe = graph_env
    # Given a slow site of 40 pages (a tree with links back to its root), crawled by one
    # worker group alone, so that the batch in flight when it dies is its own
    links = {i: [f"/p/{c}" for c in (2 * i + 1, 2 * i + 2) if c < 40] + ["/p/0"] for i in range(40)}
    graph = LinkGraph(links)
    victim = DramatiqWorkers(env, processes=2, threads=2).start()
    survivor = None
    try:
        with GraphSite(graph, delay_s=0.1) as site:
            run_id = start_graph_run(rt, site.base_url, "sigkill-graph")
            # When the crawl is under way, SIGKILL the group, then start another
            wait_for(lambda: sum(site.fetches.values()) >= 6, 120, "the crawl to be under way")
            assert ended_run(rt, run_id) is None, "too fast to kill anything mid-run"
            victim.kill()
            survivor = DramatiqWorkers(env, processes=2, threads=2).start()
            run = wait_for_end(rt, run_id, survivor)
            fetched = {p: n for p, n in site.fetches.items() if p != "/robots.txt"}
    finally:
        for group in (victim, survivor):
            if group is not None:
                group.stop()
    # Then the same result as without the kill: every page stored once, the run ended once
    # with nothing open. Pages the killed batch had fetched but not recorded are fetched
    # again by its redelivery: at least once each, and the figure is printed.
    assert set(fetched) == graph.reachable() and min(fetched.values()) >= 1
    print(f"pages fetched twice after the SIGKILL: {sum(n - 1 for n in fetched.values())}")
    _assert_run_matches(rt, run, graph, site.base_url, probe)


def _reclaims(output: str) -> int:
    return output.count('"dispatch_reclaimed"')


def test_a_batch_that_crawls_longer_than_its_dispatch_lease_keeps_it(graph_env):
    rt, env, probe = graph_env
    # Given a 2 s dispatch lease, and a slow site whose batches of 8 pages take 8 x 0.5 s: each
    # batch lives twice its lease, while the ticker looks for expired ones every half second
    env = {**env, "CRAWLSCHED_DISPATCH_LEASE_S": "2"}
    links = {i: [f"/p/{c}" for c in range(8 * i + 1, 8 * i + 9) if c < 17] for i in range(17)}
    graph = LinkGraph(links)
    with DramatiqWorkers(env, processes=1, threads=2) as workers, Ticks():
        with GraphSite(graph, delay_s=0.5) as site:
            run_id = start_graph_run(rt, site.base_url, "lease-outlived")
            run = wait_for(lambda: announced_end(rt, run_id), 180, "the run to end")
            fetched = {p: n for p, n in site.fetches.items() if p != "/robots.txt"}
        output = workers.output()
    # Then no live batch was reclaimed: every page fetched once, the run succeeded, once
    assert _reclaims(output) == 0, output[-3000:]
    assert fetched == dict.fromkeys(graph.reachable(), 1)
    assert (run["result"], run["counts"]) == ("succeeded", {"succeeded": len(graph.reachable())})
    _assert_run_matches(rt, run, graph, site.base_url, probe)


def test_a_stuck_worker_s_batch_is_reclaimed_and_its_pages_crawled_again(graph_env):
    rt, env, probe = graph_env
    # Given a 3 s dispatch lease, a 0.5 s redo backoff, and a worker group that crawls alone
    env = {**env, "CRAWLSCHED_DISPATCH_LEASE_S": "3", "CRAWLSCHED_REDO_BACKOFF_S": "0.5"}
    links = {i: [f"/p/{c}" for c in (3 * i + 1, 3 * i + 2, 3 * i + 3) if c < 30] for i in range(30)}
    graph = LinkGraph(links)
    stuck = DramatiqWorkers(env, processes=1, threads=2).start()
    rescuer = None
    try:
        with GraphSite(graph, delay_s=0.3) as site, Ticks():
            run_id = start_graph_run(rt, site.base_url, "stuck-worker")
            # When it is stopped (SIGSTOP: alive to RabbitMQ, no progress) in the middle
            wait_for(lambda: sum(site.fetches.values()) >= 3, 120, "the crawl to be under way")
            assert ended_run(rt, run_id) is None, "too fast to stop anything mid-run"
            os.killpg(stuck.process.pid, signal.SIGSTOP)
            rescuer = DramatiqWorkers(env, processes=1, threads=2).start()
            # Then another worker's ticker reclaims its batch once the lease ran out, and gives
            # the pages back to the run
            wait_for(lambda: _reclaims(rescuer.output()), 120, "the stuck batch to be reclaimed")
            # (The messages the stuck process took off the queues stay with it until RabbitMQ
            # gives up on its connection, minutes later: kill it so they come back now.)
            stuck.kill()
            run = wait_for(
                lambda: announced_end(rt, run_id), 180, "the run to end without the stuck one"
            )
            fetched = {p: n for p, n in site.fetches.items() if p != "/robots.txt"}
    finally:
        if stuck.process and stuck.process.poll() is None:
            os.killpg(stuck.process.pid, signal.SIGCONT)
        stuck.kill()
        if rescuer is not None:
            rescuer.stop()
    # And the other group crawled its pages again: the run ended once, succeeded, with every
    # page stored and counted once
    assert set(fetched) == graph.reachable()
    assert (run["result"], sum(run["counts"].values())) == ("succeeded", len(graph.reachable()))
    _assert_run_matches(rt, run, graph, site.base_url, probe)
    print(f"pages fetched twice after the stop: {sum(n - 1 for n in fetched.values())}")
