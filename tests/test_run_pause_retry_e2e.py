"""Pause, resume and retry-failed on real parts: `dramatiq` CLI workers (2 processes) on the
real RabbitMQ and the multi-process MongoDB server crawl a served link graph; the commands
are the `crawlsched` CLI in subprocesses. What was fetched is read from the site's own count
of requests; each end of the run is recorded by the workers' end handler (end_probe)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from crawlsched.planning.outcomes import Outcome
from crawlsched.planning.run_names import FINISHED
from tests.support import end_probe
from tests.support.graph_run import (
    announced_end,
    start_graph_run,
    stored_paths,
    worker_graph_env,
)
from tests.support.link_graph import GraphSite, LinkGraph, layered_graph
from tests.support.waiting import wait_for
from tests.support.workers import DramatiqWorkers
from tests.test_discovery_e2e import CLEAN_END

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]
CLI = str(Path(sys.executable).parent / "crawlsched")


@pytest.fixture
def graph_env(rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, mongo_database_name, tmp_path):
    return worker_graph_env(rabbitmq_url, multiprocess_mongo_url, mongo_database_name, tmp_path)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _pages_fetched(site: GraphSite) -> dict[str, int]:
    return {path: n for path, n in site.fetches.items() if path != "/robots.txt"}


def _ends(probe: str, run_id: str) -> list[dict]:
    return [row for row in end_probe.read(probe) if row["run_id"] == run_id]


def _nothing_running(rt, run_id: str) -> bool:
    return rt.db.websites.count_documents({"run_id": run_id, "state": 2}) == 0 and not (
        rt.waiting.for_run(run_id)
    )


def test_paused_run_fetches_nothing_then_resumes_and_ends_once(graph_env):
    from crawlsched.actors import ticker

    rt, env, probe = graph_env
    # Given a slow site of 30 pages, three links deep, crawled by two worker processes
    graph = layered_graph(30, seed=7, fan_out=3)
    expected = graph.reachable()
    with GraphSite(graph, delay_s=0.3) as site, DramatiqWorkers(env, 2, 2) as workers:
        try:
            run_id = start_graph_run(rt, site.base_url, "pause-graph")
            wait_for(lambda: sum(_pages_fetched(site).values()) >= 3, 90, "crawling to start")

            # When the run is paused (and paused again: a no-op that says so)
            paused = _cli(env, "run", "pause", run_id, "--json")
            assert paused.returncode == 0, paused.stderr
            assert json.loads(paused.stdout)["paused"] == [run_id]
            again = _cli(env, "run", "pause", run_id)
            assert again.returncode == 0 and "already paused" in again.stdout, again.stderr

            # Then the crawls under way finish, and over a generous window with ticks (the
            # ticker's sweep, its admission pass) the site is asked for nothing more
            wait_for(lambda: _nothing_running(rt, run_id), 60, "the crawls under way")
            fetched = _pages_fetched(site)
            window_ends = time.monotonic() + 8.0
            while time.monotonic() < window_ends:
                ticker.tick.send()
                time.sleep(0.5)
                assert _pages_fetched(site) == fetched, "a page was fetched while paused"
            run = rt.runs.get(run_id)
            assert run["state"] != FINISHED and run.get("paused") is True
            assert len(fetched) < len(expected), "the pause came too late to hold anything"
            assert run["outstanding"] > 0
            status = _cli(env, "runs")
            assert status.returncode == 0 and "paused" in status.stdout, status.stdout

            # When it is resumed
            resumed = _cli(env, "run", "resume", run_id, "--json")
            assert resumed.returncode == 0, resumed.stderr
            assert json.loads(resumed.stdout)["resumed"] == [run_id]
            run = wait_for(lambda: announced_end(rt, run_id), 120, "the run to end")
        except AssertionError:
            print(workers.output()[-5000:])
            raise
        # Then every page was fetched exactly once, and the run ended once, cleanly
        assert _pages_fetched(site) == dict.fromkeys(expected, 1)
    assert run["counts"] == {Outcome.SUCCEEDED: len(expected)}
    assert run["discovered"] == len(expected) - 1
    # (The end handler records the end just after the run's state changed: wait for it.)
    ends = wait_for(lambda: _ends(probe, run_id), 30, "the end recorded")
    assert len(ends) == 1 and {k: ends[0][k] for k in CLEAN_END} == CLEAN_END, ends
    assert rt.db.websites.count_documents({"redo_run": run_id}) == 0


class FlakyGraph:
    """A LinkGraph served as it is, except that its `flaky` pages answer 500 to their first
    request (then as usual)."""

    def __init__(self, graph: LinkGraph, flaky: set[str]) -> None:
        self.graph, self.failures_left = graph, set(flaky)
        self._lock = threading.Lock()

    def page(self, path: str) -> tuple[int, bytes, dict[str, str]]:
        with self._lock:
            if path in self.failures_left:
                self.failures_left.discard(path)
                return 500, b"try again", {}
        return self.graph.page(path)


def test_retry_failed_crawls_exactly_the_failed_pages_again_in_the_same_run(graph_env):
    rt, env, probe = graph_env
    # Given 20 pages of which three leaves (no page of their own below them) fail once
    graph = layered_graph(20, seed=3, fan_out=3)
    flaky = {"/p/15", "/p/17", "/p/19"}
    expected = graph.reachable()
    assert flaky <= expected
    with GraphSite(FlakyGraph(graph, flaky)) as site, DramatiqWorkers(env, 2, 2) as workers:
        try:
            run_id = start_graph_run(rt, site.base_url, "retry-graph")
            first = wait_for(lambda: announced_end(rt, run_id), 120, "the first end")
            # (A discovered page's own failure is final for its run: it is counted exhausted.)
            assert first["counts"] == {Outcome.SUCCEEDED: 17, Outcome.EXHAUSTED: 3}
            assert _pages_fetched(site) == dict.fromkeys(expected, 1)

            # When the failed pages are retried with the CLI
            retried = _cli(env, "run", "retry-failed", run_id, "--json")
            assert retried.returncode == 0, retried.stderr
            answer = json.loads(retried.stdout)
            # (pass_sent: the CLI sent the run's pass itself, the ticker is not waited for)
            assert answer == {
                "run_id": run_id,
                "reopened": True,
                "pages": {"exhausted": 3},
                "pass_sent": True,
            }

            # Then the same run crawls exactly those pages again and ends once more
            second = wait_for(
                lambda: (r := announced_end(rt, run_id)) and r.get("ends") == 2 and r,
                120,
                "the second end",
            )
        except AssertionError:
            print(workers.output()[-5000:])
            raise
        fetched = _pages_fetched(site)
    assert fetched == {p: 2 if p in flaky else 1 for p in expected}
    # (The outcome the retried pages left is counted down to 0, not removed.)
    assert {k: n for k, n in second["counts"].items() if n} == {Outcome.SUCCEEDED: 20}
    assert second["counts"][Outcome.EXHAUSTED] == 0
    assert second["outstanding"] == 0 and second["discovered"] == len(expected) - 1
    assert stored_paths(rt, run_id, site.base_url) == graph.stored()
    ends = wait_for(lambda: len(e := _ends(probe, run_id)) == 2 and e, 30, "both ends recorded")
    assert len(ends) == 2 and all({k: e[k] for k in CLEAN_END} == CLEAN_END for e in ends), ends
    end_ids = sorted(e["event_id"] for e in rt.db.activity.find({"run_id": run_id}))
    assert [i for i in end_ids if "RunFinished" in i] == [
        f"{run_id}:RunFinished",
        f"{run_id}:RunFinished:2",
    ]
    # And with nothing left that failed, another retry is refused in one line, exit 2
    wait_for(lambda: not rt.runs.get(run_id).get("announce"), 60, "the end announced")
    refused = _cli(env, "run", "retry-failed", run_id)
    assert refused.returncode == 2 and "no page that failed" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
