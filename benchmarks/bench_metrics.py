"""Metrics overhead and exporter scrape time.

    .venv/bin/python benchmarks/bench_metrics.py [--jobs 3000] [--rounds 4] [--scrapes 30]

(1) Overhead: the crawlsched flow end to end (N due jobs of bench_pipeline's workload, driver
    noop, pools big enough that nothing waits; one `tick` to the run finished) on the StubBroker
    and the embedded store, in-process worker with 8 threads, with metrics OFF and ON in
    alternating rounds of the same run. ON is what a `dramatiq` worker process does at boot
    (`WorkerMetrics.after_process_boot`): prometheus-client in multiprocess mode (mmap files),
    dramatiq's Prometheus middleware and crawlsched's counters. Headline: `slowdown` = median
    ON time / median OFF time - 1 (target <= 5 %). The stub broker is far cheaper than RabbitMQ,
    so the share metrics take here is an upper bound of their share in production. As the
    rounds' spread on a shared machine can exceed 5 %, it also prints a bound that does not
    depend on it: metric operations per job (from the messages per job) times their cost.
(2) Scrape: after (1) two forked processes of one group run one more ON round each, so the
    directory holds two processes' files with every series the flow produces; then the real exporter
    (`crawlsched.metrics.worker.serve`, in its own process) is fetched over HTTP `--scrapes`
    times. Figures: median ms per scrape and the number of series.
(3) Store gauges: one `StoreCollector.collect()` (the clock's exporter) over a store holding the
    N due jobs: median ms (embedded store: context only) and MongoDB commands per scrape (the
    figure that carries over to a real server).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import _workload as w
import httpx
from bench_pipeline import add_pools

from crawlsched import metrics
from crawlsched.brokers import setup_broker
from crawlsched.demo.node import free_port
from crawlsched.metrics.worker import WorkerMetrics
from crawlsched.planning.run_names import run_id_for
from crawlsched.resources.secrets import generate_key
from crawlsched.runtime import Runtime, set_runtime
from crawlsched.settings import Settings
from crawlsched.store.counting import CommandCounter

TARGET_SLOWDOWN = 0.05
SECRET_KEY = generate_key()


def seed(rt: Runtime, n: int) -> str:
    ref = w.reference(driver_class="noop", batch_limit=w.BATCH_LIMIT)
    now = w.utc_now()
    rt.create_indexes()
    rt.reference.load(ref)
    add_pools(rt, ref, n)
    rt.db.raw["profiles"].insert_many(w.job_docs(n, ref, now))
    fire_at = (now - timedelta(seconds=1)).replace(microsecond=0)
    rt.db.raw["schedules"].insert_one(
        {"_id": "bench", "kind": "sweep", "collections": ["profiles"], "interval_s": 3600,
         "anchor": fire_at, "next_fire_at": fire_at, "enabled": True}
    )  # fmt: skip
    return run_id_for("bench", fire_at)


def one_round(n: int, metrics_on: bool, metrics_dir: Path, label: str) -> float:
    """Seconds from the tick to the run finished."""
    import dramatiq

    settings = Settings(
        mongo_url=f"mongomock://bench-metrics-{label}",
        broker_url="stub://",
        metrics_dir=metrics_dir,
        log_level="WARNING",
        secret_key=SECRET_KEY,
    )
    broker = setup_broker(settings)
    import crawlsched.actors  # noqa: F401  (declares the actors on this broker)
    from crawlsched.actors.ticker import tick

    metrics.disable()
    if metrics_on:
        boot = WorkerMetrics(settings)
        broker.add_middleware(boot)
        boot.after_process_boot(broker)
    rt = Runtime(settings)
    set_runtime(rt)
    run_id = seed(rt, n)
    worker = dramatiq.Worker(broker, worker_timeout=50, worker_threads=8)
    worker.start()
    try:
        started = time.perf_counter()
        tick.send()
        while (rt.runs.get(run_id) or {}).get("state") != "finished":
            if time.perf_counter() - started > 600:
                raise TimeoutError(f"round {label}: the run did not finish in 600 s")
            time.sleep(0.02)
        return time.perf_counter() - started
    finally:
        worker.stop()
        broker.close()
        metrics.disable()


def _group_process(n: int, metrics_dir: str) -> None:
    one_round(n, True, Path(metrics_dir), f"group-{os.getpid()}")


def scrape_times(metrics_dir: Path, scrapes: int) -> tuple[float, int]:
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "CRAWLSCHED_METRICS_DIR": str(metrics_dir)}
    env["CRAWLSCHED_METRICS_ADDRESS"] = address
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    exporter = subprocess.Popen(
        [sys.executable, "-c", "from crawlsched.metrics.worker import serve; serve()"],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://{address}/metrics", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        times, body = [], ""
        with httpx.Client() as client:
            for _ in range(scrapes):
                started = time.perf_counter()
                body = client.get(f"http://{address}/metrics").text
                times.append((time.perf_counter() - started) * 1000)
        series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
        return w.median(times), series
    finally:
        exporter.terminate()
        exporter.wait(timeout=20)


def _op_cost(metrics_dir: str, ops: int, out) -> None:
    """In a fresh process (multiprocess mode needs the variable before the import): µs per
    labelled counter increment and per histogram observation, written to the mmap files."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    from prometheus_client import CollectorRegistry, Counter, Histogram

    registry = CollectorRegistry()
    counter = Counter("bench_ops_total", "", ["task", "media"], registry=registry)
    histogram = Histogram("bench_seconds", "", ["category"], registry=registry)
    started = time.perf_counter()
    for i in range(ops):
        counter.labels("profile", f"m{i % 20}").inc()
    inc_us = (time.perf_counter() - started) / ops * 1e6
    started = time.perf_counter()
    for i in range(ops):
        histogram.labels(f"c{i % 4}").observe(i % 100)
    out.put((inc_us, (time.perf_counter() - started) / ops * 1e6))


def op_cost(ops: int = 20_000) -> tuple[float, float]:
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    child = context.Process(target=_op_cost, args=(tempfile.mkdtemp(), ops, out))
    child.start()
    result = out.get(timeout=300)
    child.join(timeout=60)
    return result


def messages_per_job(metrics_dir: Path, jobs: int) -> float:
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(metrics_dir))
    processed = sum(
        sample.value
        for family in registry.collect()
        for sample in family.samples
        if sample.name == "dramatiq_messages_total"
    )
    return processed / jobs


def store_gauges(n: int) -> tuple[float, float]:
    from crawlsched.metrics.store_gauges import StoreCollector

    counter = CommandCounter()
    rt = Runtime(
        Settings(mongo_url="mongomock://bench-metrics-gauges", secret_key=SECRET_KEY),
        counter=counter,
    )
    seed(rt, n)
    collector = StoreCollector(lambda: rt.db, rt.now)
    times = []
    counter.reset()
    for _ in range(5):
        started = time.perf_counter()
        list(collector.collect())
        times.append((time.perf_counter() - started) * 1000)
    return w.median(times), counter.boundary_total / 5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each, OFF and ON")
    parser.add_argument("--scrapes", type=int, default=30)
    args = parser.parse_args()
    metrics_dir = Path(tempfile.mkdtemp(prefix="bench-metrics-"))

    # Warm-up (imports, first-use caches), not counted.
    one_round(args.jobs, False, metrics_dir, "warm-up")
    times: dict[str, list[float]] = {"off": [], "on": []}
    for i in range(args.rounds):
        order = ("off", "on") if i % 2 == 0 else ("on", "off")
        for mode in order:
            times[mode].append(one_round(args.jobs, mode == "on", metrics_dir, f"{mode}{i}"))
    off, on = w.median(times["off"]), w.median(times["on"])
    slowdown = on / off - 1

    # Two forked processes of one group (same parent, as under the `dramatiq` CLI), one after
    # the other: the first clears the directory, both leave their files.
    for _ in range(2):
        child = multiprocessing.get_context("fork").Process(
            target=_group_process, args=(args.jobs, str(metrics_dir))
        )
        child.start()
        child.join(timeout=600)
        if child.exitcode != 0:
            raise RuntimeError(f"a worker-group process failed (exit code {child.exitcode})")
    files = sorted(p.name for p in metrics_dir.glob("*.db"))
    scrape_ms, series = scrape_times(metrics_dir, args.scrapes)
    # A bound that does not depend on this machine's noise: metric operations per job times
    # their cost. Per message dramatiq's middleware makes 4 (in-progress +1 and -1, a count,
    # a duration); crawlsched makes at most 3 calls per message it handles (a batch's jobs
    # finished, parked/admitted, a report's lag), each at most 2 operations: 10 per message.
    per_job = messages_per_job(metrics_dir, 2 * args.jobs)
    inc_us, observe_us = op_cost()
    bound = 10 * per_job * max(inc_us, observe_us) / (off / args.jobs * 1e6)
    gauges_ms, gauge_commands = store_gauges(args.jobs)

    w.print_table(
        f"metrics overhead, N={args.jobs} jobs, {args.rounds} rounds each (median)",
        [
            ("metrics OFF: s per run", f"{off:.2f}  {[round(t, 2) for t in times['off']]}"),
            ("metrics ON:  s per run", f"{on:.2f}  {[round(t, 2) for t in times['on']]}"),
            ("slowdown (ON/OFF - 1)", f"{slowdown:+.1%} (target <= {TARGET_SLOWDOWN:.0%})"),
            ("messages per job (two group processes)", f"{per_job:.3f}"),
            ("µs per counter inc / histogram observe", f"{inc_us:.1f} / {observe_us:.1f}"),
            ("bound: metric ops' share of a job's time", f"{bound:.3%} (10 ops per message)"),
            ("exporter: processes' files", f"{len(files)} ({', '.join(files)})"),
            ("exporter: series per scrape", series),
            ("exporter: ms per scrape (median)", f"{scrape_ms:.1f}"),
            ("store gauges: ms per scrape (embedded)", f"{gauges_ms:.1f}"),
            ("store gauges: MongoDB commands per scrape", f"{gauge_commands:.0f}"),
        ],
    )
    w.print_json(
        {
            "jobs": args.jobs,
            "off_s": round(off, 3),
            "on_s": round(on, 3),
            "slowdown": round(slowdown, 4),
            "messages_per_job": round(per_job, 4),
            "inc_us": round(inc_us, 2),
            "observe_us": round(observe_us, 2),
            "ops_share_bound": round(bound, 6),
            "scrape_ms": round(scrape_ms, 2),
            "series": series,
            "process_files": len(files),
            "store_gauges_ms": round(gauges_ms, 2),
            "store_gauge_commands": gauge_commands,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
