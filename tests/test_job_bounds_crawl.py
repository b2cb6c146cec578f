"""A website job's own discovery bounds (`jobs add website URL --depth N --max-pages M`), on a
real standalone server crawling a local site with more pages than the bounds let in."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.support.serving import running, send_html
from tests.support.standalone import Standalone, standalone_env
from tests.support.waiting import wait_for

# "/" links to "/a"; "/a" to six pages; each of those to one page deeper. Depth 2 from "/"
# reaches "/a" and its six; 5 pages discovered at most keeps "/a" and the first four of them.
LINKS = {"/": ["/a"], "/a": [f"/a/{i}" for i in range(1, 7)]}
LINKS.update({f"/a/{i}": [f"/a/{i}/deeper"] for i in range(1, 7)})
BOUNDED = {"/", "/a", "/a/1", "/a/2", "/a/3", "/a/4"}


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        with self.server.lock:
            self.server.fetched.append(self.path)
        if self.path not in LINKS and not self.path.endswith("/deeper"):
            send_html(self, b"<html>not found</html>", 404)
            return
        links = "".join(f'<a href="{href}">{href}</a>' for href in LINKS.get(self.path, []))
        send_html(self, f"<html><title>{self.path}</title><body>{links}</body></html>".encode())

    def log_message(self, *args: object) -> None:
        pass


def test_jobs_add_website_depth_and_max_pages_crawl_exactly_the_bounded_set(tmp_path: Path):
    env = standalone_env(tmp_path / "data")
    with (
        running(_Site, fetched=[], lock=threading.Lock()) as site,
        Standalone(env) as server,
    ):
        base = f"http://127.0.0.1:{site.server_address[1]}"
        # The packaged `web` media follows nothing (max_depth unset, the settings' 0): the
        # job's own bounds are what let this crawl grow.
        added = server.cli(
            "jobs", "add", "website", f"{base}/", "--depth", "2", "--max-pages", "5", "--once"
        )
        assert "links 2 deep, at most 5 pages a run" in added.stdout
        [job] = server.json_lines("jobs", "list", "websites")
        run_id = server.json_lines("run", "now", "sweep-websites")[0]["run_id"]

        def finished() -> dict | None:
            run = server.json_lines("run", "status", run_id)[0]
            return run if run["state"] == "finished" else None

        run = wait_for(finished, 120, f"run {run_id} to finish")
        pages = {row["url"] for row in server.json_lines("results", "article", "--run", run_id)}
        fetched = [p for p in site.fetched if p != "/robots.txt"]
    assert run["result"] == "succeeded", run
    assert run["planned"] == 1 and run["discovered"] == 5
    assert run["counts"] == {"succeeded": 6}
    assert pages == {f"{base}{path}" for path in BOUNDED}
    # Each page of the bounded set fetched once; nothing past the bounds fetched at all.
    assert sorted(fetched) == sorted(BOUNDED)
    # What the bounds cut: /a/5 and /a/6 (pages), the four /a/N/deeper (depth).
    assert run["cut"] == {"pages": 2, "depth": 4}
    assert job["target"] == f"{base}/"
