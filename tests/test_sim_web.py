"""The simulated web (tests/sim/web.py, web_graph.py), the request-log invariants
(tests/sim/invariants.py) and the scenario CLI (python -m tests.sim)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.drivers.fetching import PoliteHttp
from crawlsched.drivers.targets import check_target, parse_networks
from crawlsched.errors import UnsafeTarget
from tests.sim import __main__ as cli
from tests.sim import invariants
from tests.sim.scenarios import SCENARIOS, ScenarioResult
from tests.sim.web import SimWeb
from tests.sim.web_graph import Host, Page, SiteMap, WebSpec
from tests.sim.world import World

START = datetime(2025, 1, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[1]
BIG = WebSpec(hosts=4, pages_per_host=40, depth=4, kind_weights=(0.4, 0.2, 0.2, 0.2))


# -- the web -------------------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_web_answers_each_page_as_drawn(seed):
    with World(seed, START) as world:
        web = SimWeb(world, seed, BIG)
        client = httpx.Client(transport=web.transport)
        for url, page in web.site.pages.items():
            answers = [client.get(url) for _ in range((page.times or 0) + 2)]
            first, last = answers[0], answers[-1]
            if page.kind == "not_found":
                assert first.status_code == 404
            elif page.kind == "redirect":
                assert first.status_code == page.status and first.headers["Location"] == (
                    page.location
                )
            elif page.kind == "throttle" and page.times is None:
                assert {a.status_code for a in answers} == {page.status}
            else:  # ok, or throttled `times` times then ok
                statuses = [a.status_code for a in answers]
                assert statuses == [page.status] * (page.times or 0) + [200] * 2
                assert f'href="{page.links[0]}"' in last.text if page.links else True
            if page.kind == "throttle":
                check_retry_after(page, first.headers.get("Retry-After"), world.now())


def check_retry_after(page: Page, value: str | None, now: datetime) -> None:
    if page.retry_after == "seconds":
        assert value == str(page.retry_after_s)
    elif page.retry_after == "http_date":
        assert value is not None
        seconds = (parsedate_to_datetime(value) - now).total_seconds()
        assert page.retry_after_s <= seconds < page.retry_after_s + 1
    elif page.retry_after == "garbage":
        assert value == "soon"
    else:
        assert value is None


def test_web_draws_every_behaviour_and_robots_kind_over_a_few_seeds():
    kinds, styles, robots = set(), set(), set()
    for seed in range(10):
        site = SimWeb(World(seed, START), seed, BIG).site
        kinds |= {p.kind for p in site.pages.values()}
        styles |= {p.retry_after for p in site.pages.values() if p.kind == "throttle"}
        styles |= {"forever" for p in site.pages.values() if p.kind == "throttle" and not p.times}
        robots |= {h.robots for h in site.hosts.values()}
    assert kinds == {"ok", "not_found", "redirect", "throttle"}
    assert styles == {"seconds", "http_date", "garbage", "absent", "forever"}
    assert robots == {"missing", "open", "crawl_delay", "disallow"}


def test_web_serves_robots_txt_per_host():
    with World(0, START) as world:
        web = SimWeb(world, 0)
        web.site.hosts.update(
            {
                "h0.sim": Host("h0.sim", "missing"),
                "h1.sim": Host("h1.sim", "crawl_delay", crawl_delay_s=3),
                "h2.sim": Host("h2.sim", "disallow", disallowed=("/p/2",)),
            }
        )
        client = httpx.Client(transport=web.transport)
        assert client.get("http://h0.sim/robots.txt").status_code == 404
        assert "Crawl-delay: 3" in client.get("http://h1.sim/robots.txt").text
        assert "Disallow: /p/2" in client.get("http://h2.sim/robots.txt").text
        assert web.crawl_delay("h1.sim") == 3 and web.site.disallowed("http://h2.sim/p/2")
        with pytest.raises(httpx.ConnectError):
            client.get("http://elsewhere.sim/")


def test_web_latency_runs_on_the_virtual_clock_and_every_request_is_logged():
    # Given a slow page and a thread counting while it is fetched
    with World(1, START) as world:
        web = SimWeb(world, 1, WebSpec(hosts=1, pages_per_host=1, slow_p=1.0))
        page = web.site.page("http://h0.sim/p/0")
        client = httpx.Client(transport=web.transport)
        p, ticks = world.process("crawler"), []
        world.spawn(p, lambda: client.get(page.url), "fetch")
        world.spawn(p, lambda: [(world.sleep(0.5), ticks.append(1)) for _ in range(4)], "tick")
        world.run()
        # Then the fetch took its latency in virtual time, while the other thread ran
        (record,) = web.log
        assert record.end_s - record.start_s == pytest.approx(page.latency_s) and page.latency_s > 2
        assert len(ticks) == 4
        assert (record.host, record.path, record.status) == ("h0.sim", "/p/0", 200)
        assert (record.process, record.thread, record.generation) == (
            "crawler",
            "crawler.0/fetch",
            0,
        )


def test_web_request_cut_by_a_crash_ends_aborted():
    with World(2, START) as world:
        web = SimWeb(world, 2, WebSpec(hosts=1, pages_per_host=1, slow_p=1.0))
        client = httpx.Client(transport=web.transport)
        p = world.process("crawler")
        world.spawn(p, lambda: client.get("http://h0.sim/p/0"), "fetch")
        world.spawn(world.process("killer"), lambda: (world.sleep(1.0), world.crash(p)), "kill")
        world.run()
        (record,) = web.log
        assert record.aborted and record.end_s == 1.0 and record.status is None


def test_web_names_resolve_to_an_allowed_network_without_loopback():
    web = SimWeb(World(0, START), 0)
    assert web.resolve("h2.sim", 80) == ["203.0.113.3"]
    with pytest.raises(UnsafeTarget):
        check_target("http://h2.sim/p/0", (), web.resolve)  # refused unless allowed
    allowed = parse_networks(web.allowed_networks)
    check_target("http://h2.sim/p/0", allowed, web.resolve)
    with pytest.raises(UnsafeTarget):
        check_target("http://127.0.0.1/", allowed, web.resolve)
    with pytest.raises(UnsafeTarget):
        web.resolve("h9.sim", 80)


def hand_made_web() -> SiteMap:
    """h0: /p/0 → 1, 2, 3, 4, 5 and h1's root; 1 → 6 (404), 2 redirects to 7, 3 throttled twice,
    4 forever, 5 disallowed; 7 → 8 (depth 3 through the redirect)."""
    u = "http://h0.sim"
    pages = [
        Page(f"{u}/p/0", links=("/p/1", "/p/2", "/p/3", "/p/4", "/p/5", "http://h1.sim/p/0")),
        Page(f"{u}/p/1", links=("/p/6",)),
        Page(f"{u}/p/2", "redirect", status=302, location=f"{u}/p/7"),
        Page(f"{u}/p/3", "throttle", status=429, times=2),
        Page(f"{u}/p/4", "throttle", status=503, times=None),
        Page(f"{u}/p/5"),
        Page(f"{u}/p/6", "not_found", status=404),
        Page(f"{u}/p/7", links=("/p/8",)),
        Page(f"{u}/p/8"),
        Page("http://h1.sim/p/0"),
    ]
    hosts = {"h0.sim": Host("h0.sim", "disallow", disallowed=("/p/5",)), "h1.sim": Host("h1.sim")}
    return SiteMap(hosts, {p.url: p for p in pages})


def test_reachable_says_how_each_url_must_end():
    site = hand_made_web()
    seeds = ["http://h0.sim/p/0"]
    r = site.reachable(seeds, max_depth=10, give_up_after=2)
    ends = {url.removeprefix("http://h0.sim"): (e.end, e.depth) for url, e in r.pages.items()}
    assert ends == {
        "/p/0": ("succeeded", 0), "/p/1": ("succeeded", 1), "/p/2": ("succeeded", 1),
        "/p/3": ("succeeded", 1), "/p/4": ("given_up", 1), "/p/5": ("failed", 1),
        "/p/6": ("failed", 2), "/p/7": ("succeeded", 2), "/p/8": ("succeeded", 3),
    }  # fmt: skip
    assert r.exact and r.pages["http://h0.sim/p/5"].reason == "disallowed by robots.txt"
    assert site.reachable(seeds, 10, give_up_after=1).pages["http://h0.sim/p/3"].end == "given_up"
    shallow = site.reachable(seeds, max_depth=2)
    assert "http://h0.sim/p/8" not in shallow.pages and not shallow.exact
    offsite = site.reachable(seeds, max_depth=10, same_site=False)
    assert offsite.pages["http://h1.sim/p/0"].end == "succeeded"


# -- invariants over the request log -------------------------------------------------------------


@dataclass
class R:
    seq: int
    start_s: float
    end_s: float | None = None
    status: int | None = 200
    retry_after: str | None = None
    host: str = "h0.sim"
    path: str = "/p/0"
    process: str = "w"
    generation: int = 0

    @property
    def end_at(self) -> datetime | None:
        return None if self.end_s is None else START + timedelta(seconds=self.end_s)


def test_starts_too_close_catches_a_short_gap_per_host():
    log = [R(0, 0.0, 0.1), R(1, 1.0, 1.1), R(2, 1.5, 1.6), R(3, 1.6, 2, host="h1.sim")]
    (violation,) = invariants.starts_too_close(log, {"h0.sim": 1.0})
    assert violation.startswith("h0.sim: #2 /p/0 started 0.500 s after #1 /p/0")
    assert invariants.starts_too_close(log[:2], 1.0) == []
    assert invariants.starts_too_close([R(0, 0), R(1, 0.5, path="/robots.txt")], 1.0,
                                       ignore=("/robots.txt",)) == []  # fmt: skip


def test_over_concurrency_counts_requests_in_flight():
    log = [R(0, 0.0, 2.0), R(1, 0.5, 1.0), R(2, 1.0, 3.0), R(3, 1.5, None)]
    (violation,) = invariants.over_concurrency(log, 2)
    assert violation == "h0.sim: 3 in flight at 1.500 s (limit 2): #0 /p/0, #2 /p/0, #3 /p/0"
    assert invariants.over_concurrency(log[:3], 2) == []  # #1 ends as #2 starts


def test_blocks_shortened_catches_a_request_inside_a_block():
    seconds = [R(0, 0.0, 1.0, 429, "5"), R(1, 5.0, 5.5), R(2, 6.0, 6.5)]
    (violation,) = invariants.blocks_shortened(seconds)
    assert "#1 /p/0 started at 5.000 s, inside the block until 6.000 s" in violation
    date = format_datetime(START + timedelta(seconds=11), usegmt=True)
    dated = [R(0, 0.0, 1.0, 503, date), R(1, 10.5, 11)]
    assert len(invariants.blocks_shortened(dated)) == 1
    assert invariants.blocks_shortened([R(0, 0.0, 1.0, 503, date), R(1, 11.0, 12)]) == []
    garbage = [R(0, 0.0, 1.0, 429, "soon"), R(1, 2.0, 2.5)]
    assert invariants.blocks_shortened(garbage) == []
    assert len(invariants.blocks_shortened(garbage, unreadable_block_s=2.0)) == 1
    assert invariants.blocks_shortened(seconds, max_block_s=3.0) == []
    in_flight = [R(0, 0.0, 1.0, 429, "5"), R(1, 0.5, 1.5)]  # started before the answer
    assert invariants.blocks_shortened(in_flight) == []


def test_blocks_lost_in_a_crash_are_not_counted():
    # Given a 429 answered to generation 0 of "w", and generation 1 asking again inside it
    log = [R(0, 0.0, 1.0, 429, "5"), R(1, 2.0, 2.5, generation=1)]
    assert invariants.blocks_shortened(log) != []
    # Then it is forgiven only when generation 0 died at the instant the answer came
    died_then = invariants.lost_in_crash([Crash("w", 0, 1.0)])
    assert invariants.blocks_shortened(log, lost=died_then) == []
    for later in (Crash("w", 0, 1.5), Crash("w", 1, 1.0), Crash("x", 0, 1.0)):
        lost = invariants.lost_in_crash([later])
        assert invariants.blocks_shortened(log, lost=lost) != [], later


@dataclass
class Crash:
    process: str
    generation: int
    virtual_s: float


def test_fetched_too_often_counts_pages_not_throttles_or_robots():
    robots = [R(4, 4, path="/robots.txt"), R(5, 5, path="/robots.txt")]
    log = [R(0, 0), R(1, 1, status=429), R(2, 2), R(3, 3), *robots]
    assert invariants.fetch_counts(log) == {"http://h0.sim/p/0": 3}
    assert invariants.fetched_too_often(log, 2) == ["http://h0.sim/p/0 fetched 3 times (at most 2)"]
    assert invariants.fetched_too_often(log, 3) == []


# -- scenarios and the CLI -----------------------------------------------------------------------


def test_toy_scenario_holds_its_invariants_over_seeds():
    results = [SCENARIOS["toy"](seed) for seed in range(12)]
    assert [r.violations for r in results] == [[]] * 12
    assert sum(r.crashes for r in results) > 0


def test_cli_replays_a_seed_the_same_whatever_the_hash_seed():
    runs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-m", "tests.sim", "--seed", "5"],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        runs.append(json.loads(out.stdout))
    assert runs[0] == {**runs[1], "real_s": runs[0]["real_s"]}
    assert runs[0]["ok"] and runs[0]["steps"] > 0


def test_cli_prints_the_command_that_replays_a_failing_seed(monkeypatch, capsys):
    def failing(seed: int) -> ScenarioResult:
        return ScenarioResult(seed, ["h0.sim: too close"], 1, 0, 0.0, 0.0, "x")

    monkeypatch.setitem(SCENARIOS, "failing", failing)
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    assert cli.main(["--scenario", "failing", "--seeds", "3-4"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["failed_seeds"] == [3, 4]
    assert "PYTHONHASHSEED=0" in err and "-m tests.sim --scenario failing --seed 4" in err


def test_web_serves_the_crawls_own_client_in_a_simulated_thread():
    with World(3, START) as world:
        web = SimWeb(world, 3)
        allowed = parse_networks(web.allowed_networks)
        http = PoliteHttp(
            httpx.Client(transport=web.transport), allowed_networks=allowed, resolver=web.resolve
        )
        answers: list[tuple[int, int]] = []
        url = web.seeds()[0]
        world.spawn(world.process("crawler"), lambda: answers.append(got(http, url)), "fetch")
        world.run()
        assert answers == [(200, len(web.links_of(url)))]
        assert web.log[0].end_s == pytest.approx(web.site.page(url).latency_s)


def got(http: PoliteHttp, url: str) -> tuple[int, int]:
    response = http.get(url, follow_redirects=False)
    return response.status_code, response.text.count("<a href")
