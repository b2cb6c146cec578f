"""Pipeline benchmark on the real RabbitMQ: raw dramatiq no-op throughput vs crawlsched end to end.

    .venv/bin/python benchmarks/bench_pipeline.py [--jobs 10000] [--amqp-url amqp://…]
        [--threads 8] [--no-cli-baseline] [--timeout 600]

(a)  raw dramatiq: N no-op messages to a queue of their own (bench.noop.<pid>), sent from the
     main thread while ONE in-process dramatiq.Worker (8 threads) drains them; messages/s from
     the first send to the last message processed. The baseline of the headline ratio.
(a') the same N no-ops drained by the real CLI (`dramatiq … --processes 1 --threads 8`) in its
     own process: context only (it does not share a GIL with the sender).
(b)  crawlsched: N due jobs (driver noop, batch_limit 100, 4 categories, 20 media, pools big
     enough that nothing starves) on the embedded store, from one `tick` message to the run
     finished, drained by the same kind of in-process worker (the embedded store lives in this
     process, so the worker must too).

(b') the same as (b) without publisher confirms (crawlsched's default is on; bare dramatiq's,
     and so (a)'s, is off), on a store of its own: the cost of confirms as (b) ÷ (b').

Headline: `ratio` = jobs/s of (b) ÷ messages/s of (a) (aim >= 1.0), broker messages per job
(target <= 0.1), MongoDB commands per job at the store boundary (target <= 0.2), and where the
worker threads spent their time: store, broker (enqueue), actor code.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import _workload as w
import dramatiq
import mongomock
import pika

from crawlsched.brokers import middleware as crawlsched_middleware
from crawlsched.brokers import setup_broker
from crawlsched.planning.run_names import run_id_for
from crawlsched.resources.rules import AccountLimits
from crawlsched.resources.secrets import generate_key
from crawlsched.runtime import Runtime, set_runtime
from crawlsched.settings import Settings
from crawlsched.store import client as store_client
from crawlsched.store import counting
from crawlsched.store.counting import CommandCounter, CountingCollection

# Messages on RabbitMQ are signed (the settings refuse it without a key).
BENCH_SIGNING_KEY = "bench-signing-key-" + "b" * 32

TARGET_MESSAGES_PER_JOB = 0.1
TARGET_COMMANDS_PER_JOB = 0.2
TARGET_RATIO = 1.0
BENCH_DIR = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
AMQP_URL = ["amqp://guest:guest@127.0.0.1:5672/%2F"]


# -- where the worker threads spend their time ---------------------------------------------------


class Probe(dramatiq.Middleware):
    """Per actor: messages, thread-seconds inside the actor, and how much of it was store/broker.

    A thread-local context is opened in before_process_message and closed after; store and
    enqueue wrappers add their own elapsed time to whatever context is open on their thread.
    Times are thread-seconds (8 threads: they can add up to 8x the wall time), and include
    waiting for the GIL and, for the store, for the embedded store's lock.
    """

    def __init__(self) -> None:
        self.tls = threading.local()
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.by_actor: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
            self.outside: dict[str, float] = defaultdict(float)
            self.enqueued = 0
            self.enqueued_by: dict[str, int] = defaultdict(int)
            self.store_by_method: dict[str, float] = defaultdict(float)

    def add(self, what: str, seconds: float) -> None:
        ctx = getattr(self.tls, "ctx", None)
        if ctx is None:
            with self.lock:
                self.outside[what] += seconds
        else:
            ctx[what] = ctx.get(what, 0.0) + seconds

    def before_process_message(self, broker, message) -> None:
        self.tls.ctx = {"started": time.perf_counter()}

    def after_process_message(self, broker, message, *, result=None, exception=None) -> None:
        ctx = getattr(self.tls, "ctx", None)
        self.tls.ctx = None
        if ctx is None:
            return
        total = time.perf_counter() - ctx.pop("started")
        with self.lock:
            row = self.by_actor[message.actor_name]
            row["messages"] += 1
            row["total"] += total
            row["errors"] += 1 if exception is not None else 0
            for key, value in ctx.items():
                row[key] += value

    after_skip_message = after_process_message


PROBE = Probe()


class TimedRLock:
    """The embedded store's lock, timing how long callers wait for it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def __enter__(self):
        started = time.perf_counter()
        self._lock.acquire()
        PROBE.add("store_lock_wait", time.perf_counter() - started)
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()

    def acquire(self, *a, **k):
        return self._lock.acquire(*a, **k)

    def release(self) -> None:
        self._lock.release()


class TimedCursor:
    """Cursors are lazy: time their iteration as store time too."""

    def __init__(self, cursor: Any, label: str) -> None:
        self._cursor = cursor
        self._label = label

    def __iter__(self):
        return self

    def __next__(self):
        started = time.perf_counter()
        try:
            return next(self._cursor)
        finally:
            elapsed = time.perf_counter() - started
            PROBE.add("store", elapsed)
            if getattr(PROBE.tls, "ctx", None) is not None:
                with PROBE.lock:
                    PROBE.store_by_method[self._label] += elapsed

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._cursor, attr)
        if not callable(value):
            return value

        def call(*args, **kwargs):
            started = time.perf_counter()
            try:
                result = value(*args, **kwargs)
            finally:
                PROBE.add("store", time.perf_counter() - started)
            return self if result is self._cursor else result

        return call


def instrument_store() -> None:
    original = CountingCollection.__getattr__

    def timed_getattr(self, attr: str) -> Any:
        value = original(self, attr)
        if attr.startswith("_") or attr in counting._LOCAL or not callable(value):
            return value

        def timed(*args, **kwargs):
            ctx = getattr(PROBE.tls, "ctx", None)
            waited = ctx.get("store_lock_wait", 0.0) if ctx is not None else 0.0
            started = time.perf_counter()
            try:
                result = value(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                PROBE.add("store", elapsed)
                if ctx is not None:  # worker threads only; time holding the store, not waiting
                    held = elapsed - (ctx.get("store_lock_wait", 0.0) - waited)
                    with PROBE.lock:
                        PROBE.store_by_method[f"{self._collection.name}.{attr}"] += held
            if "Cursor" in type(result).__name__:
                return TimedCursor(result, f"{self._collection.name}.{attr} (cursor)")
            return result

        return timed

    CountingCollection.__getattr__ = timed_getattr


def instrument_broker(broker: dramatiq.Broker) -> None:
    original = broker.enqueue

    def enqueue(message, *, delay=None):
        started = time.perf_counter()
        try:
            return original(message, delay=delay)
        finally:
            PROBE.add("broker", time.perf_counter() - started)
            with PROBE.lock:
                PROBE.enqueued += 1
                PROBE.enqueued_by[message.actor_name] += 1

    broker.enqueue = enqueue


# -- helpers --------------------------------------------------------------------------------------


def wait_until(predicate, timeout: float, what: str, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def delete_queues(amqp_url: str, queue: str) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        channel = connection.channel()
        for name in (queue, f"{queue}.DQ", f"{queue}.XQ"):
            channel.queue_delete(name)
    finally:
        connection.close()


def start_worker(broker: dramatiq.Broker, threads: int) -> dramatiq.Worker:
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=100)
    worker.start()
    return worker


def stop_worker(broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
    worker.stop(timeout=30_000)
    # Worker.start() adds a middleware of its own and never takes it off: the next worker
    # on this broker would find two.
    broker.middleware[:] = [m for m in broker.middleware if type(m).__name__ != "_WorkerMiddleware"]


def forget_queue(broker: dramatiq.Broker, queue: str) -> None:
    """Take a queue off the broker's declared set, so later workers do not consume it."""
    for name in (queue, f"{queue}.DQ", f"{queue}.XQ"):
        broker.queues.discard(name)
        broker.queues_pending.discard(name)


# -- (a) raw dramatiq -------------------------------------------------------------------------------


def raw_in_process(broker: dramatiq.Broker, n: int, threads: int, timeout: float) -> dict:
    done = threading.Event()
    lock = threading.Lock()
    processed = [0]

    def noop() -> None:
        with lock:
            processed[0] += 1
            if processed[0] >= n:
                done.set()

    queue = f"bench.noop.{os.getpid()}"
    actor = dramatiq.actor(noop, actor_name=f"bench_noop_{os.getpid()}", queue_name=queue,
                           max_retries=0)  # fmt: skip
    broker.declare_queue(queue, ensure=True)
    PROBE.reset()
    worker = start_worker(broker, threads)
    try:
        started = time.perf_counter()
        for _ in range(n):
            actor.send()
        sent = time.perf_counter()
        if not done.wait(timeout):
            raise TimeoutError(f"(a) processed {processed[0]} of {n} within {timeout:.0f}s")
        finished = time.perf_counter()
    finally:
        stop_worker(broker, worker)
        broker.actors.pop(actor.actor_name, None)
        forget_queue(broker, queue)
        delete_queues(AMQP_URL[0], queue)
    return {
        "messages": n,
        "seconds": finished - started,
        "send_seconds": sent - started,
        "messages_per_s": n / (finished - started),
        "queue": queue,
    }


def raw_cli(amqp_url: str, settings: Settings, n: int, threads: int, timeout: float) -> dict:
    queue = f"bench.noop.cli.{os.getpid()}"
    mark = tempfile.NamedTemporaryFile(prefix="bench-noop-", delete=False)  # noqa: SIM115
    mark.close()
    env = dict(os.environ, BENCH_QUEUE=queue, BENCH_MARK_FILE=mark.name, BENCH_AMQP_URL=amqp_url)
    log = tempfile.TemporaryFile()  # noqa: SIM115
    process = subprocess.Popen(
        [str(VENV_BIN / "dramatiq"), "_noop_cli_actor", "--path", str(BENCH_DIR),
         "--processes", "1", "--threads", str(threads)],
        env=env, stdout=log, stderr=log, start_new_session=True,
    )  # fmt: skip
    # A broker of our own to send with (same middleware), so the in-process workers of (a) and
    # (b) never see this queue.
    sender = dramatiq.brokers.rabbitmq.RabbitmqBroker(
        url=amqp_url, middleware=crawlsched_middleware(settings)
    )
    try:
        params = pika.URLParameters(amqp_url)

        def consuming() -> bool:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"dramatiq CLI exited early:\n{log.read().decode()[-2000:]}")
            connection = pika.BlockingConnection(params)
            try:
                return (
                    connection.channel().queue_declare(queue, passive=True).method.consumer_count
                    > 0
                )
            except pika.exceptions.ChannelClosedByBroker:
                return False
            finally:
                if connection.is_open:
                    connection.close()

        wait_until(consuming, 60, "the dramatiq CLI worker to consume", interval=0.2)
        sender.declare_queue(queue, ensure=True)
        started = time.perf_counter()
        for _ in range(n):
            sender.enqueue(dramatiq.Message(queue_name=queue, actor_name="bench_noop_cli",
                                            args=(), kwargs={}, options={}))  # fmt: skip
        sent = time.perf_counter()
        wait_until(lambda: os.path.getsize(mark.name) >= n, timeout, "(a') to drain", 0.01)
        finished = time.perf_counter()
    finally:
        with contextlib_suppress():
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        sender.close()
        log.close()
        os.unlink(mark.name)
        delete_queues(amqp_url, queue)
    return {
        "messages": n,
        "seconds": finished - started,
        "send_seconds": sent - started,
        "messages_per_s": n / (finished - started),
    }


class contextlib_suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], ProcessLookupError)


def cleanup(broker: dramatiq.Broker) -> None:
    """Purge what is left. The main thread's connection sat idle through (b) (pika's blocking
    connection answers no heartbeats while we sleep), so RabbitMQ may have dropped it: retry once
    on a fresh connection."""
    flush(broker)
    try:
        broker.close()
    except pika.exceptions.AMQPError:
        pass


# -- (b) crawlsched end to end ----------------------------------------------------------------------


def add_pools(rt: Runtime, ref: Any, n: int) -> None:
    """Accounts and browser slots enough that no batch waits: this measures throughput.

    The node is registered as healthy without a browser behind it: the `noop` driver never asks
    for a browser, so none is opened (sessions open on a driver's first use).
    """
    now = rt.now()
    for m in ref.media:
        if any(t.need_login for t in m.tasks.values()):
            for i in range(10):  # a media has 6 batches at N=10,000: none waits for an account
                rt.inventory.add_account(m.name, f"bench{i}", "not-a-secret", AccountLimits(), now)
    rt.inventory.add_node("http://127.0.0.1:9", "chromedriver", max(64, n // 100), now)


def flush(broker: dramatiq.Broker) -> None:
    """Purge the queues; a connection that sat idle through a long set-up (pika's blocking
    connection answers no heartbeats while we do other work) may have been dropped by RabbitMQ,
    so retry once on a fresh connection."""
    for attempt in (1, 2):
        try:
            broker.flush_all()
            return
        except pika.exceptions.AMQPError:
            if attempt == 2:
                raise
            for attr in ("channel", "connection"):
                try:
                    delattr(broker, attr)
                except Exception:  # noqa: BLE001  (already gone is fine)
                    pass


def crawlsched_flow(
    broker: dramatiq.Broker, settings: Settings, n: int, threads: int, timeout: float
) -> dict:
    from crawlsched.actors.ticker import tick

    counter = CommandCounter()
    rt = Runtime(settings, counter=counter)
    set_runtime(rt)
    ref = w.reference(driver_class="noop", batch_limit=w.BATCH_LIMIT)
    now = w.utc_now()
    rt.create_indexes()
    rt.reference.load(ref)
    add_pools(rt, ref, n)
    raw_db = rt.db.raw
    raw_db["profiles"].insert_many(w.job_docs(n, ref, now))
    fire_at = (now - timedelta(seconds=1)).replace(microsecond=0)
    raw_db["schedules"].insert_one(
        {"_id": "bench", "kind": "sweep", "collections": ["profiles"], "interval_s": 3600,
         "anchor": fire_at, "next_fire_at": fire_at, "enabled": True}
    )  # fmt: skip
    run_id = run_id_for("bench", fire_at)
    # Polling goes through its own counter so it does not inflate the flow's command count.
    poll_runs = store_client.open_database(
        settings.mongo_url, settings.mongo_db, CommandCounter()
    ).runs

    def finished() -> bool:
        run = poll_runs.find_one({"_id": run_id}, {"state": 1})
        return bool(run) and run["state"] == "finished"

    flush(broker)
    counter.reset()
    PROBE.reset()
    worker = start_worker(broker, threads)
    try:
        started = time.perf_counter()
        tick.send()
        try:
            wait_until(finished, timeout, "(b) the run to finish", interval=0.02)
        except (AssertionError, TimeoutError):
            run = poll_runs.find_one({"_id": run_id}, {"reports": 0})
            print("(b) did not finish:", run, file=sys.stderr)
            print("    waiting batches:", rt.waiting.all()[:3], file=sys.stderr)
            print("    jobs by state:", rt.jobs("profiles").summary(), file=sys.stderr)
            raise
        elapsed = time.perf_counter() - started
    finally:
        stop_worker(broker, worker)
    run = poll_runs.find_one({"_id": run_id}, {"reports": 0})
    return {
        "jobs": n,
        "seconds": elapsed,
        "jobs_per_s": n / elapsed,
        "run": run,
        "commands": counter.boundary_total,
        "commands_by_method": dict(counter.boundary),
        "messages": PROBE.enqueued,
        "messages_by_actor": dict(PROBE.enqueued_by),
        "by_actor": {k: dict(v) for k, v in PROBE.by_actor.items()},
        "outside": dict(PROBE.outside),
        "store_by_method": dict(PROBE.store_by_method),
    }


def with_confirms(broker: dramatiq.Broker, on: bool) -> None:
    """Publisher confirms on or off for channels opened from now on; this thread's channel
    (opened in the other mode) is dropped. Worker threads are new for every phase."""
    broker.confirm_delivery = on
    del broker.connection


def fresh_store(settings: Settings, tag: str) -> Settings:
    """The same settings on an embedded store of its own, with the timed lock."""
    url = f"mongomock://bench-pipeline-{os.getpid()}-{tag}"
    store_client._embedded_clients[url] = (mongomock.MongoClient(tz_aware=True), TimedRLock())
    return settings.model_copy(update={"mongo_url": url})


def crawlsched_cli_workers(
    amqp_url: str, mongo_url: str, n: int, processes: int, threads: int, timeout: float
) -> dict:
    """(c) crawlsched on a MongoDB server, drained by `dramatiq crawlsched.actors` processes."""
    sys.path.insert(0, str(BENCH_DIR.parent))
    from crawlsched.actors.ticker import tick
    from tests.support.workers import (
        TEST_SECRET_KEY,
        TEST_SIGNING_KEY,
        DramatiqWorkers,
        crawlsched_env,
    )

    key = TEST_SECRET_KEY  # what crawlsched_env gives the worker processes
    db_name = f"bench_pipeline_{os.getpid()}"
    settings = Settings(
        mongo_url=mongo_url,
        mongo_db=db_name,
        broker_url=amqp_url,
        message_signing_key=TEST_SIGNING_KEY,  # and this
        default_batch_limit=w.BATCH_LIMIT,
        secret_key=key,
    )
    rt = Runtime(settings)
    ref = w.reference(driver_class="noop", batch_limit=w.BATCH_LIMIT)
    now = w.utc_now()
    # Jobs before indexes: the multi-process test server checks a unique index by scanning,
    # so loading under it is quadratic (a real server builds the index once either way).
    rt.db.raw["profiles"].insert_many(w.job_docs(n, ref, now))
    rt.create_indexes()
    rt.reference.load(ref)
    add_pools(rt, ref, n)
    fire_at = (now - timedelta(seconds=1)).replace(microsecond=0)
    rt.db.raw["schedules"].insert_one(
        {"_id": "bench", "kind": "sweep", "collections": ["profiles"], "interval_s": 3600,
         "anchor": fire_at, "next_fire_at": fire_at, "enabled": True}
    )  # fmt: skip
    run_id = run_id_for("bench", fire_at)
    env = crawlsched_env(
        amqp_url,
        mongo_url,
        db_name,
        CRAWLSCHED_DEFAULT_BATCH_LIMIT=str(w.BATCH_LIMIT),
        CRAWLSCHED_LOG_LEVEL="WARNING",
    )
    try:
        with DramatiqWorkers(env, processes=processes, threads=threads) as workers:
            wait_until(lambda: consumers(amqp_url, "crawlsched.ticks") >= processes, 120,
                       "(c) the CLI workers to consume")  # fmt: skip
            started = time.perf_counter()
            tick.send()

            def finished() -> bool:
                run = rt.db.raw["runs"].find_one({"_id": run_id}, {"state": 1})
                return bool(run) and run["state"] == "finished"

            try:
                wait_until(finished, timeout, "(c) the run to finish", interval=0.05)
            except (AssertionError, TimeoutError):
                print(workers.output()[-3000:])
                raise
            elapsed = time.perf_counter() - started
        run = rt.db.raw["runs"].find_one({"_id": run_id}, {"reports": 0})
    finally:
        rt.db.raw.client.drop_database(db_name)
    return {"jobs": n, "seconds": elapsed, "jobs_per_s": n / elapsed, "run": run}


def consumers(amqp_url: str, queue: str) -> int:
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        return connection.channel().queue_declare(queue, passive=True).method.consumer_count
    except pika.exceptions.ChannelClosedByBroker:
        return 0
    finally:
        if connection.is_open:
            connection.close()


# -- report -----------------------------------------------------------------------------------------


def split_rows(by_actor: dict[str, dict[str, float]]) -> tuple[list[tuple[str, Any]], dict]:
    rows: list[tuple[str, Any]] = []
    totals: dict[str, float] = defaultdict(float)
    header = f"{'msgs':>6} {'thread-ms':>10} {'store':>7} {'(lock wait)':>11} {'broker':>7} {'actor code':>10}"
    rows.append(("actor", header))
    for actor in sorted(by_actor, key=lambda a: -by_actor[a]["total"]):
        r = by_actor[actor]
        store, wait, brk = r.get("store", 0.0), r.get("store_lock_wait", 0.0), r.get("broker", 0.0)
        code = r["total"] - store - brk
        for key, value in (("total", r["total"]), ("store", store), ("wait", wait),
                           ("broker", brk), ("code", code), ("messages", r["messages"])):  # fmt: skip
            totals[key] += value
        t = r["total"] or 1e-9
        rows.append((f"  {actor}", f"{int(r['messages']):>6} {r['total'] * 1000:>10.1f} "
                     f"{store / t:>7.1%} {wait / t:>11.1%} {brk / t:>7.1%} {code / t:>10.1%}"))  # fmt: skip
    t = totals["total"] or 1e-9
    rows.append(("  ALL ACTORS", f"{int(totals['messages']):>6} {totals['total'] * 1000:>10.1f} "
                 f"{totals['store'] / t:>7.1%} {totals['wait'] / t:>11.1%} "
                 f"{totals['broker'] / t:>7.1%} {totals['code'] / t:>10.1%}"))  # fmt: skip
    split = {
        "thread_ms": round(totals["total"] * 1000, 1),
        "store_share": round(totals["store"] / t, 4),
        "store_lock_wait_share": round(totals["wait"] / t, 4),
        "broker_share": round(totals["broker"] / t, 4),
        "actor_code_share": round(totals["code"] / t, 4),
    }
    return rows, split


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per phase")
    parser.add_argument("--no-cli-baseline", action="store_true", help="skip (a')")
    parser.add_argument(
        "--mongo-url", help="(c): also run crawlsched with dramatiq CLI workers on this server"
    )
    parser.add_argument(
        "--mongoeco", action="store_true", help="(c) on a multi-process test server started here"
    )
    parser.add_argument("--server-jobs", type=int, default=1000, help="N for (c)")
    parser.add_argument("--processes", type=int, default=2, help="CLI worker processes for (c)")
    parser.add_argument(
        "--no-confirms-leg", action="store_true", help="skip (b'), (b) without publisher confirms"
    )
    args = parser.parse_args()
    n = args.jobs
    AMQP_URL[0] = args.amqp_url

    mongo_url = f"mongomock://bench-pipeline-{os.getpid()}"
    # Pre-create the embedded client with a lock that times its waits (same kind of lock).
    store_client._embedded_clients[mongo_url] = (mongomock.MongoClient(tz_aware=True), TimedRLock())
    settings = Settings(
        broker_url=args.amqp_url,
        message_signing_key=BENCH_SIGNING_KEY,
        mongo_url=mongo_url,
        mongo_db="bench",
        default_batch_limit=w.BATCH_LIMIT,
        log_level="WARNING",
        secret_key=generate_key(),
    )
    broker = setup_broker(settings)
    # Probing for the CLI's queue before it exists logs a 404 per try: not worth seeing.
    logging.getLogger("pika").setLevel(logging.ERROR)
    broker.add_middleware(PROBE)
    instrument_broker(broker)
    instrument_store()
    import crawlsched.actors  # noqa: F401  (declares the actors on this broker)

    for queue in list(broker.get_declared_queues()):
        broker.declare_queue(queue, ensure=True)
    broker.flush_all()

    figures: dict[str, Any] = {"benchmark": "pipeline", "jobs": n, "threads": args.threads}
    # (a) is bare dramatiq: its RabbitmqBroker's default, no publisher confirms.
    with_confirms(broker, False)
    a = raw_in_process(broker, n, args.threads, args.timeout)
    a_cli = None
    if not args.no_cli_baseline:
        a_cli = raw_cli(args.amqp_url, settings, n, args.threads, args.timeout)
    # (b) as crawlsched runs by default: every send confirmed. (b') the same without confirms,
    # on a store of its own: what confirms cost.
    b_off = None
    if not args.no_confirms_leg:
        b_off = crawlsched_flow(
            broker, fresh_store(settings, "noconfirm"), n, args.threads, args.timeout
        )
    with_confirms(broker, True)
    b = crawlsched_flow(broker, settings, n, args.threads, args.timeout)
    c = None
    server = None
    if args.mongoeco and not args.mongo_url:
        sys.path.insert(0, str(BENCH_DIR.parent))
        from tests.support.mongo_server import MongoecoServer

        server = MongoecoServer(start_timeout=60).start()
    try:
        if args.mongo_url or server is not None:
            url = args.mongo_url or server.url
            try:
                c = crawlsched_cli_workers(
                    args.amqp_url, url, args.server_jobs, args.processes, args.threads,
                    args.timeout,
                )  # fmt: skip
                c["backend"] = "mongoeco (multi-process test server)" if server else url
            except Exception as e:  # (a) and (b) are still worth their report
                print(f"(c) failed: {type(e).__name__}: {e}", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
        from tests.support import scratch

        scratch.cleanup(keep=False)  # the worker groups' logs (tests/support/scratch.py)
    cleanup(broker)

    run = b["run"] or {}
    counts = run.get("counts", {})
    ratio = b["jobs_per_s"] / a["messages_per_s"]
    msgs_per_job = b["messages"] / n
    cmds_per_job = b["commands"] / n
    rows: list[tuple[str, Any]] = [
        ("(a) raw dramatiq, in-process worker: messages/s", round(a["messages_per_s"], 1)),
        ("    N messages, seconds (first send to last processed)", f"{n}, {a['seconds']:.2f} s"),
        ("    of which sending (main thread, overlapping)", f"{a['send_seconds']:.2f} s"),
    ]
    if a_cli:
        rows += [
            (
                "(a') raw dramatiq, CLI worker process: messages/s",
                round(a_cli["messages_per_s"], 1),
            ),
            ("    vs (a)", f"{a_cli['messages_per_s'] / a['messages_per_s']:.2f}x"),
        ]
    rows += [
        ("(b) crawlsched tick -> run finished: jobs/s", round(b["jobs_per_s"], 1)),
        ("    N jobs, seconds", f"{n}, {b['seconds']:.2f} s"),
        (
            "    run state / planned / counts",
            f"{run.get('state')} / {run.get('planned')} / {counts}",
        ),
        (f"ratio = (b) jobs/s / (a) msgs/s  (aim >= {TARGET_RATIO})", round(ratio, 4)),
        (f"broker messages per job (target <= {TARGET_MESSAGES_PER_JOB})", round(msgs_per_job, 4)),
        ("    messages by actor", b["messages_by_actor"]),
        (f"MongoDB commands per job (target <= {TARGET_COMMANDS_PER_JOB})", round(cmds_per_job, 4)),
        ("    commands by method", b["commands_by_method"]),
        *(
            [
                ("(b') the same without publisher confirms: jobs/s", round(b_off["jobs_per_s"], 1)),
                (
                    "    cost of confirms: (b) jobs/s / (b') jobs/s",
                    round(b["jobs_per_s"] / b_off["jobs_per_s"], 3),
                ),
            ]
            if b_off
            else []
        ),
        ("run stages_ms (plan, crawl totals)", run.get("stages_ms")),
        ("run plan_stats", run.get("plan_stats")),
    ]
    if c is not None:
        c_counts = (c["run"] or {}).get("counts", {})
        c_ratio = c["jobs_per_s"] / (a_cli or a)["messages_per_s"]
        rows += [
            (f"(c) crawlsched, {args.processes} CLI worker processes on {c['backend']}: jobs/s",
             round(c["jobs_per_s"], 1)),
            ("    N jobs, seconds, counts", f"{c['jobs']}, {c['seconds']:.2f} s, {c_counts}"),
            ("    ratio (c) jobs/s / raw CLI msgs/s" if a_cli else "    ratio (c) / (a)",
             round(c_ratio, 4)),
        ]  # fmt: skip
        figures["server"] = {
            "backend": c["backend"],
            "jobs": c["jobs"],
            "jobs_per_s": round(c["jobs_per_s"], 1),
            "ratio": round(c_ratio, 4),
            "succeeded": c_counts.get("succeeded"),
        }
    w.print_table(f"pipeline, RabbitMQ, {args.threads} worker threads, N={n}", rows)
    split, split_figures = split_rows(b["by_actor"])
    w.print_table("(b) where worker threads spent their time (share of thread-ms per actor)", split)
    by_method = sorted(b["store_by_method"].items(), key=lambda kv: -kv[1])
    total_store = sum(v for _, v in by_method) or 1e-9
    w.print_table(
        "(b) store calls by collection.method (ms executing, lock wait excluded; top 8)",
        [(k, f"{v * 1000:10.1f} ms  {v / total_store:6.1%}") for k, v in by_method[:8]],
    )

    assert run.get("state") == "finished", run
    assert counts.get("succeeded") == n, f"expected {n} succeeded, got {counts}"
    figures.update(
        {
            "raw_msgs_per_s": round(a["messages_per_s"], 1),
            "raw_cli_msgs_per_s": round(a_cli["messages_per_s"], 1) if a_cli else None,
            "crawlsched_jobs_per_s": round(b["jobs_per_s"], 1),
            "crawlsched_jobs_per_s_without_confirms": round(b_off["jobs_per_s"], 1)
            if b_off
            else None,
            "confirms_cost_ratio": round(b["jobs_per_s"] / b_off["jobs_per_s"], 3)
            if b_off
            else None,
            "ratio": round(ratio, 3),
            "ratio_target": TARGET_RATIO,
            "messages_per_job": round(msgs_per_job, 5),
            "messages_per_job_target": TARGET_MESSAGES_PER_JOB,
            "commands_per_job": round(cmds_per_job, 5),
            "commands_per_job_target": TARGET_COMMANDS_PER_JOB,
            "messages": b["messages"],
            "commands": b["commands"],
            "stages_ms": run.get("stages_ms"),
            "split": split_figures,
            "meets": {
                "ratio": ratio >= TARGET_RATIO,
                "messages_per_job": msgs_per_job <= TARGET_MESSAGES_PER_JOB,
                "commands_per_job": cmds_per_job <= TARGET_COMMANDS_PER_JOB,
            },
        }
    )
    print()
    w.print_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
