"""Events on the real RabbitMQ exchange `crawlsched.events`, and webhook deliveries.

A consumer of our own binds a queue to the topic exchange before anything happens and reads
what arrives; a local HTTP server plays the webhook receiver and fails the first attempts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pika
import pytest
from dramatiq import Worker

from crawlsched.events import EXCHANGE, emit
from crawlsched.planning.run_names import ENDED
from crawlsched.runtime import Runtime, get_runtime
from tests.conftest import _broker_for, settings_for_tests
from tests.support.waiting import wait_for
from tests.support.webhook_receiver import WebhookReceiver
from tests.test_admission_flow import SLOW, _fire_profiles, _setup, _twitter_jobs

SCHEDULE_LIFE = [
    "ScheduleCreated",
    "ScheduleUpdated",
    "SchedulePaused",
    "ScheduleUnpaused",
    "ScheduleStopped",
    "ScheduleDeleted",
]


class EventConsumer:
    """An exclusive queue bound to every routing key of the exchange."""

    def __init__(self, url: str) -> None:
        self.connection = pika.BlockingConnection(pika.URLParameters(url))
        self.channel = self.connection.channel()
        self.channel.exchange_declare(exchange=EXCHANGE, exchange_type="topic", durable=True)
        self.queue = self.channel.queue_declare(queue="", exclusive=True).method.queue
        self.channel.queue_bind(queue=self.queue, exchange=EXCHANGE, routing_key="#")
        self.received: list[tuple[str, dict]] = []

    def drain(self) -> list[tuple[str, dict]]:
        while True:
            method, _, body = self.channel.basic_get(self.queue, auto_ack=True)
            if method is None:
                return self.received
            self.received.append((method.routing_key, json.loads(body)))

    def close(self) -> None:
        self.connection.close()


def _profile_run_ended(rt: Runtime) -> dict:
    def ended():
        run = rt.db.runs.find_one({"schedule_id": "sweep-profiles"})
        return run if run and run["state"] in ENDED else None

    return wait_for(ended, 60, "the profile run to end")


@pytest.fixture
def consumer(rabbitmq_url: str) -> Iterator[EventConsumer]:
    c = EventConsumer(rabbitmq_url)
    yield c
    c.close()


@pytest.fixture
def rabbitmq_slow_pipeline(rabbitmq_url: str, embedded_mongo_url: str) -> Iterator:
    """RabbitMQ broker with the slow test driver, and in-process worker threads."""
    broker = _broker_for(
        settings_for_tests(mongo_url=embedded_mongo_url, broker_url=rabbitmq_url, **SLOW)
    )
    worker = Worker(broker, worker_timeout=100, worker_threads=4)
    worker.start()
    yield broker
    worker.stop()
    broker.flush_all()
    broker.close()


@pytest.mark.rabbitmq
def test_consumer_receives_every_event_of_a_run_and_a_schedule_in_order(
    rabbitmq_slow_pipeline, consumer, monkeypatch
):
    # Given a sweep of 30 jobs on the real RabbitMQ
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.001")
    rt = get_runtime()
    _setup(rt, accounts=1)
    _twitter_jobs(rt, 30, 0, "u")

    # When a schedule lives its whole life through the schedule operations, and a sweep runs
    from crawlsched.flow import schedule_ops

    schedule_ops.create(rt, "nightly", {"interval_s": 86400, "collections": ["websites"]})
    schedule_ops.update(rt, "nightly", {"interval_s": 43200})
    schedule_ops.pause(rt, "nightly")
    schedule_ops.unpause(rt, "nightly")
    schedule_ops.stop(rt, "nightly")
    schedule_ops.delete(rt, "nightly")
    _fire_profiles(rt)
    run = _profile_run_ended(rt)

    # Then the consumer got each event once, each subject's in the order they happened
    def everything_arrived():
        stored = rt.db.activity.count_documents({})
        return len(consumer.drain()) >= stored and consumer.received

    received = wait_for(everything_arrived, 30, "every stored event on the exchange")
    stored = [e["event_id"] for e in rt.db.activity.find({}).sort("_id", 1)]
    # Each stored event once. (Events emitted by different worker threads at the same moment
    # may reach the exchange in either order; each subject's own events keep theirs, below.)
    assert sorted(body["event_id"] for _, body in received) == sorted(stored)
    # Each with its id as the message's too, for consumers that drop duplicates by it
    assert all(body["_id"] == body["event_id"] for _, body in received)
    schedule = [(k, b["event"]) for k, b in received if b.get("schedule_id") == "nightly"]
    assert [e for _, e in schedule] == SCHEDULE_LIFE
    assert [k for k, _ in schedule] == [
        "schedule.created",
        "schedule.updated",
        "schedule.paused",
        "schedule.unpaused",
        "schedule.stopped",
        "schedule.deleted",
    ]
    life = [(k, b["event"]) for k, b in received if b.get("run_id") == run["_id"]]
    assert life == [("run.started", "RunStarted"), ("run.finished", "RunFinished")]
    finished = next(
        b for _, b in received if b.get("event") == "RunFinished" and b["run_id"] == run["_id"]
    )
    assert finished["counts"] == {"succeeded": 30}


def test_emit_stores_the_event_and_survives_a_broker_that_is_down(embedded_mongo_url):
    from structlog.testing import capture_logs

    # Given a runtime whose broker URL points at a port nobody listens on
    rt = Runtime(
        settings_for_tests(
            mongo_url=embedded_mongo_url, broker_url="amqp://guest:guest@127.0.0.1:9/"
        )
    )

    # When an event is emitted
    with capture_logs() as logs:
        emit(rt, "RunStopped", run_id="r1")

    # Then it is stored, pending in the outbox for the relay, the failed publish is a logged
    # warning, and nothing was raised
    (event,) = rt.db.activity.find({})
    assert (event["event"], event["outbox"], event["publish_tries"]) == ("RunStopped", "pending", 1)
    assert event["publish_after"] > event["at"]
    (warning,) = [entry for entry in logs if entry["event"] == "event_publish_deferred"]
    assert warning["log_level"] == "warning" and warning["event_name"] == "RunStopped"


def test_webhook_delivered_exactly_once_after_failed_attempts(stub_pipeline, monkeypatch):
    # Given a schedule asking for webhooks on finished/failed runs, and a receiver that
    # answers 500 twice before it accepts
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.001")
    broker, worker = stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=1)
    _twitter_jobs(rt, 10, 0, "u")
    with WebhookReceiver(failures=2) as receiver:
        rt.db.schedules.update_one(
            {"_id": "sweep-profiles"},
            {"$set": {"notify": {"webhook": receiver.url, "on": ["finished", "failed"]}}},
        )

        # When the sweep runs to its end
        _fire_profiles(rt)
        wait_for(receiver.delivered, 60, "the webhook to be accepted")
        broker.join("crawlsched.notify")
        worker.join()

        # Then it was tried three times and accepted once, all under one idempotency key
        assert [p["status"] for p in receiver.posts] == [500, 500, 200]
        (delivery,) = list(rt.db.webhook_deliveries.find({}))
        assert {p["key"] for p in receiver.posts} == {delivery["_id"]}
        assert (delivery["state"], delivery["attempts"]) == ("delivered", 3)
        body = receiver.delivered()[0]["body"]
        assert (body["event"], body["counts"]) == ("RunFinished", {"succeeded": 10})

        # And a redelivered message sends nothing more
        from crawlsched.actors.notifier import deliver_webhook

        deliver_webhook.send(delivery["_id"])
        broker.join("crawlsched.notify")
        worker.join()
        assert len(receiver.posts) == 3
    # The website sweep has no notify field: it sent nothing
    assert rt.db.webhook_deliveries.count_documents({}) == 1


def test_webhook_not_sent_for_a_result_the_schedule_did_not_ask_for(stub_pipeline, monkeypatch):
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.001")
    stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=1)
    _twitter_jobs(rt, 5, 0, "boom")  # every job fails: the run fails
    with WebhookReceiver() as receiver:
        rt.db.schedules.update_one(
            {"_id": "sweep-profiles"},
            {"$set": {"notify": {"webhook": receiver.url, "on": ["finished"]}}},
        )
        _fire_profiles(rt)
        run = _profile_run_ended(rt)
    assert run["result"] == "failed"

    # The event is stored right after the run's end: poll for it rather than race it
    def events() -> list[str]:
        return [e["event"] for e in rt.db.activity.find({"run_id": run["_id"]})]

    wait_for(lambda: "RunFailed" in events(), 30, "the RunFailed event")
    assert events()[-1] == "RunFailed"
    assert rt.db.webhook_deliveries.count_documents({}) == 0 and receiver.posts == []
