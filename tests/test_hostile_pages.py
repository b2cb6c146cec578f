"""Hostile pages in a real run: a 50 MB page, a page that never finishes sending, a redirect
loop, endless redirects, a binary file and a broken encoding. Each ends its job with a recorded
reason within bounded time and memory, and the run still ends, exactly once."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from http.server import ThreadingHTTPServer

from crawlsched.planning.run_names import FINISHED, run_id_for
from crawlsched.runtime import get_runtime
from tests.support.graph_run import add_graph_schedule, prepare
from tests.support.hostile import StreamingHandler
from tests.support.waiting import wait_for

LINKS = ["/big", "/slow", "/loop", "/chain/0", "/binary", "/broken"]


class Hostile(StreamingHandler):
    def do_GET(self) -> None:
        path = self.path
        if path == "/p/0":
            self._send(200, "".join(f'<a href="{p}">x</a>' for p in LINKS).encode(), "text/html")
        elif path == "/big":  # 50 MB, streamed: the crawl must stop reading long before
            self._head(200, "text/html", 50_000_000)
            chunk = b"<p>" + b"x" * 65_532 + b"</p>"
            for _ in range(50_000_000 // len(chunk)):
                if not self._write(chunk):
                    return
        elif path == "/slow":  # a byte every 0.2 s, never done
            self._head(200, "text/html", 10_000_000)
            for _ in range(600):
                if not self._write(b"x"):
                    return
                time.sleep(0.2)
        elif path == "/loop":
            self._send(302, b"", "text/html", {"Location": "/loop"})
        elif path.startswith("/chain/"):  # endless distinct redirects
            n = int(path.rsplit("/", 1)[1])
            self._send(302, b"", "text/html", {"Location": f"/chain/{n + 1}"})
        elif path == "/binary":
            self._send(200, bytes(range(256)) * 100, "application/octet-stream")
        elif path == "/broken":
            body = b"<html><title>caf\xe9 \xff\xfe</title><body>ok</body></html>"
            self._send(200, body, "text/html; charset=utf-8")
        else:
            self._send(404, b"", "text/html")


def test_hostile_pages_end_their_jobs_with_a_reason_and_the_run_ends(stub_pipeline):
    from crawlsched.actors.planner import plan_crawls

    stub_pipeline(threads=4, max_page_bytes=1_000_000, page_deadline_s=2.0)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        rt = get_runtime()
        prepare(rt, max_depth=8)
        base = f"http://127.0.0.1:{server.server_address[1]}"
        add_graph_schedule(rt, base, "hostile")
        fire_at = rt.now() - timedelta(seconds=1)
        plan_crawls.send("hostile", fire_at.isoformat())
        run_id = run_id_for("hostile", fire_at)
        run = wait_for(
            lambda: (r := rt.runs.get(run_id)) and r["state"] == FINISHED and r, 90, "the run"
        )
    finally:
        server.shutdown()
        server.server_close()
    errors = {
        doc["url"].removeprefix(base): doc.get("last_error") or doc["last_outcome"]
        for doc in rt.db.websites.find({"scope_run": run_id, "depth": {"$gte": 1}})
    }
    assert "larger than 1000000 bytes" in errors["/big"]
    assert "not finished within 2.0 s" in errors["/slow"]
    assert "not HTML" in errors["/binary"]
    assert errors["/broken"] == "succeeded"  # decoded with replacement characters
    assert errors["/loop"] == "succeeded"  # its redirect was discovered: already in the run
    # The redirect chain is cut by the depth bound, counted on the run
    assert run["cut"].get("depth", 0) >= 1
    assert sum(run["counts"].values()) == run["planned"] + run["discovered"]
