"""Fire lag: from a fire time to its plan message sent, with N schedules due at the same moment.

N cron schedules (default 1,000) all fire at the same second T (the start of a minute, 10 to
70 s ahead), the worst burst "due in the same minute" can be. The real path: a clock thread
sends `tick` every --interval seconds to the real RabbitMQ (a vhost of its own, deleted
after), one in-process dramatiq worker runs the `tick` actor (`fire_due` with the
compare-and-set per schedule) on the embedded store, and a broker middleware notes when each
`plan_crawls` message is enqueued. Lag = enqueue time - T.

  lag_p50_s, lag_p99_s        over the N plan messages
  p50_over_interval, p99_over_interval   lag / clock interval: a tick lands somewhere in the
                               interval, so about 0.5 and 1.0 plus the time to fire N schedules
  burst_s                     first to last plan message of the burst (the ticker's own cost)

    .venv/bin/python benchmarks/bench_fire_lag.py [--schedules 1000] [--interval 5]

Last line: JSON with the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dramatiq  # noqa: E402

# Messages on RabbitMQ are signed (the settings refuse it without a key).
BENCH_SIGNING_KEY = "bench-signing-key-" + "b" * 32


class PlanSendTimes(dramatiq.Middleware):
    """Wall time at which each plan_crawls message was enqueued, by its fire time."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, float]] = []
        self.lock = threading.Lock()

    def after_enqueue(self, broker, message, delay):
        if message.actor_name == "plan_crawls":
            with self.lock:
                self.sent.append((message.args[1], time.time()))


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=5.0, help="clock interval, seconds")
    args = parser.parse_args()

    from crawlsched.brokers import setup_broker
    from crawlsched.flow import schedule_ops
    from crawlsched.runtime import get_runtime
    from crawlsched.settings import Settings
    from crawlsched.store.client import drop_embedded
    from tests.support.rabbit import TestVhost

    vhost = TestVhost().create()
    url = "mongomock://bench-fire-lag"
    drop_embedded(url)
    stop = threading.Event()
    try:
        settings = Settings(
            mongo_url=url,
            broker_url=vhost.url,
            message_signing_key=BENCH_SIGNING_KEY,
            clock_interval_s=args.interval,
            log_level="WARNING",
            log_format="json",
        )
        broker = setup_broker(settings)
        capture = PlanSendTimes()
        broker.add_middleware(capture)
        import crawlsched.actors  # noqa: F401
        from crawlsched.actors import ticker

        rt = get_runtime()
        rt.create_indexes()
        now = datetime.now(UTC)
        fire_at = (now + timedelta(seconds=70)).replace(second=0, microsecond=0)
        cron = f"{fire_at.minute} {fire_at.hour} * * *"
        for i in range(args.schedules):
            schedule_ops.create(rt, f"lag-{i:04d}", {"cron": cron, "collections": ["websites"]})
        worker = dramatiq.Worker(broker, worker_threads=1, queues={"crawlsched.ticks"})
        worker.start()

        def clock() -> None:  # what `crawlsched clock` does
            while not stop.is_set():
                ticker.tick.send()
                stop.wait(args.interval)

        threading.Thread(target=clock, daemon=True).start()
        deadline = fire_at.timestamp() + args.interval + 120
        while len(capture.sent) < args.schedules and time.time() < deadline:
            time.sleep(0.2)
        stop.set()
        worker.stop()
    finally:
        stop.set()
        vhost.delete()
        drop_embedded(url)

    sent = capture.sent
    if len(sent) < args.schedules:
        print(f"only {len(sent)} of {args.schedules} plan messages were sent")
        return 1
    target = fire_at.timestamp()
    lags = sorted(at - target for _, at in sent)
    figures = {
        "schedules": args.schedules,
        "clock_interval_s": args.interval,
        "plans_sent": len(sent),
        "distinct_fire_times": len({f for f, _ in sent}),
        "lag_p50_s": round(percentile(lags, 50), 3),
        "lag_p99_s": round(percentile(lags, 99), 3),
        "burst_s": round(lags[-1] - lags[0], 3),
        "p50_over_interval": round(percentile(lags, 50) / args.interval, 3),
        "p99_over_interval": round(percentile(lags, 99) / args.interval, 3),
    }
    for key, value in figures.items():
        print(f"{key:>20}  {value}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
