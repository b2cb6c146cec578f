"""The outboxes that make a run's end reach everyone at least once: events on the real
RabbitMQ exchange (publisher confirms, a connection the broker closed, a broker that was
away), webhook deliveries whose message was lost, and run ends a crash cut short.

Each is judged by what the other side received (a consumer of the exchange, a webhook
receiver), not by what the sender says.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from structlog.testing import capture_logs

from crawlsched import events
from crawlsched.errors import WebhookFailed
from crawlsched.events import emit, relay_events
from crawlsched.flow.coordination import ANNOUNCE_AFTER_S, relay_announcements
from crawlsched.flow.notifying import deliver, relay_webhooks
from crawlsched.planning.retention import EXPIRE_AT
from crawlsched.runtime import Runtime
from crawlsched.store.deliveries import RELAY_AFTER_S
from crawlsched.store.embedded.ttl import sweep_expired
from tests.conftest import settings_for_tests
from tests.support.claimed import Clock
from tests.support.factories import NOW
from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import wait_for
from tests.support.webhook_receiver import WebhookReceiver
from tests.test_events_and_webhooks import EventConsumer


@pytest.fixture
def consumer(rabbitmq_url: str) -> Iterator[EventConsumer]:
    c = EventConsumer(rabbitmq_url)
    yield c
    c.close()


def _runtime(mongo_url: str, broker_url: str, clock: Clock | None = None) -> Runtime:
    settings = settings_for_tests(mongo_url=mongo_url, broker_url=broker_url)
    rt = Runtime(settings, clock=clock.now) if clock else Runtime(settings)
    rt.create_indexes()
    return rt


def _received(consumer: EventConsumer, n: int) -> list[tuple[str, dict]]:
    return wait_for(lambda: len(consumer.drain()) >= n and consumer.received, 30, f"{n} events")


def _our_connections() -> list[str]:
    listing = subprocess.run(
        ["rabbitmqctl", "-q", "list_connections", "pid", "client_properties"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    return [
        line.split("\t")[0] for line in listing.splitlines() if events.connection_name() in line
    ]


@pytest.mark.rabbitmq
@pytest.mark.parametrize("noticed_by", ["idle_reopen", "failed_publish"])
def test_an_event_still_arrives_after_the_broker_closed_the_idle_publishing_connection(
    rabbitmq_url, embedded_mongo_url, consumer, monkeypatch, noticed_by
):
    # Given a process that published one event, whose connection RabbitMQ then closed while
    # it sat idle (as an idle connection without heartbeats is closed). The publisher finds
    # out either because it was idle long enough to reopen before use, or — idle for less
    # than that — because the publish on the dead connection fails and it tries once afresh.
    if noticed_by == "failed_publish":
        monkeypatch.setattr(events, "IDLE_REOPEN_S", 1e9)
    else:
        monkeypatch.setattr(events, "IDLE_REOPEN_S", 0.0)
    rt = _runtime(embedded_mongo_url, rabbitmq_url)
    emit(rt, "ScheduleCreated", schedule_id="s1")
    assert [key for key, _ in _received(consumer, 1)] == ["schedule.created"]
    (connection,) = wait_for(_our_connections, 30, "the publisher's connection")
    subprocess.run(
        ["rabbitmqctl", "-q", "close_connection", connection, "closed by the test while idle"],
        check=True, timeout=60,
    )  # fmt: skip
    wait_for(lambda: not _our_connections(), 30, "the connection to be closed")

    # When the next event is emitted
    with capture_logs() as logs:
        emit(rt, "RunFinished", event_id="r1:RunFinished", run_id="r1")
    (reopened,) = [e["reason"] for e in logs if e["event"] == "event_connection_reopened"]
    # (pika may also have seen the close frame already: "closed")
    expected = ("idle",) if noticed_by == "idle_reopen" else ("publish failed", "closed")
    assert reopened.startswith(expected)

    # Then it arrives, once, with its stable id, and its outbox row says it was confirmed
    received = _received(consumer, 2)
    assert [(key, body["event_id"]) for key, body in received[1:]] == [
        ("run.finished", "r1:RunFinished")
    ]
    (doc,) = rt.db.activity.find({"event_id": "r1:RunFinished"})
    assert doc["outbox"] == "sent"


@pytest.mark.rabbitmq
def test_an_event_written_while_the_broker_was_away_is_relayed_once_it_is_back(
    rabbitmq_url, embedded_mongo_url, consumer
):
    # Given a process whose way to RabbitMQ goes through a proxy that is cut
    parts = urlsplit(rabbitmq_url)
    proxy = TcpProxy(parts.port or 5672).start()
    via_proxy = urlunsplit(
        parts._replace(netloc=f"{parts.username}:{parts.password}@127.0.0.1:{proxy.port}")
    )
    rt = _runtime(embedded_mongo_url, via_proxy)
    proxy.cut()
    try:
        # When a run's end is emitted, and the relay tries while the broker is still away
        emit(rt, "RunFinished", event_id="r2:RunFinished", run_id="r2")
        rt.db.activity.update_one({}, {"$set": {"publish_after": rt.now()}})
        assert relay_events(rt) == 0

        # Then the event is kept pending with its error, and nothing arrived
        (doc,) = rt.db.activity.find({"event_id": "r2:RunFinished"})
        assert (doc["outbox"], doc["publish_tries"]) == ("pending", 2)
        assert doc["last_error"]
        assert consumer.drain() == []

        # When the broker is back and the backoff has passed
        proxy.start()
        rt.db.activity.update_one({}, {"$set": {"publish_after": rt.now()}})
        assert relay_events(rt) == 1

        # Then it arrives once, and a later relay sends nothing more
        received = _received(consumer, 1)
        assert [(k, b["event_id"], b["run_id"]) for k, b in received] == [
            ("run.finished", "r2:RunFinished", "r2")
        ]
        assert relay_events(rt) == 0
        assert rt.db.activity.find_one({})["outbox"] == "sent"
    finally:
        proxy.cut()
        events.publisher_for(via_proxy).close_quietly()


@pytest.mark.rabbitmq
def test_an_event_being_published_inline_is_not_relayed_until_its_claim_has_passed(
    rabbitmq_url, embedded_mongo_url, consumer, monkeypatch
):
    # Given an event whose writer died after storing it, before its inline publish
    clock = Clock(NOW)
    rt = _runtime(embedded_mongo_url, rabbitmq_url, clock)
    with monkeypatch.context() as m:
        m.setattr(events, "_publish", lambda *a, **k: True)
        emit(rt, "RunStarted", event_id="r5:RunStarted", run_id="r5")

    # When the relay runs at once (as a tick racing a slow inline publish would)
    # Then it leaves the event to its publisher: nothing is sent twice
    assert relay_events(rt) == 0
    assert rt.db.activity.find_one({})["outbox"] == "pending"

    # When the claim has passed with the event still pending
    clock.advance(events.PUBLISH_CLAIM_S + 1)
    # Then the relay sends it, once, and a second relay finds nothing to send
    assert relay_events(rt) == 1
    assert relay_events(rt) == 0
    received = _received(consumer, 1)
    assert [(k, b["event_id"]) for k, b in received] == [("run.started", "r5:RunStarted")]
    assert rt.db.activity.find_one({})["outbox"] == "sent"
    events.publisher_for(rabbitmq_url).close_quietly()


def test_the_same_run_end_emitted_twice_is_one_event(embedded_mongo_url):
    rt = _runtime(embedded_mongo_url, "stub://")
    first = emit(rt, "RunFinished", event_id="r3:RunFinished", run_id="r3", planned=1)
    second = emit(rt, "RunFinished", event_id="r3:RunFinished", run_id="r3", planned=1)
    assert first == second == "r3:RunFinished"
    assert rt.db.activity.count_documents({}) == 1
    # On the in-process broker there is no exchange: nothing waits in the outbox
    assert "outbox" not in rt.db.activity.find_one({})


def _webhook_schedule(rt: Runtime, url: str) -> None:
    rt.db.schedules.insert_one({"_id": "hooked", "notify": {"webhook": url}})


def _ended_run(rt: Runtime, run_id: str, counts: dict) -> None:
    """A run whose end was written (the compare-and-set), as a crash just after it leaves it."""
    rt.runs.open(run_id, "hooked", NOW, rt.now())
    rt.runs.close_planning(run_id, sum(counts.values()), {}, rt.now())
    rt.db.runs.update_one({"_id": run_id}, {"$set": {"counts": counts, "outstanding": 0}})
    assert rt.runs.finish(run_id, rt.now(), "finished", "succeeded")


def test_a_run_end_a_crash_cut_short_is_announced_by_the_relay_once(embedded_mongo_url):
    # Given a run whose end was written but not announced (the process died right after)
    clock = Clock(NOW)
    rt = _runtime(embedded_mongo_url, "stub://", clock)
    _webhook_schedule(rt, "http://127.0.0.1:9/hook")
    _ended_run(rt, "hooked@1", {"succeeded": 2})
    notified: list[str] = []

    # When the relay looks before the grace has passed, it leaves it to the live finisher
    assert relay_announcements(rt, notified.append) == 0

    # When it looks after the grace
    clock.advance(ANNOUNCE_AFTER_S + 1)
    assert relay_announcements(rt, notified.append) == 1

    # Then the end event and the webhook delivery exist once, and the delivery was sent on
    (event,) = rt.db.activity.find({"run_id": "hooked@1"})
    assert (event["event"], event["event_id"]) == ("RunFinished", "hooked@1:RunFinished")
    assert notified == ["hooked@1:RunFinished"]
    assert rt.db.webhook_deliveries.count_documents({}) == 1
    # And a second look finds nothing owed
    clock.advance(ANNOUNCE_AFTER_S + 1)
    assert relay_announcements(rt, notified.append) == 0
    assert rt.db.activity.count_documents({}) == 1


def test_a_webhook_whose_message_was_lost_is_sent_by_the_relay_until_it_is_answered_2xx(
    embedded_mongo_url,
):
    # Given a run end whose delivery was created but whose message died with its process, and
    # a receiver that is down (answers 500) for its first two tries
    clock = Clock(NOW)
    rt = _runtime(embedded_mongo_url, "stub://", clock)
    with WebhookReceiver(failures=2) as receiver, httpx.Client() as client:
        _webhook_schedule(rt, receiver.url)
        _ended_run(rt, "hooked@2", {"succeeded": 1})
        clock.advance(ANNOUNCE_AFTER_S + 1)
        relay_announcements(rt, lambda delivery_id: None)  # the message is lost

        def send(delivery_id: str) -> None:
            with contextlib.suppress(WebhookFailed):  # the relay tries again after a backoff
                deliver(rt, delivery_id, client)

        # When the relay runs as the ticks go by
        tries = []
        for _ in range(12):
            tries.append(relay_webhooks(rt, send))
            clock.advance(RELAY_AFTER_S)
            if receiver.delivered():
                break

        # Then it waited for the message first, retried with backoff, and stopped once
        # accepted: three POSTs under one idempotency key carrying the event's id
        assert [p["status"] for p in receiver.posts] == [500, 500, 200]
        assert {p["key"] for p in receiver.posts} == {"hooked@2:RunFinished"}
        assert receiver.delivered()[0]["body"]["event_id"] == "hooked@2:RunFinished"
        assert tries[0] == 0 and sum(tries) == 3
        assert 0 in tries[2:]  # the second failure's backoff was longer than one wait
        clock.advance(3600)
        assert relay_webhooks(rt, send) == 0
        delivery = rt.db.webhook_deliveries.find_one({})
        assert (delivery["state"], delivery["attempts"]) == ("delivered", 3)


class _HeldPublisher:
    """Records what it is asked to publish; the first publish waits until `go` is set."""

    def __init__(self) -> None:
        self.sent: list[str | None] = []
        self.publishing, self.go = threading.Event(), threading.Event()

    def publish(self, key: str, body: bytes, message_id: str | None = None) -> None:
        self.sent.append(message_id)
        if len(self.sent) == 1:
            self.publishing.set()
            self.go.wait(30)


def test_two_relays_that_read_one_pending_event_at_once_publish_it_once(
    embedded_mongo_url, monkeypatch
):
    # Given a pending event whose inline publish never happened, its claim passed
    clock = Clock(NOW)
    rt = _runtime(embedded_mongo_url, "stub://", clock)
    publisher = _HeldPublisher()
    rt.__dict__["event_publisher"] = publisher
    with monkeypatch.context() as m:
        m.setattr(events, "_publish", lambda *a, **k: True)
        emit(rt, "RunStarted", event_id="r9:RunStarted", run_id="r9")
    clock.advance(events.PUBLISH_CLAIM_S + 1)
    # When two tickers relay at once: both read it pending, then one claims it and publishes
    # (slowly) while the other tries to claim it
    other = threading.Thread(target=relay_events, args=(rt,))
    real_db = rt.db

    class ReadThenOtherRelayClaims:
        def __init__(self, cursor) -> None:
            self.cursor = cursor

        def sort(self, *args, **kwargs):
            self.cursor = self.cursor.sort(*args, **kwargs)
            return self

        def limit(self, n: int):
            self.cursor = self.cursor.limit(n)
            return self

        def __iter__(self):
            read = list(self.cursor)
            rt.__dict__["db"] = real_db  # the other relay reads as usual
            clock.advance(1)  # and a moment later
            other.start()
            assert publisher.publishing.wait(30)
            return iter(read)

    class FirstReadHeld:
        def __getattr__(self, name: str):
            collection = getattr(real_db, name)
            if name != "activity":
                return collection

            class Activity:
                def __getattr__(self, method: str):
                    return getattr(collection, method)

                def find(self, *args, **kwargs):
                    return ReadThenOtherRelayClaims(collection.find(*args, **kwargs))

            return Activity()

    rt.__dict__["db"] = FirstReadHeld()
    first = relay_events(rt)
    publisher.go.set()
    other.join(30)
    # Then the event went out once: the claim is a compare-and-set on its due time
    assert publisher.sent == ["r9:RunStarted"] and first == 0


def test_an_event_emitted_twice_is_published_once(embedded_mongo_url):
    # Given a deployment with an exchange (a publisher that records what it is asked to send)
    rt = _runtime(embedded_mongo_url, "stub://")
    publisher = _HeldPublisher()
    publisher.go.set()
    rt.__dict__["event_publisher"] = publisher
    # When a run's end is emitted twice (a redelivered report ends it again, say)
    emit(rt, "RunFinished", event_id="r4:RunFinished", run_id="r4")
    emit(rt, "RunFinished", event_id="r4:RunFinished", run_id="r4")
    # Then it is stored once and published once, and nothing is left owed
    assert publisher.sent == ["r4:RunFinished"]
    assert rt.db.activity.count_documents({}) == 1
    assert rt.db.activity.find_one({})["outbox"] == "sent"
    assert relay_events(rt) == 0


class _AwayPublisher:
    """An exchange that is away: every publish fails."""

    def publish(self, key: str, body: bytes, message_id: str | None = None) -> None:
        raise ConnectionError("the broker is away")


def test_an_event_still_owed_outlives_its_retention_until_it_is_sent(embedded_mongo_url):
    # Given an event written while the exchange was away
    clock = Clock(NOW)
    rt = _runtime(embedded_mongo_url, "stub://", clock)
    rt.__dict__["event_publisher"] = _AwayPublisher()
    emit(rt, "RunFinished", event_id="r6:RunFinished", run_id="r6")
    # When its retention has long passed and the store's TTL sweep runs
    clock.advance(rt.settings.retain_activity_s * 10)
    sweep_expired(rt.db.raw, clock.now())
    # Then it is still there, owed: nothing dates it for expiry before it is sent
    doc = rt.db.activity.find_one({"event_id": "r6:RunFinished"})
    assert doc is not None and doc["outbox"] == "pending" and EXPIRE_AT not in doc
    # And once the exchange is back and the relay sent it, it is kept for its retention only
    publisher = _HeldPublisher()
    publisher.go.set()
    rt.__dict__["event_publisher"] = publisher
    clock.advance(3600)
    assert relay_events(rt) == 1 and publisher.sent == ["r6:RunFinished"]
    sent = rt.db.activity.find_one({"event_id": "r6:RunFinished"})
    assert sent[EXPIRE_AT] == rt.retention.activity_until(clock.now())


def test_a_delivery_still_owed_outlives_its_retention_and_one_delivered_is_never_taken_again(
    embedded_mongo_url,
):
    clock = Clock(NOW)
    rt = _runtime(embedded_mongo_url, "stub://", clock)
    deliveries = rt.deliveries
    deliveries.create("d1", {"run_id": "r7", "kind": "webhook"}, clock.now())
    # A delivery not yet sent is never dated for expiry, however long it waits
    clock.advance(rt.settings.retain_deliveries_s * 10)
    sweep_expired(rt.db.raw, clock.now())
    assert EXPIRE_AT not in (deliveries.get("d1") or {"gone": True, EXPIRE_AT: None})
    # Taken for an attempt and delivered, it is never taken again (nor posted again)
    assert deliveries.take("d1", clock.now(), 30) is not None
    deliveries.delivered("d1", 200, clock.now())
    clock.advance(60)
    assert deliveries.take("d1", clock.now(), 30) is None
    assert deliveries.due(clock.now()) == []
