"""A page that ends on Chrome's own error page is a failed job with its reason, never a result.

Three TikTok jobs (a browser media) through a real chromedriver and the worker's filtering
proxy: one page loads; one redirects to a refused address (127.0.0.2: the crawl may reach
127.0.0.1 only) where a server listens; one redirects to a closed port. The proxy answers an
empty 403 and 502, which Chrome shows as its error page. Judged by the stored results
collection (one document), the jobs' own outcome and error, and the refused server's request
log (empty).
"""

from __future__ import annotations

from datetime import timedelta
from http.server import BaseHTTPRequestHandler

from crawlsched.catalog import JobState
from crawlsched.demo.seed import demo_reference
from crawlsched.planning.run_names import FINISHED
from crawlsched.runtime import get_runtime
from tests.support.ports import refusing_port
from tests.support.serving import running, send_html
from tests.support.waiting import wait_for


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.log.append(self.path)
        redirects = self.server.redirects
        handle = self.path.rstrip("/").rsplit("/", 1)[-1]
        if handle in redirects:
            self.send_response(302)
            self.send_header("Location", redirects[handle])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        send_html(
            self, f"<html><head><title>{handle}</title></head><body>hello</body></html>".encode()
        )

    def log_message(self, *args) -> None:
        pass


def test_a_navigation_ending_on_chromes_error_page_fails_its_job(chromedriver_node, stub_pipeline):
    with (
        running(_Site, host="127.0.0.2", log=[], redirects={}) as refused,
        running(_Site, log=[], redirects={}) as site,
        refusing_port() as nothing_listens,
    ):
        site.redirects.update(
            away=f"http://127.0.0.2:{refused.server_address[1]}/page/tiktok/secret",
            gone=f"http://127.0.0.1:{nothing_listens}/nothing-listens",
        )
        # Given three browser jobs and one chromedriver node, through the filtering proxy
        stub_pipeline(threads=2, browser_proxy=True)
        rt = get_runtime()
        base = f"http://127.0.0.1:{site.server_address[1]}/page"
        rt.create_indexes()
        rt.reference.load(demo_reference(base))
        rt.schedules.ensure_defaults(rt.now())
        rt.inventory.add_node(chromedriver_node, "chromedriver", 1, rt.now())
        tiktok = rt.reference.media_by_name("tiktok")
        now = rt.now()
        rt.jobs("profiles").insert_new(
            [
                {
                    "target": handle,
                    "media_name": "tiktok",
                    "media_name_id": tiktok["_id"],
                    "task": "profile",
                    "state": int(JobState.PENDING),
                    "enabled": True,
                    "execution_date": now - timedelta(seconds=1),
                    "modified_at": now,
                    "attempt_count": 0,
                }
                for handle in ("fine", "away", "gone")
            ]
        )
        from crawlsched.actors import ticker

        # When the sweep runs
        rt.schedules.fire_now("sweep-profiles", rt.now())
        ticker.tick.send()

        def finished():
            run = rt.db.runs.find_one({"schedule_id": "sweep-profiles"})
            return run if run and run["state"] == FINISHED else None

        run = wait_for(finished, 120, "the run to finish")

    # Then only the page that loaded is stored
    stored = list(rt.db.profile_data.find({}))
    assert [doc["title"] for doc in stored] == ["fine"], stored
    assert run["counts"].get("succeeded") == 1, run["counts"]
    jobs = {job["target"]: job for job in rt.db.profiles.find({"target": {"$exists": True}})}
    assert jobs["fine"]["last_outcome"] == "succeeded"
    # And each failed page is a failed job saying why, under the URL that failed
    for handle, reason in (("away", "HTTP ERROR 403"), ("gone", "HTTP ERROR 502")):
        job = jobs[handle]
        assert job["last_outcome"] != "succeeded", job
        assert "did not load" in job["last_error"] and reason in job["last_error"], job
        assert site.redirects[handle].split("/")[2] in job["last_error"], job
    assert refused.log == []  # the refused server never saw the redirect arrive


def test_the_website_driver_fails_a_page_that_ends_on_chromes_error_page(chromedriver_node):
    from crawlsched.drivers.base import DriverError
    from crawlsched.drivers.browser_proxy import FilteringProxy
    from crawlsched.drivers.browser_session import open_browser
    from crawlsched.drivers.context import CrawlContext
    from crawlsched.drivers.targets import parse_networks
    from crawlsched.drivers.website import _load

    loopback = parse_networks(["127.0.0.1/32"])
    with (
        running(_Site, host="127.0.0.2", log=[], redirects={}) as refused,
        running(_Site, log=[], redirects={}) as site,
    ):
        away = f"http://127.0.0.2:{refused.server_address[1]}/secret"
        site.redirects["away"] = away
        proxy = FilteringProxy(loopback).start()
        try:
            with open_browser(chromedriver_node, proxy_url=proxy.url) as browser:
                context = CrawlContext(browser=browser, allowed_networks=loopback)
                base = f"http://127.0.0.1:{site.server_address[1]}"
                assert _load(f"{base}/fine", context)[1].css("title::text").get() == "fine"
                try:
                    _load(f"{base}/away", context)
                except DriverError as e:
                    failure = str(e)
                else:
                    failure = ""
        finally:
            proxy.stop()
    assert failure == f"{away}: the page did not load (HTTP ERROR 403)"
    assert refused.log == []
