"""Real browsers: Debian's chromedriver as Selenium nodes, pages that need JavaScript.

- the browser driver sees what only JavaScript writes, which the HTTP driver misses;
- probing: a chromedriver, a closed port, a server answering 500, a plain HTML server;
- a node killed in the middle of a batch: the rest of the batch waits and runs on the other
  node, the dead node is marked down, nothing hangs and no browser process is left.
"""

from __future__ import annotations

from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread

import httpx
import pytest

from crawlsched.catalog import JobState
from crawlsched.demo.node import LocalChromedriver
from crawlsched.demo.seed import demo_reference
from crawlsched.drivers.base import CrawlJob
from crawlsched.drivers.browser import BrowserPageDriver
from crawlsched.drivers.browser_session import is_session_lost, open_browser
from crawlsched.drivers.context import CrawlContext
from crawlsched.drivers.fetching import PoliteHttp
from crawlsched.drivers.http import HttpPageDriver
from crawlsched.drivers.targets import parse_networks
from crawlsched.errors import NodeUnreachable
from crawlsched.planning.run_names import FINISHED
from crawlsched.resources.node_probe import probe_node
from crawlsched.resources.rules import DOWN
from crawlsched.runtime import get_runtime
from tests.support.js_site import RENDERED_MARK, JsSite
from tests.support.ports import refusing_port
from tests.support.services import service_unavailable
from tests.support.waiting import wait_for
from tests.support.workers import TEST_HOST_RULES


def _job(url: str) -> CrawlJob:
    return CrawlJob("j1", "t", url, "profile", "tiktok", crawl_limit=10)


def _node() -> LocalChromedriver:
    if not LocalChromedriver.available():
        service_unavailable("chromedriver is not installed (Debian: chromium chromium-driver)")
    return LocalChromedriver().start()


def test_browser_driver_renders_what_http_misses(chromedriver_node):
    with JsSite() as site, httpx.Client(timeout=10) as client:
        url = f"{site.base_url}/page/p1"
        loopback = parse_networks(["127.0.0.1/32"])
        http = PoliteHttp(client, allowed_networks=loopback)
        plain = CrawlContext(http=http, allowed_networks=loopback)
        plain.begin(_job(url))
        HttpPageDriver().crawl(_job(url), plain)
        with open_browser(chromedriver_node, host_resolver_rules=TEST_HOST_RULES) as browser:
            rendered = CrawlContext(http=http, browser=browser, allowed_networks=loopback)
            rendered.begin(_job(url))
            BrowserPageDriver().crawl(_job(url), rendered)
    plain_page = plain.saved["profile"][0]
    assert RENDERED_MARK not in plain_page["title"] and plain_page["links"] == []
    page = rendered.saved["profile"][0]
    assert page["title"] == f"p1 {RENDERED_MARK}"
    assert page["links"] == [f"{site.base_url}/page/p1-a", f"{site.base_url}/page/p1-b"]
    assert [d.url for d in rendered.discovered.values()] == page["links"]


def test_probe_node_kinds_and_failures(chromedriver_node):
    class Answer(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.server.server_port == plain_port:
                body, code = b"<html>not a driver</html>", 200
            else:
                body, code = b"boom", 500
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Answer) for _ in range(2)]
    plain_port, failing_port = (s.server_port for s in servers)
    for server in servers:
        Thread(target=server.serve_forever, daemon=True).start()
    try:
        with httpx.Client(timeout=5) as http:
            status = probe_node(chromedriver_node, http)
            assert (status.kind, status.ready, status.capacity) == ("chromedriver", True, None)
            with refusing_port() as port, pytest.raises(NodeUnreachable, match=r"refused|Conn"):
                probe_node(f"http://127.0.0.1:{port}", http)
            with pytest.raises(NodeUnreachable, match=r"HTTP 500"):
                probe_node(f"http://127.0.0.1:{failing_port}", http)
            with pytest.raises(ValueError, match=r"not answer like a WebDriver endpoint"):
                probe_node(f"http://127.0.0.1:{plain_port}", http)
            with pytest.raises(ValueError, match="credentials"):
                probe_node("http://user:pw@127.0.0.1:1", http)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_a_killed_node_raises_a_session_lost_error_and_leaves_no_browser():
    node = _node()
    try:
        with JsSite() as site, open_browser(node.url, host_resolver_rules=TEST_HOST_RULES) as b:
            b.get(f"{site.base_url}/page/x")
            assert node.live_processes(), "chromedriver and its Chrome should be running"
            node.kill()
            with pytest.raises(Exception) as lost:
                b.get(f"{site.base_url}/page/y")
        assert is_session_lost(lost.value), repr(lost.value)
        wait_for(lambda: not node.live_processes(), 20, "every process of the node to end")
    finally:
        node.stop()


def test_node_killed_mid_batch_its_jobs_wait_and_run_on_the_other_node(stub_pipeline):
    # Given two single-slot chromedriver nodes and 12 TikTok jobs (Selenium only) of slow pages
    first, second = _node(), _node()
    try:
        stub_pipeline(threads=4)
        rt = get_runtime()
        with JsSite(delay_s=0.3) as site:
            reference = demo_reference(f"{site.base_url}/page")
            rt.create_indexes()
            rt.reference.load(reference)
            rt.schedules.ensure_defaults(rt.now())
            for node in (first, second):
                rt.inventory.add_node(node.url, "chromedriver", 1, rt.now())
            tiktok = rt.reference.media_by_name("tiktok")
            now = rt.now()
            rt.jobs("profiles").insert_new(
                [
                    {
                        "target": f"user{i}",
                        "media_name": "tiktok",
                        "media_name_id": tiktok["_id"],
                        "task": "profile",
                        "state": int(JobState.PENDING),
                        "enabled": True,
                        "execution_date": now - timedelta(seconds=1),
                        "modified_at": now - timedelta(minutes=i),
                        "attempt_count": 0,
                    }
                    for i in range(12)
                ]
            )
            from crawlsched.actors import ticker

            rt.schedules.fire_now("sweep-profiles", rt.now())
            ticker.tick.send()

            # When a few pages are crawled, the node running the batch is killed
            wait_for(lambda: site.served >= 3, 60, "a few pages to be crawled")
            run_id = rt.db.runs.find_one({"schedule_id": "sweep-profiles"})["_id"]
            (served,) = rt.assignments.for_run(run_id)
            victim = first if served["node"] == first.url else second
            survivor = second if victim is first else first
            victim.kill()

            # Then the run finishes: every job succeeded once, none failed or starved
            def finished():
                run = rt.db.runs.find_one({"schedule_id": "sweep-profiles"})
                return run if run and run["state"] == FINISHED else None

            run = wait_for(finished, 90, "the run to finish after the node died")
        assert run["counts"] == {"succeeded": 12}
        assert rt.db.profile_data.count_documents({}) == 12
        # The rest of the batch ran on the other node, under a dispatch of its own
        nodes = [row["node"] for row in rt.assignments.for_run(run["_id"])]
        assert nodes == [victim.url, survivor.url]
        # The dead node is marked down; nothing is held, nothing waits
        assert rt.inventory.node(victim.url)["health"] == DOWN
        assert rt.inventory.overview(rt.now())["selenium"]["held"] == 0
        assert rt.waiting.all() == []
        # And no browser process of the dead node is left; the survivor's session was quit
        wait_for(lambda: not victim.live_processes(), 20, "the dead node's processes to end")
        wait_for(lambda: len(survivor.live_processes()) == 1, 20, "only chromedriver left")
    finally:
        first.stop()
        second.stop()


def test_a_selenium_grid_is_probed_added_and_crawls_js_pages(selenium_grid, stub_pipeline):
    # Given a real Grid 4 standalone with two Chrome slots
    with httpx.Client(timeout=5) as http:
        status = probe_node(selenium_grid.url, http)
    assert (status.kind, status.ready, status.capacity, status.busy) == ("grid", True, 2, 0)

    # When it is the only node and 16 TikTok jobs of JavaScript pages are swept
    stub_pipeline(threads=4)
    rt = get_runtime()
    with JsSite() as site:
        rt.create_indexes()
        rt.reference.load(demo_reference(f"{site.base_url}/page"))
        rt.schedules.ensure_defaults(rt.now())
        rt.inventory.add_node(selenium_grid.url, status.kind, status.capacity, rt.now())
        tiktok = rt.reference.media_by_name("tiktok")
        now = rt.now()
        rt.jobs("profiles").insert_new(
            [
                {
                    "target": f"g{i}",
                    "media_name": "tiktok",
                    "media_name_id": tiktok["_id"],
                    "task": task,
                    "state": int(JobState.PENDING),
                    "enabled": True,
                    "execution_date": now - timedelta(seconds=1),
                    "modified_at": now,
                    "attempt_count": 0,
                }
                for i in range(8)
                for task in ("profile", "publication")
            ]
        )
        from crawlsched.actors import ticker

        rt.schedules.fire_now("sweep-profiles", rt.now())
        ticker.tick.send()

        def finished():
            run = rt.db.runs.find_one({"schedule_id": "sweep-profiles"})
            return run if run and run["state"] == FINISHED else None

        run = wait_for(finished, 120, "the run on the Grid to finish")

    # Then every page was rendered by a browser on the Grid, and its sessions were all quit
    assert run["counts"] == {"succeeded": 16}
    pages = list(rt.db.profile_data.find({})) + list(rt.db.publications.find({}))
    assert len(pages) == 16
    assert all(RENDERED_MARK in p["title"] for p in pages), pages[0]
    assert {row["node"] for row in rt.assignments.for_run(run["_id"])} == {selenium_grid.url}
    with httpx.Client(timeout=5) as http:
        wait_for(lambda: probe_node(selenium_grid.url, http).busy == 0, 30, "sessions to end")
    # And the Grid never ran Selenium Manager (it would try to download drivers and browsers)
    assert "SeleniumManager" not in selenium_grid.output()
