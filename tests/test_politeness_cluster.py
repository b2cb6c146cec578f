"""Politeness held for the whole cluster: two `dramatiq` worker groups of two processes each,
on the real RabbitMQ and one shared MongoDB, crawl one local host. Judged by the host's own
access log: request starts never closer than the delay, robots.txt fetched once by all of
them, a 429 with Retry-After stopping every worker, a SIGKILLed holder blocking nobody for
longer than its slice."""

from __future__ import annotations

import itertools
import os
import signal
import threading

import pytest

from crawlsched.planning.run_names import FINISHED
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.graph_run import announced_end, prepare, start_graph_run
from tests.support.link_graph import GraphSite, LinkGraph, layered_graph
from tests.support.waiting import wait_for
from tests.support.workers import TEST_SECRET_KEY, TEST_SIGNING_KEY, DramatiqWorkers, crawlsched_env

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]

DELAY_S = 0.25
# The access log records arrivals, not starts: on a loaded machine the site's accept may run
# late (a CI run saw one request arrive 50 ms after it was sent while the next came on time).
# Without the cluster-wide hold, four processes pacing alone put starts ~60 ms apart on
# average, far below DELAY_S - ARRIVAL_JITTER_S, so the tolerance still catches that.
ARRIVAL_JITTER_S = 0.1


@pytest.fixture
def cluster(rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, mongo_database_name):
    rt = Runtime(
        Settings(
            mongo_url=multiprocess_mongo_url,
            mongo_db=mongo_database_name,
            broker_url=rabbitmq_url,
            secret_key=TEST_SECRET_KEY,
            message_signing_key=TEST_SIGNING_KEY,
        )
    )
    prepare(rt)
    env = crawlsched_env(
        rabbitmq_url,
        multiprocess_mongo_url,
        mongo_database_name,
        CRAWLSCHED_HOST_DELAY_S=str(DELAY_S),
        CRAWLSCHED_HOST_CONCURRENCY="1",
        # Short slices: the host changes hands between the four processes many times.
        CRAWLSCHED_HOST_LEASE_S="1.5",
        CRAWLSCHED_DISPATCH_LEASE_S="30",
    )
    groups: list[DramatiqWorkers] = []

    def start(**more_env: str) -> DramatiqWorkers:
        groups.append(DramatiqWorkers({**env, **more_env}, processes=2, threads=2).start())
        return groups[-1]

    yield rt, start
    for group in groups:
        group.stop()


def _gaps(site: GraphSite) -> list[float]:
    arrivals = sorted(at for at, _ in site.access_log)
    return [b - a for a, b in itertools.pairwise(arrivals)]


def test_two_worker_groups_keep_one_delay_per_host_and_read_robots_txt_once(cluster):
    rt, start = cluster
    # Given two worker groups of two processes each, and a site of 30 linked pages; the pages
    # a batch finds go to the run (a batch that kept them would keep the host in one process:
    # here the processes are to take it in turn)
    graph = layered_graph(30, seed=28, fan_out=3)
    groups = [start(CRAWLSCHED_CRAWL_KEEP_FOUND="false") for _ in range(2)]
    with GraphSite(graph) as site:
        # When one run crawls the whole site
        run_id = start_graph_run(rt, site.base_url, "polite-two-groups")
        run = wait_for(lambda: announced_end(rt, run_id), 180, "the run to end")

    # Then every page was fetched once, by both groups' processes
    fetched = {p: n for p, n in site.fetches.items() if p != "/robots.txt"}
    assert fetched == dict.fromkeys(graph.reachable(), 1)
    assert run["result"] == "succeeded"
    crawled_by = set(rt.db.articles.distinct("crawled_by"))
    assert len(crawled_by) >= 2, crawled_by  # more than one process had the host in turn
    # And no two request starts to the host came closer than its delay, across all of them
    gaps = _gaps(site)
    assert min(gaps) >= DELAY_S - ARRIVAL_JITTER_S, sorted(gaps)[:5]
    # And robots.txt was fetched once for the whole cluster
    assert site.fetches["/robots.txt"] == 1
    for group in groups:
        group.stop()


class _TooManyOnce(LinkGraph):
    """A graph whose page 4 answers 429 with Retry-After the first time it is asked, and whose
    page 20 holds its first answer until `_release` is set: while it is in flight, the process
    that sent it surely holds the host (a process gives a host back once it has no request in
    flight and no job left for it, so a hold is otherwise brief)."""

    retry_after_s = 2

    def __init__(self, graph: LinkGraph) -> None:
        super().__init__(graph.links, graph.redirects, graph.leaves)
        for name in ("_answered", "_in_flight", "_release"):  # (a frozen dataclass)
            object.__setattr__(self, name, threading.Event())

    def page(self, path: str) -> tuple[int, bytes, dict[str, str]]:
        if path == "/p/20" and not self._in_flight.is_set():
            self._in_flight.set()
            self._release.wait(60)
        if path == "/p/4" and not self._answered.is_set():
            self._answered.set()
            return 429, b"slow down", {"Retry-After": str(self.retry_after_s)}
        return super().page(path)


def test_a_429_stops_every_worker_and_a_killed_holder_frees_the_host(cluster):
    rt, start = cluster
    graph = _TooManyOnce(layered_graph(30, seed=29, fan_out=3))
    victim, survivor = start(), start()
    with GraphSite(graph) as site:
        run_id = start_graph_run(rt, site.base_url, "polite-429")
        # When the site answers one request 429 (Retry-After: 2)
        wait_for(graph._answered.is_set, 120, "the 429 to be sent")
        # and, later, the process holding the host is SIGKILLed while it holds it
        wait_for(lambda: sum(site.fetches.values()) >= 12, 120, "the crawl to go on")
        wait_for(graph._in_flight.is_set, 120, "a request to be held in flight")
        holder = wait_for(
            lambda: (rt.hosts.get(rt.hosts.list()[0]["_id"]) or {}).get("holder"),
            60,
            "a process to hold the host",
        )
        os.kill(int(holder.split(":")[1]), signal.SIGKILL)
        killed_at = rt.now()
        graph._release.set()
        run = wait_for(lambda: announced_end(rt, run_id), 240, "the run to end after the kill")

    # Then nobody sent anything to the host until the Retry-After had passed
    log = sorted(site.access_log)
    (told_at,) = [at for at, path in log if path == "/p/4"][:1]
    after = [at for at, _ in log if at > told_at]
    assert after and after[0] - told_at >= graph.retry_after_s - ARRIVAL_JITTER_S
    # And the killed holder blocked the host for no longer than its slice (1.5 s) plus the
    # wake-up and the hand-over: the crawl went on, and every page was fetched
    fetched = {p for p in site.fetches if p != "/robots.txt"}
    assert fetched == graph.reachable()
    assert run["state"] == FINISHED
    later = [at for at, _ in log if at > killed_at.timestamp()]
    assert later, "nothing was fetched after the kill"
    assert min(_gaps(site)) >= DELAY_S - ARRIVAL_JITTER_S
    del victim, survivor
