"""bench_frontier: cluster-wide politeness measured at the crawled servers, and what it costs.

Real parts throughout: `dramatiq crawlsched.actors` worker groups started by the CLI (as
tests/support/workers.py `DramatiqWorkers` does, environment from `crawlsched_env`), RabbitMQ
on a virtual host of our own (deleted at the end), one shared MongoDB (the multi-process
mongoeco test server). Sites are `GraphSite`s on loopback: link graphs from `layered_graph`,
each request's arrival and the moment its answer starts (just before the status line, so
before the client can have it) recorded at the server. A run is one schedule over the seed
jobs, fired with `crawlsched run now`, timed from the command's start to the run document's
`finished`.

(1) violations — two worker groups (`--groups` 2, 2 processes x `--violation-threads` 2 each)
    crawl ONE host (`--violation-pages` 60 pages, each answered after `--serve-delay` 0.05 s)
    with CRAWLSCHED_HOST_DELAY_S=`--delay` 0.2 and CRAWLSCHED_HOST_CONCURRENCY=1.
      `politeness_violations` = request starts closer than delay - `--tolerance-ms` (20 ms,
        arrival jitter: the delay is kept between the client's starts, the server sees
        arrivals) to the previous start + request starts that find `concurrency` requests
        already in flight at the server. Every request counts, robots.txt included. Target 0.
      `pages_fetched_twice` (robots.txt aside), `all_pages_fetched` (every reachable URL
        requested), `robots_fetches` (1: once for the cluster).
(2) bound — `--hosts` H (20) sites x `--pages` P (100) pages, one seed job per host in one
    schedule, crawled by one group of `--bound-processes` 2 x `--bound-threads` 4 with a
    `--bound-delay` 1 s delay and 1 request at a time per host.
      `politeness_bound_ratio` = run wall time ÷ (P x delay): the time politeness alone sets
        for each host (P requests, robots.txt included, one delay apart; the hosts in
        parallel). Target ≤ 1.2. The run's wall time is its own record, from its
        `created_at` (planning began) to its `finished_at`, as in (3); `bound_seen_wall_s`
        adds the `crawlsched run now` process's start and the polling step.
        `first_request_s` counts from the run's `created_at` too.
      pages/s; `host_busy_share`: per host, (its pages x delay) ÷ the run's wall time, the
        median over hosts — how much of the run each host's clock was kept running.
      `politeness_violations_bound`: the same count as (1) on every host.
      With `--trace DIR` (diagnostic): the workers trace their batches, and
      `host_idle_outside_batches_share` says, of the time hosts sat idle past their delay,
      the share in which no running batch held a page of the host (its next page was still
      being found, planned or queued for a thread, not waiting its turn in a batch);
      `parked_to_sent_s` and `sent_to_taken_s` (medians) say how long a batch parked for a
      host took to be sent again, then to be taken by a thread; DIR gets each host's
      arrivals, each batch's crawl loop and the workers' trace lines.
(3) open — politeness opened up (CRAWLSCHED_HOST_DELAY_S=0, CONCURRENCY 16): `crawlsched
    standalone --threads 16` (one process, embedded store, in-process workers: the
    deployment for one machine) crawls a graph of `--open-pages` 1,000 pages each answered
    after `--open-serve-delay` 0.02 s (a network round trip; without it the loopback server,
    which shares this process's GIL with the baseline, sets the pace). Baseline in the same
    run, the same graph on a fresh site: a plain `httpx.Client` shared by a
    `ThreadPoolExecutor(16)`, breadth-first (a page's links submitted as it is parsed, each
    URL once), timed from the first submit to the last page. crawlsched is timed by its
    run's own record, from the run's `created_at` (planning began) to its `finished_at` (the
    end counted); `open_crawlsched_seen_wall_s` is the time seen from here, from before the
    `crawlsched run now` process is spawned to the run seen ended (polled every 0.1 s).
      `crawl_ratio_open` = crawlsched pages/s ÷ baseline pages/s. Target ≥ 0.7.
      `open_*_idle_share`: each side's share of the time from its first request to its last
        answer with no request in flight at the server (waiting for discovery, not fetching);
      `open_*_mean_in_flight`: requests in flight at the server on average over that time.
      `open_crawlsched_cpu_share`: the standalone's CPU seconds (user and system, from
        `/proc`) over the time seen ÷ that time: near 1.0, one core's worth, the interpreter
        lock sets the pace, not waiting.
      `scrapy_ratio_open` (extra) = crawlsched pages/s ÷ Scrapy's (CONCURRENT_REQUESTS 16,
        per domain 16, no delay, robots.txt obeyed, a subprocess; timed inside it from
        its `start` to `closed`), when scrapy imports.
(4) `commands_per_page` — MongoDB commands of every crawlsched process of run (2) (workers
    and `run now`) ÷ pages fetched: each process loads `benchmarks/_command_probe.py` as a
    driver module, which registers the store's `CommandCounter` with pymongo's command
    monitoring (housekeeping and getMore excluded) and writes its tally to a file;
    difference of the tallies from just before `run now` to the run's end. Target ≤ 1.0.
    `commands_per_page_violations`: the same over run (1), as context. `--call-sites`: the
    commands by the crawlsched functions that sent them (`--call-site-depth` frames each).
    `--bound-delay 0`: run (2) with no delay, for its commands a page (no bound ratio).

Each violating start is listed with what the probe logged for the two requests (it wraps the
pacer's `_reserve`, `PoliteHttp._read` and `httpx.Client.send` in the workers): how far apart
the pacer planned them, how far apart they were sent, and how long after its planned start
the earlier one's reservation returned and it was sent.

    .venv/bin/python benchmarks/bench_frontier.py [--phases violations,bound,open]
        [--hosts 20] [--pages 100] [--bound-delay 1] [--violation-pages 60] [--delay 0.2]
        [--open-pages 1000] [--no-scrapy] [--timeout 900] [--trace DIR]
        [--call-sites [--call-site-depth 3]]

Small sizes for a quick look: `--hosts 4 --pages 10 --violation-pages 20 --open-pages 200`.
Last line: JSON with every figure.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(__file__).resolve().parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402

from crawlsched.catalog import JobState  # noqa: E402
from crawlsched.flow import schedule_ops  # noqa: E402
from crawlsched.runtime import Runtime  # noqa: E402
from crawlsched.settings import Settings  # noqa: E402
from crawlsched.store.pipeline import TASKS_COLLECTION  # noqa: E402
from tests.support import scratch  # noqa: E402
from tests.support.fault_distributed import _ended, _run_now  # noqa: E402
from tests.support.graph_run import GRAPH_MEDIA, prepare  # noqa: E402
from tests.support.link_graph import GraphSite, LinkGraph, layered_graph  # noqa: E402
from tests.support.mongo_server import MongoecoServer  # noqa: E402
from tests.support.rabbit import TestVhost  # noqa: E402
from tests.support.standalone import CLI, Standalone, standalone_env  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402
from tests.support.workers import TEST_SECRET_KEY, DramatiqWorkers, crawlsched_env  # noqa: E402

PHASES = ("violations", "bound", "open")
LINK = re.compile(r'href="([^"]+)"')
TARGETS = {
    "politeness_violations": ("== 0", lambda v: v == 0),
    "politeness_bound_ratio": ("<= 1.2", lambda v: v <= 1.2),
    "crawl_ratio_open": (">= 0.7", lambda v: v >= 0.7),
    "commands_per_page": ("<= 1.0", lambda v: v <= 1.0),
}


# -- the sites ----------------------------------------------------------------------------------


class TimedSite(GraphSite):
    """A GraphSite that also keeps (arrival, answer start, path) of every GET."""

    def __init__(self, graph: LinkGraph, delay_s: float = 0.0) -> None:
        super().__init__(graph, delay_s)
        self.intervals: list[tuple[float, float, str]] = []
        site, base = self, self._server.RequestHandlerClass

        class Timed(base):
            def do_GET(self) -> None:  # noqa: N802  (the http.server name)
                self._arrived = time.time()
                super().do_GET()

            def send_response(self, code: int, message: str | None = None) -> None:
                site.intervals.append((self._arrived, time.time(), self.path))
                super().send_response(code, message)

        self._server.RequestHandlerClass = Timed


def violations(site: TimedSite, delay_s: float, cap: int, tolerance_s: float) -> dict:
    """Starts closer than the delay (less the tolerance) to the previous start, and starts
    that found `cap` requests still unanswered; each with its gap in ms, for the record."""
    rows = sorted(site.intervals)
    starts = [s for s, _, _ in rows]
    early = [
        (round((b - a) * 1000, 1), rows[i][2], rows[i + 1][2])
        for i, (a, b) in enumerate(itertools.pairwise(starts))
        if b - a < delay_s - tolerance_s
    ]
    over = []
    for i, (start, _, path) in enumerate(rows):
        open_before = [(s, p) for s, end, p in rows[:i] if end > start]
        if len(open_before) >= cap:
            over.append((round((start - open_before[-1][0]) * 1000, 1), open_before[-1][1], path))
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    return {"early": early, "over_cap": over, "min_gap_s": min(gaps, default=None)}


def explain(site: TimedSite, v: dict, sends: dict[str, tuple]) -> list[str]:
    """Each violating start, with what the pacer planned and when the client sent (from the
    probe's send log: the gap between the two planned starts, and between the two sends)."""

    def gap(prev: str, path: str, i: int) -> str:
        a, b = sends.get(site.base_url + prev), sends.get(site.base_url + path)
        if a is None or b is None or a[i] is None or b[i] is None:
            return "?"
        return f"{(b[i] - a[i]) * 1000:.0f}"

    def late(path: str) -> str:
        planned, sent, reserved = sends.get(site.base_url + path, (None, None, None))
        if planned is None:
            return "?"
        return f"{(reserved - planned) * 1000:.0f}/{(sent - planned) * 1000:.0f}"

    return [
        f"{site.base_url} {prev} -> {path}: arrivals {ms} ms apart"
        + (" (the first not answered yet)" if kind == "over_cap" else "")
        + f"; planned starts {gap(prev, path, 0)} ms, sends {gap(prev, path, 1)} ms apart;"
        + f" {prev} reserved/sent {late(prev)} ms after its planned start"
        for kind in ("early", "over_cap")
        for ms, prev, path in v[kind]
    ]


def read_sends(folder: Path) -> dict[str, tuple]:
    """url -> (planned start, sent, reserve returned), unix seconds, from the send logs."""
    sends = {}
    for path in folder.glob("*.sends"):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                url, *times = json.loads(line)
                sends[url] = tuple(times)
    return sends


def page_counts(site: GraphSite) -> dict:
    fetched = {p: n for p, n in site.fetches.items() if p != "/robots.txt"}
    return {
        "pages": sum(fetched.values()),
        "twice": sum(n > 1 for n in fetched.values()),
        "twice_paths": sorted(p for p, n in fetched.items() if n > 1),
        "complete": site.graph.reachable() <= set(fetched),
        "robots": site.fetches.get("/robots.txt", 0),
    }


# -- counting commands in the workers -----------------------------------------------------------


def command_tally(folder: Path, part: str = "targets") -> Counter[str]:
    """Commands of every probed process so far, by "<command> <collection>" (`part`
    "sites": by the crawlsched functions that sent them, with --call-sites)."""
    tally: Counter[str] = Counter()
    for path in folder.glob("*.json"):
        for _ in range(3):  # replaced while we read it: read again
            try:
                tally.update(json.loads(path.read_text()).get(part, {}))
                break
            except (OSError, ValueError):
                time.sleep(0.05)
    return tally


def read_batches(folder: Path) -> list[tuple]:
    """The batches the probes traced (`--trace`): when each began and ended its crawl loop
    (unix seconds) and the hosts of its jobs."""
    began: dict[str, tuple] = {}
    batches = []
    for path in folder.glob("*.trace"):
        for line in path.read_text().splitlines():
            at, _, kind, *rest = json.loads(line)
            if kind == "each0":
                began[rest[0]] = (at, frozenset(rest[1]))
            elif kind == "each1" and rest[0] in began:
                start, hosts = began.pop(rest[0])
                batches.append((start, at, hosts))
    return batches


def idle_outside_batches(
    sites: list[TimedSite], starts: list[list[float]], batches: list[tuple], delay_s: float
) -> float:
    """Of the time hosts sat idle past their delay (a gap between two of a host's request
    starts, less the delay), the share in which no running batch held a page of that host:
    its next page was still being found, planned, or queued for a thread, rather than waiting
    in a batch for its turn. Sampled every 0.1 s."""
    outside = inside = 0
    for site, times in zip(sites, starts, strict=True):
        mine = [(b, e) for b, e, hosts in batches if site.base_url in hosts]
        for before, after in itertools.pairwise(times):
            moment = before + delay_s
            while moment < after:
                held = any(b <= moment < e for b, e in mine)
                inside, outside = inside + held, outside + (not held)
                moment += 0.1
    return round(outside / max(inside + outside, 1), 2)


def parked_waits(lines: list[str]) -> dict:
    """How long the batches that waited for a host took to come back (`--trace`): from being
    parked to being sent again (admission: the host's release or a timed wake-up), and from
    being sent to being taken by a thread (the crawl queue ahead of them). Medians, seconds."""
    parked, sent, taken = {}, {}, {}
    for line in lines:
        at, _, kind, *rest = json.loads(line)
        if kind == "requeued" and rest[1]:
            parked[rest[1]] = at
        elif kind == "resent":
            sent.setdefault(rest[0], at)
        elif kind == "batch0":
            taken.setdefault(rest[0], at)
    back = [d for d in parked if d in sent and d in taken]
    if not back:
        return {"parked_batches": len(parked)}
    return {
        "parked_batches": len(parked),
        "parked_to_sent_s": round(statistics.median(sent[d] - parked[d] for d in back), 1),
        "sent_to_taken_s": round(statistics.median(taken[d] - sent[d] for d in back), 1),
    }


def save_trace(folder: Path, crawl: Crawl, sites: list[TimedSite], starts: list) -> None:
    """Each host's request arrivals and each batch's crawl loop (seconds from the run's
    creation), and the workers' own trace lines (`_command_probe.py`: unix time, "pid:thread",
    event: batch and loop start and end, children passes, host grants, refusals and releases,
    batches parked), for a closer look than the figures give."""
    folder.mkdir(parents=True, exist_ok=True)
    arrivals = {s.base_url: [round(t - crawl.started_at, 4) for t in ts]
                for s, ts in zip(sites, starts, strict=True)}  # fmt: skip
    (folder / "arrivals.json").write_text(json.dumps(arrivals))
    rows = [(b - crawl.started_at, e - crawl.started_at, sorted(h)) for b, e, h in crawl.batches]
    (folder / "batches.json").write_text(json.dumps(sorted(rows)))
    (folder / "workers.trace").write_text("\n".join(crawl.trace) + "\n")


# -- a distributed crawl ------------------------------------------------------------------------


@dataclass
class Crawl:
    """One run over the seed pages of `sites`, by `groups` worker groups, its figures after."""

    sites: list[TimedSite]
    env: dict[str, str]
    groups: int
    processes: int
    threads: int
    timeout: float
    wall_s: float = 0.0  # the run's own record: created to finished
    seen_wall_s: float = 0.0  # from before `run now` to the run seen ended
    started_at: float = 0.0  # unix time the run was created
    commands: Counter[str] = field(default_factory=Counter)
    command_sites: Counter[str] = field(default_factory=Counter)  # with --call-sites
    sends: dict[str, tuple] = field(default_factory=dict)
    batches: list[tuple] = field(default_factory=list)  # (began, ended, hosts) with --trace
    trace: list[str] = field(default_factory=list)  # the probes' trace lines with --trace
    workers: list[DramatiqWorkers] = field(default_factory=list)


def seed_schedule(rt: Runtime, base_urls: list[str], schedule_id: str) -> None:
    """One seed job per site (its start page) and one schedule of just those targets, as
    tests/support/graph_run.py `add_graph_schedule` makes them for one site."""
    now = rt.now()
    targets = [f"{base}/p/0" for base in base_urls]
    rt.jobs("websites").insert_new(
        [
            {
                "target": target,
                "media_name": GRAPH_MEDIA.name,
                "media_name_id": GRAPH_MEDIA.id,
                "task": "article",
                "state": int(JobState.PENDING),
                "enabled": True,
                "execution_date": now - timedelta(seconds=1),
                "attempt_count": 0,
                "modified_at": now,
                "created_at": now,
                "interval_s": 3600,
            }
            for target in targets
        ]
    )
    given = {"interval_s": 3600, "target_collection": "websites", "targets": targets}
    schedule_ops.create(rt, schedule_id, given)


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def run_crawl(crawl: Crawl, rt: Runtime, probe_dir: Path) -> None:
    schedule_id = f"frontier-{uuid.uuid4().hex[:6]}"
    seed_schedule(rt, [s.base_url for s in crawl.sites], schedule_id)
    for _ in range(crawl.groups):
        group = DramatiqWorkers(crawl.env, processes=crawl.processes, threads=crawl.threads)
        crawl.workers.append(group.start())
    # Up: every worker process has loaded the probe (and so opened its store).
    wanted = crawl.groups * crawl.processes
    wait_for(lambda: len(list(probe_dir.glob("*.json"))) >= wanted, 120, "the workers to start")
    time.sleep(2)  # their start-up commands written
    before, sites_before = command_tally(probe_dir), command_tally(probe_dir, "sites")
    started = time.monotonic()
    run_id = _run_now(crawl.env, schedule_id)
    try:
        wait_for(lambda: _ended(rt, run_id), crawl.timeout, f"run {run_id} to end", 0.2)
    except AssertionError:
        print(crawl.workers[0].output()[-3000:])
        raise
    crawl.seen_wall_s = time.monotonic() - started
    if keep := os.environ.get("BENCH_KEEP_WORKER_LOGS"):
        for n, group in enumerate(crawl.workers):
            Path(keep, f"workers-{n}.log").write_text(group.output())
    # The crawl's own time, from the run's record, as in (3): planned (created) to finished.
    # The time seen from here adds the `crawlsched run now` process's start and the polling
    # step, neither of which is the crawl.
    run = rt.runs.get(run_id)
    created, finished = (_utc(run[name]) for name in ("created_at", "finished_at"))
    crawl.wall_s = (finished - created).total_seconds()
    crawl.started_at = created.timestamp()
    time.sleep(3 * 0.25)  # the probes' last writes
    crawl.commands = command_tally(probe_dir) - before
    crawl.command_sites = command_tally(probe_dir, "sites") - sites_before
    crawl.sends = read_sends(probe_dir)
    crawl.batches = read_batches(probe_dir)
    crawl.trace = [
        line for path in probe_dir.glob("*.trace") for line in path.read_text().splitlines()
    ]


class Services:
    def __init__(self) -> None:
        self.mongo: MongoecoServer | None = None
        self.vhost: TestVhost | None = None

    def start(self) -> Services:
        self.mongo = MongoecoServer(start_timeout=120).start()
        self.vhost = TestVhost().create()
        return self

    def runtime(self, db: str) -> Runtime:
        rt = Runtime(
            Settings(
                mongo_url=self.mongo.url,
                mongo_db=db,
                broker_url="stub://",
                secret_key=TEST_SECRET_KEY,
                connect_timeout_s=60,
            )
        )
        prepare(rt)
        return rt

    def close(self) -> None:
        if self.vhost is not None:
            self.vhost.delete()
        if self.mongo is not None:
            self.mongo.stop()


def distributed(
    services: Services, root: Path, sites: list[TimedSite], args, **kw: object
) -> Crawl:
    db = f"frontier_{uuid.uuid4().hex[:10]}"
    rt = services.runtime(db)
    # The graph media's batch limit (8, as in the tests) unless --batch-limit says otherwise.
    rt.db[TASKS_COLLECTION].update_many(
        {"media_name_id": GRAPH_MEDIA.id}, {"$set": {"batch_limit": args.batch_limit}}
    )
    probe_dir = Path(tempfile.mkdtemp(prefix="probe-", dir=root))
    env = crawlsched_env(
        services.vhost.url,
        services.mongo.url,
        db,
        CRAWLSCHED_HOST_DELAY_S=str(kw.pop("delay")),
        CRAWLSCHED_HOST_CONCURRENCY="1",
        CRAWLSCHED_HOST_MAX_SLEEP_S=str(args.max_sleep),
        **lanes_env(args),
        CRAWLSCHED_DRIVER_MODULES='["_command_probe"]',
        CRAWLSCHED_CONNECT_TIMEOUT_S="30",
        CRAWLSCHED_LOG_LEVEL=os.environ.get("BENCH_WORKER_LOG_LEVEL", "WARNING"),
        BENCH_COMMANDS_DIR=str(probe_dir),
        BENCH_SEND_LOG=str(probe_dir),
        **({"BENCH_TRACE": "1"} if args.trace else {}),
        **(
            {"BENCH_CALL_SITES": "1", "BENCH_CALL_SITE_DEPTH": str(args.call_site_depth)}
            if args.call_sites
            else {}
        ),
        PYTHONPATH=f"{REPO_ROOT}:{BENCH_DIR}",
    )
    crawl = Crawl(sites, env, timeout=args.timeout, **kw)
    try:
        run_crawl(crawl, rt, probe_dir)
    finally:
        for group in crawl.workers:
            group.stop()
        rt.db.raw.client.drop_database(db)
    return crawl


def phase_violations(services: Services, root: Path, args) -> dict:
    graph = layered_graph(args.violation_pages, args.seed)
    with TimedSite(graph, args.serve_delay) as site:
        crawl = distributed(
            services, root, [site], args, delay=args.delay, groups=args.groups,
            processes=2, threads=args.violation_threads,
        )  # fmt: skip
    v = violations(site, args.delay, 1, args.tolerance_ms / 1000)
    counts = page_counts(site)
    return {
        "politeness_violations": len(v["early"]) + len(v["over_cap"]),
        "starts_too_close": len(v["early"]),
        "starts_over_cap": len(v["over_cap"]),
        "violating_starts": explain(site, v, crawl.sends),
        "min_gap_ms": round(v["min_gap_s"] * 1000, 1) if v["min_gap_s"] is not None else None,
        "pages_fetched_twice": counts["twice"],
        "all_pages_fetched": counts["complete"],
        "robots_fetches": counts["robots"],
        "violations_pages": counts["pages"],
        "violations_wall_s": round(crawl.wall_s, 1),
        "violations_ratio": round(crawl.wall_s / (len(graph.reachable()) * args.delay), 2),
        "commands_per_page_violations": round(crawl.commands.total() / max(counts["pages"], 1), 2),
    }


def phase_bound(services: Services, root: Path, args) -> dict:
    graphs = [layered_graph(args.pages, args.seed + i) for i in range(args.hosts)]
    sites = [TimedSite(g) for g in graphs]
    for site in sites:
        site.__enter__()
    try:
        crawl = distributed(
            services, root, sites, args, delay=args.bound_delay, groups=1,
            processes=args.bound_processes, threads=args.bound_threads,
        )  # fmt: skip
    finally:
        for site in sites:
            site.__exit__(None, None, None)
    counts = [page_counts(s) for s in sites]
    pages = sum(c["pages"] for c in counts)
    bad = [violations(s, args.bound_delay, 1, args.tolerance_ms / 1000) for s in sites]
    busy = [len(s.intervals) * args.bound_delay / crawl.wall_s for s in sites]  # 0 at no delay
    first, excess = [], []
    for site in sites:
        starts = sorted(a for a, _, _ in site.intervals)
        first.append(starts[0] - crawl.started_at)
        over = sum(max(0.0, b - a - args.bound_delay) for a, b in itertools.pairwise(starts))
        excess.append(over / crawl.wall_s)
    traced = {}
    if args.trace:
        starts = [sorted(a for a, _, _ in s.intervals) for s in sites]
        share = idle_outside_batches(sites, starts, crawl.batches, args.bound_delay)
        traced = {"host_idle_outside_batches_share": share, **parked_waits(crawl.trace)}
        save_trace(Path(args.trace), crawl, sites, starts)
    bound_s = args.pages * args.bound_delay  # 0 with --bound-delay 0: no bound to compare with
    return {
        "politeness_bound_ratio": round(crawl.wall_s / bound_s, 2) if bound_s else None,
        "bound_wall_s": round(crawl.wall_s, 1),
        "bound_seen_wall_s": round(crawl.seen_wall_s, 1),
        "bound_s": bound_s,
        "bound_pages": pages,
        "bound_pages_per_s": round(pages / crawl.wall_s, 2),
        "host_busy_share": round(statistics.median(busy), 2),
        "bound_all_pages_fetched": all(c["complete"] for c in counts),
        "bound_pages_fetched_twice": sum(c["twice"] for c in counts),
        "bound_fetched_twice": [
            f"{site.base_url}{path}"
            for site, c in zip(sites, counts, strict=True)
            for path in c["twice_paths"]
        ],
        "politeness_violations_bound": sum(len(v["early"]) + len(v["over_cap"]) for v in bad),
        "starts_over_cap_bound": sum(len(v["over_cap"]) for v in bad),
        "violating_starts_bound": [
            line
            for site, v in zip(sites, bad, strict=True)
            for line in explain(site, v, crawl.sends)
        ],
        "commands_per_page": round(crawl.commands.total() / max(pages, 1), 2),
        "bound_commands": crawl.commands.total(),
        "first_request_s": round(statistics.median(first), 2),
        "excess_gap_share": round(statistics.median(excess), 2),
        "commands_by_target": {
            k: round(n / max(pages, 1), 3) for k, n in crawl.commands.most_common(12)
        },
        **(
            {
                "commands_by_call_site": {
                    k: round(n / max(pages, 1), 3) for k, n in crawl.command_sites.most_common(30)
                }
            }
            if args.call_sites
            else {}
        ),
        **traced,
    }


# -- politeness opened up -----------------------------------------------------------------------


class ThreadedStandalone(Standalone):
    """`crawlsched standalone --threads N` (tests/support/standalone.py starts the default 4)."""

    threads: int = 16

    def start(self) -> ThreadedStandalone:
        self.log = scratch.scratch_file("standalone-", ".log")
        self.process = subprocess.Popen(
            [CLI, "standalone", "--threads", str(self.threads)],
            cwd=REPO_ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        wait_for(self._serving, 60, f"the standalone server (log {self.log.name})")
        return self


def crawlsched_open(root: Path, graph: LinkGraph, args) -> tuple[float, dict]:
    env = standalone_env(
        Path(tempfile.mkdtemp(prefix="standalone-", dir=root)),
        CRAWLSCHED_HOST_DELAY_S="0",
        CRAWLSCHED_HOST_CONCURRENCY=str(args.open_threads),
        **lanes_env(args),
        CRAWLSCHED_CRAWL_MAX_DEPTH="1000",
        CRAWLSCHED_LOG_LEVEL="ERROR",
        **(
            {"CRAWLSCHED_DISCOVERY_FLUSH_S": str(args.open_flush)}
            if args.open_flush is not None
            else {}
        ),
    )
    with TimedSite(graph, args.open_serve_delay) as site:
        server = ThreadedStandalone(env)
        server.threads = args.open_threads
        server.start()
        try:
            server.crawl_site("open", f"{site.base_url}/p/0")
            started = time.monotonic()
            cpu_before = cpu_seconds(server.process.pid)
            run_id = server.json_lines("run", "now", "open")[0]["run_id"]

            def ended() -> bool:
                return server.get(f"/v1/runs/{run_id}").get("state") in ("finished", "stopped")

            wait_for(ended, args.timeout, f"standalone run {run_id} to end", 0.1)
            seen_wall = time.monotonic() - started
            cpu = cpu_seconds(server.process.pid) - cpu_before
            # The crawl's own time, from the run's record: planned (created) to finished. The
            # time seen from here adds the `crawlsched run now` process's start (an
            # interpreter and the CLI's imports: 0.7-3 s on this machine, as long as a
            # 1,000-page crawl) and the polling step, neither of which is the crawl.
            run = server.get(f"/v1/runs/{run_id}")
            wall = (
                datetime.fromisoformat(run["finished_at"])
                - datetime.fromisoformat(run["created_at"])
            ).total_seconds()
        finally:
            server.stop()
            server.kill()
    return wall, {
        **page_counts(site),
        **server_load(site),
        "seen_wall": seen_wall,
        "cpu": cpu / seen_wall,
    }


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (`/proc/<pid>/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_load(site: TimedSite) -> dict:
    rows = sorted((a, b) for a, b, _ in site.intervals)
    span = max(b for _, b in rows) - rows[0][0]
    return {"idle": idle_share(site), "in_flight": sum(b - a for a, b in rows) / span}


def idle_share(site: TimedSite) -> float:
    """The share of the time from the first arrival to the last answer with no request in
    flight at the server."""
    rows = sorted((a, b) for a, b, _ in site.intervals)
    busy, reach = 0.0, rows[0][0]
    for a, b in rows:
        if b > reach:
            busy += b - max(a, reach)
            reach = b
    return 1 - busy / (reach - rows[0][0])


def httpx_open(graph: LinkGraph, args) -> tuple[float, dict]:
    with TimedSite(graph, args.open_serve_delay) as site, httpx.Client() as client:
        seen, lock = {"/p/0"}, threading.Lock()
        pool = cf.ThreadPoolExecutor(args.open_threads)
        pending: set[cf.Future] = set()

        def fetch(path: str) -> list[str]:
            response = client.get(site.base_url + path, follow_redirects=False)
            if response.status_code in (301, 302):
                return [response.headers["location"]]
            return LINK.findall(response.text)

        started = time.monotonic()
        pending.add(pool.submit(fetch, "/p/0"))
        while pending:
            done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for future in done:
                for path in future.result():
                    with lock:
                        if path in seen:
                            continue
                        seen.add(path)
                    pending.add(pool.submit(fetch, path))
        wall = time.monotonic() - started
        pool.shutdown()
    return wall, {**page_counts(site), **server_load(site)}


SPIDER = """
import json, sys, time
import scrapy
from scrapy.crawler import CrawlerProcess

BASE, THREADS, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
times = {}

class Graph(scrapy.Spider):
    name = "graph"
    async def start(self):
        times["start"] = time.monotonic()
        yield scrapy.Request(BASE + "/p/0")
    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)
    def closed(self, reason):
        times["end"] = time.monotonic()

process = CrawlerProcess({
    "CONCURRENT_REQUESTS": THREADS, "CONCURRENT_REQUESTS_PER_DOMAIN": THREADS,
    "DOWNLOAD_DELAY": 0, "ROBOTSTXT_OBEY": True, "LOG_LEVEL": "ERROR",
    "TELNETCONSOLE_ENABLED": False, "HTTPERROR_ALLOW_ALL": True,
})
process.crawl(Graph)
process.start()
open(OUT, "w").write(json.dumps({"wall_s": times["end"] - times["start"]}))
"""


def scrapy_open(root: Path, graph: LinkGraph, args) -> tuple[float, dict] | str:
    try:
        import scrapy  # noqa: F401
    except ImportError:
        return "scrapy is not installed (pip install scrapy)"
    script, out = root / "graph_spider.py", root / "scrapy.json"
    script.write_text(SPIDER)
    with GraphSite(graph, args.open_serve_delay) as site:
        done = subprocess.run(
            [sys.executable, str(script), site.base_url, str(args.open_threads), str(out)],
            capture_output=True, text=True, timeout=args.timeout, check=False,
        )  # fmt: skip
    if done.returncode != 0:
        return f"scrapy failed: {done.stderr[-500:]}"
    return json.loads(out.read_text())["wall_s"], page_counts(site)


def phase_open(root: Path, args) -> dict:
    graph = layered_graph(args.open_pages, args.seed)
    pages = len(graph.reachable())
    base_wall, base_counts = httpx_open(graph, args)
    cs_wall, cs_counts = crawlsched_open(root, graph, args)
    figures = {
        "crawl_ratio_open": round(base_wall / cs_wall, 2),
        "open_pages": pages,
        "open_crawlsched_pages_per_s": round(pages / cs_wall, 1),
        "open_crawlsched_wall_s": round(cs_wall, 2),
        "open_crawlsched_seen_wall_s": round(cs_counts["seen_wall"], 2),
        "open_httpx_wall_s": round(base_wall, 2),
        "open_httpx_pages_per_s": round(pages / base_wall, 1),
        "open_crawlsched_complete": cs_counts["complete"] and not cs_counts["twice"],
        "open_httpx_complete": base_counts["complete"] and not base_counts["twice"],
        "open_crawlsched_idle_share": round(cs_counts["idle"], 2),
        "open_httpx_idle_share": round(base_counts["idle"], 2),
        "open_crawlsched_mean_in_flight": round(cs_counts["in_flight"], 1),
        "open_httpx_mean_in_flight": round(base_counts["in_flight"], 1),
        "open_crawlsched_cpu_share": round(cs_counts["cpu"], 2),
    }
    if not args.no_scrapy:
        result = scrapy_open(root, graph, args)
        if isinstance(result, str):
            figures["scrapy_note"] = result
        else:
            figures["open_scrapy_pages_per_s"] = round(pages / result[0], 1)
            figures["scrapy_ratio_open"] = round(result[0] / cs_wall, 2)
    return figures


# -- main -------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--phases", default=",".join(PHASES), help="comma-separated: " + ",".join(PHASES)
    )
    p.add_argument("--groups", type=int, default=2, help="(1) worker groups of 2 processes")
    p.add_argument("--violation-threads", type=int, default=2, help="(1) threads per process")
    p.add_argument("--violation-pages", type=int, default=60, help="(1) pages of the one host")
    p.add_argument("--delay", type=float, default=0.2, help="(1) host delay, seconds")
    p.add_argument("--serve-delay", type=float, default=0.05, help="(1) seconds per answer")
    p.add_argument("--tolerance-ms", type=float, default=20.0, help="arrival jitter allowed")
    p.add_argument("--hosts", type=int, default=20, help="(2) hosts")
    p.add_argument("--pages", type=int, default=100, help="(2) pages per host")
    p.add_argument("--bound-delay", type=float, default=1.0, help="(2) host delay, seconds")
    p.add_argument("--bound-processes", type=int, default=2, help="(2) worker processes")
    p.add_argument("--bound-threads", type=int, default=4, help="(2) threads per process")
    p.add_argument(
        "--max-sleep", type=float, default=5.0, help="(1, 2) CRAWLSCHED_HOST_MAX_SLEEP_S"
    )
    p.add_argument(
        "--batch-limit", type=int, default=8, help="(1, 2) pages per batch (the media's limit)"
    )
    p.add_argument(
        "--lanes",
        type=int,
        default=None,
        help="(2, 3) CRAWLSCHED_CRAWL_LANES of every crawlsched process (default: the setting's)",
    )
    p.add_argument(
        "--trace",
        default=None,
        help="(2) a folder: the workers trace their batches, and the bound phase reports "
        "host_idle_outside_batches_share and writes arrivals.json and batches.json there",
    )
    p.add_argument(
        "--call-sites",
        action="store_true",
        help="(2) also report commands_by_call_site: the commands per page by the crawlsched "
        "functions that sent them (a stack walk per command: slower)",
    )
    p.add_argument(
        "--call-site-depth",
        type=int,
        default=3,
        help="(2) with --call-sites: how many crawlsched frames name a call site",
    )
    p.add_argument("--open-pages", type=int, default=1000, help="(3) pages of the graph")
    p.add_argument(
        "--open-flush",
        type=float,
        default=None,
        help="(3) CRAWLSCHED_DISCOVERY_FLUSH_S of the standalone (default: the setting's)",
    )
    p.add_argument("--open-threads", type=int, default=16, help="(3) threads, both sides")
    p.add_argument("--open-serve-delay", type=float, default=0.02, help="(3) seconds/answer")
    p.add_argument("--no-scrapy", action="store_true", help="(3) skip the Scrapy ratio")
    p.add_argument("--seed", type=int, default=1, help="graphs")
    p.add_argument("--timeout", type=float, default=900, help="seconds per run")
    args = p.parse_args(argv)
    args.phases = [x.strip() for x in args.phases.split(",") if x.strip()]
    if unknown := sorted(set(args.phases) - set(PHASES)):
        p.error(f"--phases: unknown {unknown}; choose from {list(PHASES)}")
    if min(args.hosts, args.pages, args.violation_pages, args.open_pages, args.groups) < 1:
        p.error("--hosts, --pages, --violation-pages, --open-pages, --groups must be >= 1")
    if min(args.delay, args.bound_delay) < 0:
        p.error("--delay and --bound-delay must be >= 0 (0: no delay, and no bound ratio)")
    return args


def lanes_env(args) -> dict[str, str]:
    return {} if args.lanes is None else {"CRAWLSCHED_CRAWL_LANES": str(args.lanes)}


def print_table(figures: dict) -> None:
    print(f"\n{'figure':<34} {'value':>10} {'target':>8} {'met':>4}")
    for name, value in figures.items():
        if name == "args":
            continue
        if isinstance(value, list):
            print(f"{name}:" + ("" if value else " none"))
            for line in value[:20]:
                print(f"    {line}")
            continue
        if isinstance(value, dict):
            print(f"{name} (per page):")
            for key, n in value.items():
                print(f"    {key:<46} {n:>8}")
            continue
        target, met = TARGETS.get(name, ("", None))
        ok = "" if met is None or value is None else ("yes" if met(value) else "NO")
        print(f"{name:<34} {value!s:>10} {target:>8} {ok:>4}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-frontier-"))
    services = Services()
    figures: dict = {}
    started = time.monotonic()
    try:
        if {"violations", "bound"} & set(args.phases):
            services.start()
        if "violations" in args.phases:
            figures.update(phase_violations(services, root, args))
            print(f"  violations done ({time.monotonic() - started:.0f} s)", flush=True)
        if "bound" in args.phases:
            figures.update(phase_bound(services, root, args))
            print(f"  bound done ({time.monotonic() - started:.0f} s)", flush=True)
        if "open" in args.phases:
            figures.update(phase_open(root, args))
            print(f"  open done ({time.monotonic() - started:.0f} s)", flush=True)
    finally:
        services.close()
        shutil.rmtree(root, ignore_errors=True)
        scratch.cleanup(keep=False)
    figures["minutes"] = round((time.monotonic() - started) / 60, 1)
    figures["args"] = {k: v for k, v in vars(args).items() if k != "phases"}
    print_table(figures)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
