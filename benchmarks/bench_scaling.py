"""bench_scaling: size a KEDA-scaled Kubernetes deployment from a day of the demo's schedules.

Two parts, in one run:

(1) measured: per worker class, jobs per second per worker thread. The demo's social network
    runs on 127.0.0.1; crawlsched crawls N jobs of it with an in-process dramatiq worker (stub
    broker, embedded store, as bench_crawl does), one run per class:
    - http: `youtube` profile + publication jobs (no account, no browser), driver
      `demo_social` (the demo's own), `--http-threads` threads;
    - browser: `tiktok` profile + publication jobs (need a Selenium node), driver `browser`
      (Chrome renders the page), on a local chromedriver with `--browser-slots` slots and as
      many threads. Without chromedriver: not measured; the http rate divided by
      `--browser-ratio` is used instead, and the output says so.
    Rate per thread = jobs ÷ thread-seconds inside the crawl actors (a middleware clocks each
    crawl message), so batches that leave threads idle do not dilute it.
(2) modelled: 24 h (or `--hours`) of the default sweeps, profiles every 5 min and websites
    every 15, over the demo's jobs (`crawlsched.demo.seed`: handles, tasks per media, the
    packaged reference rows' flags and batch limits, the jobs' `interval_s`) times `--scale`,
    with the demo's accounts and browser slots, against KEDA's rule (`_keda_model`) and the
    rates of (1) (`_scaling_sim`).

Prints per class: replicas per hour (min / mean / max), run waits (fire to first batch
started, fire to the class's last batch done: p50 / p95 / max), worker-hours; last, one JSON
line with the figures.

    .venv/bin/python benchmarks/bench_scaling.py [--quick] [--scale 1] [--hours 24]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from dramatiq import Middleware, Worker  # noqa: E402

from benchmarks import _keda_model as keda  # noqa: E402
from benchmarks import _scaling_sim as sim  # noqa: E402
from crawlsched.catalog import PROFILE, WEBSITE  # noqa: E402
from crawlsched.demo import seed  # noqa: E402
from crawlsched.reference import load_reference  # noqa: E402

RESOLVER_RULES = "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"  # as the demo: nothing but loopback


class CrawlClock(Middleware):
    """Thread-seconds spent in crawl actors (each crawl message, start to end)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.messages = 0
        self._started: dict[str, float] = {}
        self._lock = threading.Lock()

    def before_process_message(self, broker, message) -> None:
        if message.actor_name.startswith("crawl_"):
            with self._lock:
                self._started[message.message_id] = time.perf_counter()

    def after_process_message(self, broker, message, *, result=None, exception=None) -> None:
        with self._lock:
            started = self._started.pop(message.message_id, None)
            if started is not None:
                self.seconds += time.perf_counter() - started
                self.messages += 1

    after_skip_message = after_process_message


def _measure_one(rt, broker, clock, kind: str, handles: list[str], media, threads: int, timeout):
    from crawlsched.actors.planner import plan_crawls
    from crawlsched.catalog import JobState
    from crawlsched.flow import schedule_ops
    from crawlsched.planning.run_names import FINISHED, run_id_for

    now = rt.now()
    jobs = [
        {
            "target": handle, "media_name": media.name, "media_name_id": media.id,
            "task": task, "state": int(JobState.PENDING), "enabled": True,
            "execution_date": now - timedelta(seconds=1), "attempt_count": 0, "interval_s": 3600,
        }
        for handle in handles
        for task in ("profile", "publication")
    ]  # fmt: skip
    rt.jobs("profiles").insert_new(jobs)
    schedule_id = f"bench-scaling-{kind}"
    given = {"interval_s": 3600, "target_collection": "profiles", "targets": handles}
    schedule_ops.create(rt, schedule_id, given)
    worker = Worker(broker, worker_threads=threads, worker_timeout=50)
    worker.start()
    try:
        seconds_before, messages_before = clock.seconds, clock.messages
        fire_at = rt.now() - timedelta(seconds=1)
        started = time.perf_counter()
        plan_crawls.send(schedule_id, fire_at.isoformat())
        run_id = run_id_for(schedule_id, fire_at)
        while (run := rt.runs.get(run_id)) is None or run["state"] != FINISHED:
            if time.perf_counter() - started > timeout:
                raise TimeoutError(f"{kind}: run {run_id} not finished after {timeout} s")
            time.sleep(0.05)
        wall = time.perf_counter() - started
    finally:
        worker.stop(timeout=30_000)
    succeeded = run["counts"].get("succeeded", 0)
    if succeeded != len(jobs):
        raise RuntimeError(f"{kind}: {succeeded} of {len(jobs)} jobs succeeded: {run['counts']}")
    thread_s = clock.seconds - seconds_before
    return {
        "jobs": len(jobs),
        "threads": threads,
        "crawl_messages": clock.messages - messages_before,
        "wall_s": round(wall, 2),
        "jobs_per_s": round(len(jobs) / wall, 2),
        "crawl_thread_s": round(thread_s, 2),
        "jobs_per_s_per_thread": len(jobs) / thread_s,
    }


def measure(args) -> dict:
    """Crawl the demo's social network for real: jobs/s per thread, per class."""
    from crawlsched.brokers import setup_broker
    from crawlsched.demo.node import LocalChromedriver
    from crawlsched.demo.social import DemoSocialNetwork
    from crawlsched.runtime import get_runtime
    from crawlsched.settings import Settings
    from crawlsched.store.client import drop_embedded

    url = f"mongomock://bench-scaling-{os.getpid()}"
    drop_embedded(url)
    settings = Settings(
        mongo_url=url, broker_url="stub://", log_level="ERROR", metrics_enabled=False,
        target_allow_networks=["127.0.0.1/32"], node_allow_networks=["127.0.0.1/32"],
        browser_host_resolver_rules=RESOLVER_RULES, host_delay_s=0.0,
    )  # fmt: skip
    broker = setup_broker(settings)
    import crawlsched.actors  # noqa: F401  (declares the actors on this broker)

    clock = CrawlClock()
    broker.add_middleware(clock)
    rt = get_runtime()
    http_handles = [f"youtube_bench{i}" for i in range(args.http_jobs // 2)]
    browser_handles = [f"tiktok_bench{i}" for i in range(args.browser_jobs // 2)]
    measured = {}
    with DemoSocialNetwork(http_handles + browser_handles, {}) as network:
        reference = seed.crawl_reference(network.base_url)
        media = {m.name: m for m in reference.media}
        youtube = media["youtube"].model_copy(update={"max_depth": 0})
        tiktok = media["tiktok"].model_copy(update={"max_depth": 0, "driver_class": "browser"})
        rows = [youtube if m.name == "youtube" else tiktok if m.name == "tiktok" else m
                for m in reference.media]  # fmt: skip
        rt.create_indexes()
        rt.reference.load(reference.model_copy(update={"media": rows}))
        requests_before = len(network.log)
        measured["http"] = _measure_one(
            rt, broker, clock, "http", http_handles, youtube, args.http_threads, args.timeout
        )
        requests = len(network.log) - requests_before
        measured["http"]["requests_per_job"] = round(requests / measured["http"]["jobs"], 2)
        if LocalChromedriver.available() and not args.no_browser:
            with LocalChromedriver() as node:
                rt.inventory.add_node(node.url, "chromedriver", args.browser_slots, rt.now())
                measured["browser"] = _measure_one(
                    rt, broker, clock, "browser", browser_handles, tiktok,
                    args.browser_slots, args.timeout,
                )  # fmt: skip
        else:
            why = "--no-browser" if args.no_browser else "chromedriver not found"
            rate = measured["http"]["jobs_per_s_per_thread"] / args.browser_ratio
            measured["browser"] = {"jobs_per_s_per_thread": rate, "derived": why}
    return measured


def demo_groups(scale: int, job_interval_s: float | None) -> list[sim.JobGroup]:
    """The demo's jobs (`seed_crawl_demo`) with the packaged reference rows, times `scale`."""
    reference = {m.name: m for m in load_reference().media}
    interval = (
        job_interval_s or seed._job("t", "m", 0, "profile", seed.datetime.now(), 0)["interval_s"]
    )
    handles = {m: n + (1 if m == "twitter" else 0) for m, n in seed.DEMO_HANDLES.items()}
    groups = []
    for media, n in handles.items():
        for task in seed.DEMO_TASKS[media]:
            groups.append(_group(PROFILE.collection, reference[media], task, n * scale, interval))
    groups.append(_group(WEBSITE.collection, reference["web"], "article", 3 * scale, interval))
    return groups


def _group(collection, row, task, count, interval) -> sim.JobGroup:
    t = row.tasks[task]
    return sim.JobGroup(
        collection, row.name, row.id, task, t.need_login, t.need_selenium, t.batch_limit,
        count, interval,
    )  # fmt: skip


def demo_accounts(scale: int) -> dict[str, int]:
    """The demo's accounts per media (`demo_accounts`: usernames demo_<media>_<n>)."""
    accounts: dict[str, int] = defaultdict(int)
    for username in seed.demo_accounts():
        accounts[username.split("_")[1]] += scale
    return dict(accounts)


def host_pacing(groups: list[sim.JobGroup], requests_per_job: float, delay_s: float) -> dict:
    """Share of each media host's time its pacing alone needs: jobs per second (count /
    interval) x requests per job x the cluster-wide delay between request starts. Above 1 the
    host cannot keep up whatever the replicas. Websites are one host each: left out."""
    load: dict[str, float] = defaultdict(float)
    for g in groups:
        if g.collection == PROFILE.collection:
            load[g.media] += g.count / g.interval_s * requests_per_job * delay_s
    return {media: round(share, 3) for media, share in load.items()}


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1)]


def report(result: dict, bucket_s: float) -> dict:
    figures: dict = {}
    runs = [r for r in result["runs"] if r.jobs]
    for name, st in result["classes"].items():
        r = st.spec.rule
        print(
            f"\n== {name} workers: {st.spec.threads} threads/pod, "
            f"{st.spec.jobs_per_s_per_thread:.3g} jobs/s/thread; KEDA value {r.value:g}, "
            f"activation {r.activation_value:g}, polling {r.polling_interval_s:g} s, "
            f"cooldown {r.cooldown_period_s:g} s, replicas {r.min_replicas}-{r.max_replicas} =="
        )
        print(f"  {'hour':>5} {'min':>4} {'mean':>6} {'max':>4}")
        buckets: dict[int, list[int]] = defaultdict(list)
        for t, n in st.replicas:
            buckets[int(t // bucket_s)].append(n)
        for b, values in sorted(buckets.items()):
            print(f"  {b:>5} {min(values):>4} {statistics.fmean(values):>6.2f} {max(values):>4}")
        mine = [r for r in runs if name in r.open_batches]
        start = [r.first_start[name] - r.fired_at for r in mine if name in r.first_start]
        done = [r.done_at[name] - r.fired_at for r in mine if name in r.done_at]
        unfinished = len(mine) - len(done)
        hours = st.pod_seconds / 3600
        rows = [
            ("runs with work", len(mine)),
            ("unfinished at the end", unfinished),
            ("wait for a worker p50/p95/max s", _three(start)),
            ("fire to done p50/p95/max s", _three(done)),
            ("worker-hours", round(hours, 2)),
            ("replicas max", max(n for _, n in st.replicas)),
        ]
        for key, value in rows:
            print(f"  {key:<32} {value}")
        figures[f"worker_hours_{name}"] = round(hours, 2)
        figures[f"replicas_max_{name}"] = max(n for _, n in st.replicas)
        figures[f"wait_p95_s_{name}"] = round(percentile(start, 95), 1)
        figures[f"done_p95_s_{name}"] = round(percentile(done, 95), 1)
        figures[f"unfinished_runs_{name}"] = unfinished
    every = [max(r.done_at.values()) - r.fired_at for r in runs if r.done_at]
    figures["runs"] = len(runs)
    figures["run_done_p95_s"] = round(percentile(every, 95), 1)
    figures["wait_p95_s"] = max(v for k, v in figures.items() if k.startswith("wait_p95_s_"))
    return figures


def _three(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{percentile(values, 50):.0f} / {percentile(values, 95):.0f} / {max(values):.0f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2 h day, smaller measurement")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--step", type=float, default=5.0, help="simulated seconds per step")
    p.add_argument("--scale", type=int, default=1, help="job counts (and accounts) multiplier")
    p.add_argument("--profiles-every", type=float, default=PROFILE.sweep_interval_s)
    p.add_argument("--websites-every", type=float, default=WEBSITE.sweep_interval_s)
    p.add_argument("--job-interval", type=float, help="jobs' interval_s (default: the seed's)")
    p.add_argument("--http-jobs", type=int, default=200)
    p.add_argument("--browser-jobs", type=int, default=20)
    p.add_argument("--http-threads", type=int, default=16, help="per pod: processes x threads")
    p.add_argument("--browser-threads", type=int, default=4, help="per pod: processes x threads")
    p.add_argument("--browser-slots", type=int, default=2, help="Selenium slots (demo: 2)")
    p.add_argument("--browser-ratio", type=float, default=10.0,
                   help="without chromedriver: browser rate = http rate / this")  # fmt: skip
    p.add_argument("--no-browser", action="store_true", help="do not measure the browser class")
    p.add_argument("--timeout", type=float, default=300.0, help="per measured run, seconds")
    # The defaults are deploy/kubernetes's small overlay (base/scaling.yaml, workers.yaml).
    p.add_argument(
        "--http-value",
        type=float,
        default=16.0,
        help="KEDA target messages per http replica (its processes x threads)",
    )
    p.add_argument(
        "--browser-value", type=float, default=4.0, help="KEDA target messages per browser replica"
    )
    p.add_argument("--window", type=float, default=660.0, help="HPA scale-down window, s")
    p.add_argument("--activation", type=float, default=0.0)
    p.add_argument("--polling", type=float, default=15.0)
    p.add_argument("--cooldown", type=float, default=900.0)
    p.add_argument("--http-min", type=int, default=1)
    p.add_argument("--http-max", type=int, default=4)
    p.add_argument("--browser-min", type=int, default=0)
    p.add_argument("--browser-max", type=int, default=2)
    p.add_argument("--startup", type=float, default=20.0, help="pod start to consuming, s")
    p.add_argument(
        "--host-delay", type=float, default=1.0, help="CRAWLSCHED_HOST_DELAY_S (default 1.0)"
    )
    # The manifests read the management API, whose `messages` counts ready and unacked.
    p.add_argument("--metric", choices=("ready", "ready+unacked"), default="ready+unacked")
    args = p.parse_args()
    if args.quick:
        args.hours = min(args.hours, 2.0)
        args.http_jobs, args.browser_jobs = min(args.http_jobs, 60), min(args.browser_jobs, 6)

    started = time.perf_counter()
    measured = measure(args)
    measure_s = time.perf_counter() - started
    print("== measured (same run) ==")
    for name, m in measured.items():
        print(f"  {name:<8} {json.dumps({k: v for k, v in m.items()}, default=str)}")

    def rule(value: float, low: int, high: int) -> keda.KedaRule:
        return keda.KedaRule(
            value=value, activation_value=args.activation, polling_interval_s=args.polling,
            cooldown_period_s=args.cooldown, min_replicas=low, max_replicas=high,
            scale_down_window_s=args.window,
        )  # fmt: skip

    classes = {
        "http": sim.WorkerClass(
            "http", rule(args.http_value, args.http_min, args.http_max), args.http_threads,
            measured["http"]["jobs_per_s_per_thread"], args.startup, args.metric,
        ),
        "browser": sim.WorkerClass(
            "browser", rule(args.browser_value, args.browser_min, args.browser_max), args.browser_threads,
            measured["browser"]["jobs_per_s_per_thread"], args.startup, args.metric,
        ),
    }  # fmt: skip
    groups = demo_groups(args.scale, args.job_interval)
    accounts = demo_accounts(args.scale)
    slots = args.browser_slots * args.scale
    print(f"\n== the day: {args.hours:g} h, {sum(g.count for g in groups)} jobs "
          f"(scale {args.scale}), accounts {accounts}, browser slots {slots} ==")  # fmt: skip
    for g in groups:
        print(f"  {g.collection:<9} {g.media:<10} {g.task:<16} {g.count:>6} jobs  "
              f"{g.worker_class:<7} login={g.need_login!s:<5} batch_limit={g.batch_limit}")  # fmt: skip
    sim_started = time.perf_counter()
    result = sim.simulate(
        groups,
        {PROFILE.collection: args.profiles_every, WEBSITE.collection: args.websites_every},
        classes, accounts, slots, args.hours * 3600, args.step,
    )  # fmt: skip
    sim_s = time.perf_counter() - sim_started
    figures = report(result, 3600.0)
    pacing = host_pacing(groups, measured["http"]["requests_per_job"], args.host_delay)
    print(
        f"\n== host pacing (not in the model): share of each host's time that "
        f"{measured['http']['requests_per_job']} requests/job (measured) at one request start "
        f"per {args.host_delay:g} s need; above 1 no replica count keeps up =="
    )
    for media, share in pacing.items():
        print(f"  {media:<10} {share}")
    figures["host_pacing_max_share"] = max(pacing.values(), default=0.0)
    figures.update(
        {
            "bench": "scaling",
            "hours": args.hours,
            "scale": args.scale,
            "measured_jobs_per_s_per_thread_http": round(
                measured["http"]["jobs_per_s_per_thread"], 3
            ),
            "measured_jobs_per_s_per_thread_browser": round(
                measured["browser"]["jobs_per_s_per_thread"], 3
            ),
            "browser_rate": measured["browser"].get("derived", "measured"),
            "measure_s": round(measure_s, 1),
            "simulate_s": round(sim_s, 1),
        }
    )
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
