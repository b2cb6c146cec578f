"""A message that fails names what failed: each one dead-lettered (rejected) is logged with its
actor, queue, message id and reason, which stays in its options; an ack or a reject that fails
on RabbitMQ is logged with the same names (dramatiq's own lines name none of them)."""

from __future__ import annotations

import dramatiq
import pytest
import structlog

from crawlsched.brokers.guards import REASON_OPTION


def _dead_lettered(logs: list[dict]) -> list[dict]:
    return [e for e in logs if e["event"] == "message_dead_lettered"]


def test_a_message_out_of_retries_is_named_with_its_reason(stub_broker, stub_worker):
    @dramatiq.actor(broker=stub_broker, actor_name="fail_always", queue_name="names", max_retries=0)
    def fail_always() -> None:
        raise ValueError("the store said no")

    with structlog.testing.capture_logs() as logs:
        message = fail_always.send()
        stub_broker.join("names", fail_fast=False)
        stub_worker.join()

    [event] = _dead_lettered(logs)
    assert event["log_level"] == "warning"
    assert (event["actor"], event["queue"]) == ("fail_always", "names")
    assert event["message_id"] == message.message_id
    assert event["reason"] == "ValueError: the store said no"
    assert event["retries"] == 1
    [dead] = stub_broker.dead_letters
    assert dead.options[REASON_OPTION] == "ValueError: the store said no"
    assert "ValueError: the store said no" in dead.options["traceback"]  # dramatiq's own


def test_a_message_past_its_age_limit_is_named_with_its_reason(stub_broker, stub_worker):
    @dramatiq.actor(broker=stub_broker, actor_name="too_old", queue_name="names", max_age=60_000)
    def too_old() -> None:  # pragma: no cover - never run
        pass

    with structlog.testing.capture_logs() as logs:
        message = stub_broker.enqueue(too_old.message().copy(message_timestamp=1))  # 1970
        stub_broker.join("names", fail_fast=False)
        stub_worker.join()

    [event] = _dead_lettered(logs)
    assert (event["actor"], event["message_id"]) == ("too_old", message.message_id)
    assert event["reason"] == "SkipMessage: Message age limit exceeded"


def test_a_message_the_gate_refused_is_named_once(stub_broker, stub_worker):
    @dramatiq.actor(broker=stub_broker, actor_name="takes_one", queue_name="names")
    def takes_one(x: int) -> None:  # pragma: no cover - never run
        pass

    with structlog.testing.capture_logs() as logs:
        takes_one.send(1, 2)
        stub_broker.join("names", fail_fast=False)
        stub_worker.join()

    [event] = _dead_lettered(logs)
    assert event["reason"].startswith("arguments do not fit takes_one")
    assert stub_broker.dead_letters[0].options[REASON_OPTION] == event["reason"]


@pytest.mark.rabbitmq
def test_an_ack_on_a_channel_gone_is_named(rabbitmq_broker):
    # Given a message delivered on one consumer's channel, and that consumer gone (the
    # connection lost: dramatiq opens another consumer and acks on it)
    @dramatiq.actor(broker=rabbitmq_broker, actor_name="acked_late", queue_name="names-ack")
    def acked_late() -> None:  # pragma: no cover - never run
        pass

    sent = acked_late.send()
    first = rabbitmq_broker.consume("names-ack", timeout=5_000)
    message = next(first)
    assert message is not None and message.message_id == sent.message_id
    first.close()
    second = rabbitmq_broker.consume("names-ack", timeout=1_000)

    # When the worker acks it on the new consumer
    with structlog.testing.capture_logs() as logs:
        second.ack(message)
    second.close()

    # Then the failure names the message
    [event] = [e for e in logs if e["event"] == "message_ack_failed"]
    assert (event["actor"], event["queue"]) == ("acked_late", "names-ack")
    assert event["message_id"] == sent.message_id
    assert event["reason"].startswith("delivery tag unknown")
