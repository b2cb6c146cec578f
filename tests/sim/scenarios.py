"""Scenarios the CLI and the benchmark run by name: `fn(seed) -> ScenarioResult`.

`toy` is a stand-in crawler written against the machinery alone (no crawlsched code): two
worker processes that take `fetch` messages, pace each host through a compare-and-set in a toy
store, follow links and may crash at any store write, send or ack and come back. It shows how
the pieces fit and gives the CLI something to run until the crawl core's scenario is added.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from tests.sim import invariants
from tests.sim.broker import SimBroker
from tests.sim.kernel import SimProcess
from tests.sim.web import SimWeb
from tests.sim.web_graph import WebSpec
from tests.sim.world import CrashPolicy, World

START = datetime(2025, 1, 1, tzinfo=UTC)


@dataclass
class ScenarioResult:
    seed: int
    violations: list[str]
    steps: int
    crashes: int
    virtual_s: float
    real_s: float
    trace_hash: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "ok": self.ok, **self.__dict__, **self.extra}


class _ToyCrawl:
    """The toy's processes share `next_start` and `ended` (its store); a store step before
    each read-and-write makes it one atomic command, as a conditional update is."""

    WORKERS, MAX_DEPTH, THROTTLES, DELAY_S, BACKOFF_S = 2, 50, 3, 1.0, 1.0

    def __init__(self, world: World, web: SimWeb, broker: SimBroker) -> None:
        self.world, self.web, self.broker = world, web, broker
        self.client = httpx.Client(transport=web.transport)
        self.next_start: dict[str, float] = {}
        self.ended: dict[str, str] = {}
        self.sent: set[str] = set()

    def delay(self, host: str) -> float:
        return max(self.DELAY_S, self.web.crawl_delay(host) or 0)

    def boot(self, process: SimProcess) -> None:
        if process.crashed:
            self.world.restart(process)
        loop = self.broker.worker(process, ["fetch"], {"fetch": self.fetch})
        for i in range(self.WORKERS):
            self.world.spawn(process, loop, f"worker-{i}", daemon=True)

    def fetch(self, url: str, depth: int) -> None:
        world = self.world
        world.store_step(None, "find_one")
        if url in self.ended:
            return
        if self.web.site.disallowed(url):
            return self._end(url, "failed")
        host = url.split("/")[2]
        for _ in range(self.THROTTLES + 1):
            self._pace(host)
            response = self.client.get(url)
            if response.status_code not in (429, 503):
                return self._done(url, depth, response)
            block = invariants.block_seconds(
                response.headers.get("Retry-After"), world.now(), self.BACKOFF_S
            )
            world.store_step(None, "find_one_and_update")
            self.next_start[host] = max(self.next_start.get(host, 0.0), world.elapsed + block)
        self._end(url, "given_up")

    def _pace(self, host: str) -> None:
        while True:
            self.world.store_step(None, "find_one_and_update")
            now, allowed = self.world.elapsed, self.next_start.get(host, 0.0)
            if now >= allowed:
                self.next_start[host] = now + self.delay(host)
                return
            self.world.sleep(allowed - now)

    def _done(self, url: str, depth: int, response: httpx.Response) -> None:
        if response.is_redirect:
            links = [str(response.url.join(response.headers["Location"]))]
        elif response.status_code == 200:
            links = [
                str(response.url.join(h)) for h in re.findall(r'href="([^"]+)"', response.text)
            ]
        else:
            return self._end(url, "failed")
        for link in links:
            same = link.split("/")[2] == url.split("/")[2]
            if same and depth < self.MAX_DEPTH and link not in self.sent:
                self.broker.send("fetch", "fetch", (link, depth + 1))
                self.world.store_step(None, "insert_one")
                self.sent.add(link)
        self._end(url, "succeeded")

    def _end(self, url: str, end: str) -> None:
        self.world.store_step(None, "update_one")
        self.ended.setdefault(url, end)

    def check(self, crashes: list) -> list[str]:
        seeds = self.web.seeds()
        expected = self.web.reachable(seeds, self.MAX_DEPTH, give_up_after=self.THROTTLES)
        found = [
            f"{url}: ended {self.ended.get(url)}, expected {e.end} ({e.reason})"
            for url, e in expected.pages.items()
            if self.ended.get(url) != e.end
        ]
        found += [f"{url}: ended, not reachable" for url in self.ended if url not in expected.pages]
        delays = {h: self.delay(h) for h in self.web.site.hosts}
        found += invariants.starts_too_close(self.web.log, delays)
        lost = invariants.lost_in_crash(crashes)
        found += invariants.blocks_shortened(self.web.log, self.BACKOFF_S, lost=lost)
        return found


def toy(seed: int) -> ScenarioResult:
    policy = CrashPolicy(0.02, budget=3, points=frozenset({"write", "send", "ack"}))
    world = World(seed, START, policy)
    web = SimWeb(world, seed, WebSpec(hosts=3, pages_per_host=10))
    broker = SimBroker(world, duplicate_p=0.05)
    crawl = _ToyCrawl(world, web, broker)
    processes = [world.process(f"worker-{i}") for i in range(2)]
    world.on_crash(lambda p: world.call_later(5.0, lambda: crawl.boot(p)))
    for p in processes:
        crawl.boot(p)
    for url in web.seeds():
        broker.send("fetch", "fetch", (url, 0))
        crawl.sent.add(url)
    with world:
        summary = world.run(broker.idle, max_virtual_s=24 * 3600, check=False)
    violations = [summary.report()] if summary.reason != "until" else crawl.check(world.crashes)
    counts = invariants.fetch_counts(web.log)
    return ScenarioResult(
        seed, violations, summary.steps, len(summary.crashes), summary.virtual_s,
        summary.real_s, summary.trace_hash,
        {"requests": len(web.log), "most_fetches": max(counts.values(), default=0)},
    )  # fmt: skip


SCENARIOS: dict[str, Callable[[int], ScenarioResult]] = {"toy": toy}
