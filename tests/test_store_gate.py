"""WaitForMongo on a StubBroker with real worker threads: after a message loses the store, no
further message is processed until a ping succeeds; the outage is logged once per backoff step.

The store is played by a ping that fails a set number of times (the middleware's logic is what
is tested here; tests/test_dead_services.py covers a real closed MongoDB port)."""

from __future__ import annotations

import dramatiq
import pymongo.errors
import structlog
from dramatiq import Worker
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Retries

from crawlsched.brokers.store_gate import WaitForMongo


def test_worker_pauses_until_mongodb_answers_and_logs_once_per_step():
    outage = {"pings_left_failing": 4}
    processed: list[int] = []
    slept: list[float] = []

    def ping():
        if outage["pings_left_failing"] > 0:
            outage["pings_left_failing"] -= 1
            raise pymongo.errors.ServerSelectionTimeoutError("down")

    def sleep(seconds: float) -> bool:
        slept.append(seconds)
        # nothing may be processed while the store is down
        assert processed == [0], processed
        return False

    gate = WaitForMongo(ping, first_step_s=1, max_step_s=4, sleep=sleep)
    broker = StubBroker(middleware=[gate, Retries(max_retries=3, min_backoff=10, max_backoff=10)])
    broker.emit_after("process_boot")

    @dramatiq.actor(broker=broker, actor_name="gated_work", queue_name="gated")
    def work(n: int) -> None:
        if n == 0 and 0 not in processed:
            processed.append(0)
            raise pymongo.errors.AutoReconnect("connection lost mid-message")
        processed.append(n)

    worker = Worker(broker, worker_timeout=50, worker_threads=1)
    with structlog.testing.capture_logs() as logs:
        worker.start()
        try:
            for n in range(6):  # one thread: 1..5 come after 0 has lost the store
                work.send(n)
            broker.join("gated", fail_fast=True, timeout=30_000)
            worker.join()
        finally:
            worker.stop()

    # Then: the retry of message 0 and the five others all ran after the store came back
    assert sorted(processed) == [0, 0, 1, 2, 3, 4, 5]
    assert slept == [1, 2, 4, 4]  # capped backoff
    events = [e["event"] for e in logs]
    assert events.count("mongodb_lost_pausing_worker") == 1
    assert events.count("mongodb_unreachable_waiting") == 4  # one per step, not per message
    assert events.count("mongodb_back_resuming_worker") == 1
    assert not gate.down
