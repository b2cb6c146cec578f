"""bench_crawl: a site of N pages found only by discovery, crawled through crawlsched vs httpx.

A generated site on 127.0.0.1 (a tree: page i links to pages 10i+1 … 10i+10, and back to its
parent and to the start page) is crawled two ways in the same run, with the same concurrency:

(a) baseline: a plain httpx loop — a thread pool of T threads GETs every page of the site
    (their URLs known in advance: the loop does no discovery at all) and reads its links;
(b) crawlsched: one seed job on the start page; every other page is discovered by the crawl
    (the `http` page driver), planned by the children pass, crawled by T in-process worker
    threads (stub broker, embedded store), until the run's end event.

Figures (the JSON line last):
- `crawl_ratio` = pages/s of (b) ÷ pages/s of (a) (target ≥ 0.7);
- `fetches_per_page`: requests the site saw in (b) ÷ pages (exactly 1.0: no page fetched twice);
- `done_latency_s`: from the last page's result stored to the run's end (p50 and max over the
  repeats): how long after the last page "done" is known (an idle timeout would be minutes);
- `messages_per_page`, `commands_per_page` (targets ≤ 0.1 and ≤ 0.5).

    .venv/bin/python benchmarks/bench_crawl.py [--pages 2000] [--threads 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402
from dramatiq import Middleware, Worker  # noqa: E402
from parsel import Selector  # noqa: E402

FAN_OUT = 10


class Site:
    """A tree of `pages` pages; counts requests per path."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.fetches: Counter[str] = Counter()
        lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                with lock:
                    site.fetches[self.path] += 1
                body = site.body(self.path)
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def body(self, path: str) -> bytes:
        number = path.removeprefix("/p/")
        if not number.isdigit() or int(number) >= self.pages:
            return b""
        i = int(number)
        kids = range(FAN_OUT * i + 1, min(FAN_OUT * i + FAN_OUT + 1, self.pages))
        parent = [f"/p/{(i - 1) // FAN_OUT}"] if i else []
        links = [f"/p/{k}" for k in kids] + parent + ["/p/0"]
        anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
        return f"<html><title>page {i}</title><body>{anchors}</body></html>".encode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def baseline(site: Site, threads: int) -> float:
    """Pages/s of a plain httpx loop over the known URLs, T threads, one shared client."""
    urls = [f"{site.base}/p/{i}" for i in range(site.pages)]
    with httpx.Client(timeout=20) as client:

        def fetch(url: str) -> int:
            response = client.get(url)
            return len(Selector(text=response.text).css("a::attr(href)").getall())

        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(fetch, urls))
        return site.pages / (time.perf_counter() - started)


class MessageCount(Middleware):
    def __init__(self) -> None:
        self.sent = 0
        self._lock = threading.Lock()

    def after_enqueue(self, broker, message, delay) -> None:
        with self._lock:
            self.sent += 1


def crawlsched_run(site: Site, threads: int, schedule_id: str, setup: dict) -> dict:
    from crawlsched.actors.planner import plan_crawls
    from crawlsched.catalog import JobState
    from crawlsched.flow import schedule_ops
    from crawlsched.planning.run_names import FINISHED, run_id_for

    rt, counter = setup["rt"], setup["counter"]
    now = rt.now()
    target = f"{site.base}/p/0"
    rt.jobs("websites").insert_new(
        [
            {
                "target": target,
                "media_name": "bench",
                "media_name_id": 990,
                "task": "article",
                "state": int(JobState.PENDING),
                "enabled": True,
                "execution_date": now - timedelta(seconds=1),
                "attempt_count": 0,
                "interval_s": 3600,
            }
        ]
    )
    given = {"interval_s": 3600, "target_collection": "websites", "targets": [target]}
    schedule_ops.create(rt, schedule_id, given)
    commands_before, messages_before = rt.counter.boundary_total, counter.sent
    fire_at = rt.now() - timedelta(seconds=1)
    started = time.perf_counter()
    plan_crawls.send(schedule_id, fire_at.isoformat())
    run_id = run_id_for(schedule_id, fire_at)
    polls = 0  # the bench's own reads: taken out of the command count
    while (run := rt.runs.get(run_id)) is None or run["state"] != FINISHED:
        polls += 1
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    polls += 1
    last_saved = max(d["last_seen"] for d in rt.db.articles.find({"run_id": run_id}))
    polls += 1
    pages = run["planned"] + run["discovered"]
    return {
        "pages": pages,
        "pages_per_s": pages / elapsed,
        "done_latency_s": (run["finished_at"] - last_saved).total_seconds(),
        "messages": counter.sent - messages_before,
        "commands": rt.counter.boundary_total - commands_before - polls,
        "succeeded": run["counts"].get("succeeded", 0),
    }


def start_crawlsched(threads: int, pages: int) -> dict:
    from crawlsched.brokers import setup_broker
    from crawlsched.reference import MediaRow, ReferenceData, TaskRow
    from crawlsched.runtime import get_runtime
    from crawlsched.settings import Settings
    from crawlsched.store.client import drop_embedded

    url = "mongomock://bench-crawl"
    drop_embedded(url)
    settings = Settings(
        mongo_url=url,
        broker_url="stub://",
        log_level="ERROR",
        target_allow_networks=["127.0.0.1/32"],
        metrics_enabled=False,
        host_delay_s=0.0,
        host_concurrency=threads,
    )
    broker = setup_broker(settings)
    import crawlsched.actors  # noqa: F401  (declares the actors on this broker)

    counter = MessageCount()
    broker.add_middleware(counter)
    rt = get_runtime()
    rt.create_indexes()
    task = TaskRow(need_login=False, need_selenium=False, crawl_limit=1000, batch_limit=50)
    media = MediaRow(
        name="bench", id=990, driver_class="http", max_depth=100, max_pages=10 * pages,
        tasks={"article": task},
    )  # fmt: skip
    models = ["profile", "publication", "comment", "friend", "story", "article"]
    rt.reference.load(ReferenceData(models=models, media=[media]))
    worker = Worker(broker, worker_threads=threads, worker_timeout=50)
    worker.start()
    return {"rt": rt, "counter": counter, "worker": worker, "broker": broker}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    setup = start_crawlsched(args.threads, args.pages)
    rows = []
    try:
        for n in range(args.repeat):
            site = Site(args.pages)
            try:
                base = baseline(site, args.threads)
                site.fetches.clear()
                run = crawlsched_run(site, args.threads, f"bench-crawl-{n}", setup)
                fetches = sum(n for path, n in site.fetches.items() if path != "/robots.txt")
            finally:
                site.close()
            row = {
                "baseline_pages_per_s": round(base, 1),
                "crawlsched_pages_per_s": round(run["pages_per_s"], 1),
                "crawl_ratio": round(run["pages_per_s"] / base, 3),
                "fetches_per_page": fetches / run["pages"],
                "done_latency_s": run["done_latency_s"],
                "messages_per_page": round(run["messages"] / run["pages"], 4),
                "commands_per_page": round(run["commands"] / run["pages"], 3),
                "pages": run["pages"],
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        setup["worker"].stop()
    latencies = [r["done_latency_s"] for r in rows]
    print(
        json.dumps(
            {
                "bench": "crawl",
                "pages": args.pages,
                "threads": args.threads,
                "crawl_ratio": statistics.median(r["crawl_ratio"] for r in rows),
                "fetches_per_page": max(r["fetches_per_page"] for r in rows),
                "done_latency_s": {"p50": statistics.median(latencies), "max": max(latencies)},
                "messages_per_page": statistics.median(r["messages_per_page"] for r in rows),
                "commands_per_page": statistics.median(r["commands_per_page"] for r in rows),
            }
        )
    )


if __name__ == "__main__":
    main()
