"""The message gate (`brokers.guards.GuardMessages`) on its own: a signed message passes only
as it was signed, whatever part of it is changed, and the size and timestamp checks hold with
a signing key as well as without one.

No worker and no queue: the middleware's two hooks are called directly, on messages of an
actor declared on a StubBroker of the test's own.
"""

from __future__ import annotations

import hmac

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import SkipMessage

from crawlsched.brokers import guards
from crawlsched.brokers.guards import SIGNATURE_OPTION, GuardMessages

KEY = b"k" * 32


@pytest.fixture
def broker():
    broker = StubBroker()

    @dramatiq.actor(broker=broker, queue_name="gate")
    def report(payload: dict) -> None:  # pragma: no cover - never run
        pass

    @dramatiq.actor(broker=broker, queue_name="gate")
    def other(payload: dict) -> None:  # pragma: no cover - never run
        pass

    yield broker
    broker.close()


def _message(broker, payload=None, actor="report") -> dramatiq.Message:
    return broker.get_actor(actor).message(payload or {"run_id": "r@1", "dispatch_id": "d"})


def _signed(gate: GuardMessages, broker, message: dramatiq.Message) -> dramatiq.Message:
    gate.before_enqueue(broker, message, None)
    return message


def _verdict(gate: GuardMessages, broker, message: dramatiq.Message) -> str | None:
    """None if the gate lets the message through, else the reason it dead-letters it with."""
    proxy = dramatiq.broker.MessageProxy(message)
    try:
        gate.before_process_message(broker, proxy)
    except SkipMessage as skipped:
        assert proxy.failed, "a refused message must be failed (dead-lettered), not just skipped"
        return str(skipped)
    assert not proxy.failed
    return None


def test_a_signed_message_passes_and_its_copy_through_the_queue_too(broker):
    gate = GuardMessages(KEY)
    message = _signed(gate, broker, _message(broker))
    assert isinstance(message.options[SIGNATURE_OPTION], str)
    assert _verdict(gate, broker, message) is None
    # What a worker reads back from the queue: the encoded message, decoded.
    assert _verdict(gate, broker, dramatiq.Message.decode(message.encode())) is None
    # Options are outside the signature (retries rewrite them).
    assert _verdict(gate, broker, message.copy(options={**message.options, "retries": 3})) is None


TAMPERINGS = {
    "args": lambda m: m.copy(args=({"run_id": "r@2", "dispatch_id": "d"},)),
    "kwargs": lambda m: m.copy(kwargs={"extra": 1}),
    "actor_name": lambda m: m.copy(actor_name="other"),
    "message_id": lambda m: m.copy(message_id="another-id"),
    "signature_of_another_message": lambda m: m.copy(
        options={**m.options, SIGNATURE_OPTION: guards.signature(KEY, m.copy(message_id="x"))}
    ),
    "signature_under_another_key": lambda m: m.copy(
        options={**m.options, SIGNATURE_OPTION: guards.signature(b"j" * 32, m)}
    ),
    "signature_removed": lambda m: dramatiq.Message(
        queue_name=m.queue_name,
        actor_name=m.actor_name,
        args=m.args,
        kwargs=m.kwargs,
        options={k: v for k, v in m.options.items() if k != SIGNATURE_OPTION},
        message_id=m.message_id,
        message_timestamp=m.message_timestamp,
    ),
    "signature_not_a_string": lambda m: m.copy(
        options={**m.options, SIGNATURE_OPTION: [m.options[SIGNATURE_OPTION]]}
    ),
    "signature_empty": lambda m: m.copy(options={**m.options, SIGNATURE_OPTION: ""}),
}


@pytest.mark.parametrize("part", sorted(TAMPERINGS))
def test_a_signed_message_changed_in_any_part_is_dead_lettered(broker, part):
    gate = GuardMessages(KEY)
    tampered = TAMPERINGS[part](_signed(gate, broker, _message(broker)))
    assert _verdict(gate, broker, tampered) == "missing or bad signature"


def test_without_a_key_nothing_is_signed_and_a_signature_is_not_needed(broker):
    gate = GuardMessages(None)
    message = _signed(gate, broker, _message(broker))
    assert SIGNATURE_OPTION not in message.options
    assert _verdict(gate, broker, message) is None


@pytest.mark.parametrize("key", [KEY, None], ids=["signed", "unsigned"])
def test_the_size_limit_holds_with_and_without_a_signing_key(broker, key, monkeypatch):
    gate = GuardMessages(key)
    message = _signed(gate, broker, _message(broker, {"blob": "x" * 2000}))
    size = len(message.encode())
    # Exactly at the limit: accepted.
    monkeypatch.setattr(guards, "MAX_MESSAGE_BYTES", size)
    assert _verdict(gate, broker, message) is None
    # One byte over: refused, for its size, although its signature is good.
    monkeypatch.setattr(guards, "MAX_MESSAGE_BYTES", size - 1)
    assert _verdict(gate, broker, message) == f"message of {size} bytes exceeds {size - 1}"


def test_a_genuinely_signed_message_over_the_real_limit_is_dead_lettered(broker):
    gate = GuardMessages(KEY)
    message = _signed(gate, broker, _message(broker, {"blob": "x" * guards.MAX_MESSAGE_BYTES}))
    reason = _verdict(gate, broker, message)
    assert reason is not None and "bytes exceeds" in reason


@pytest.mark.parametrize("timestamp", [True, 1.5, "1", None])
def test_a_signed_message_with_a_bad_timestamp_is_dead_lettered(broker, timestamp):
    gate = GuardMessages(KEY)
    message = _signed(gate, broker, _message(broker)).copy(message_timestamp=timestamp)
    reason = _verdict(gate, broker, message)
    assert reason is not None and reason.startswith("message_timestamp is not an integer")


def test_arguments_the_actor_cannot_take_are_dead_lettered_even_when_signed(broker):
    gate = GuardMessages(KEY)
    message = _signed(gate, broker, broker.get_actor("report").message({"a": 1}, "extra"))
    reason = _verdict(gate, broker, message)
    assert reason is not None and reason.startswith("arguments do not fit report")


def test_the_signature_covers_id_actor_and_arguments_but_not_options(broker):
    message = _message(broker)
    base = guards.signature(KEY, message)
    assert guards.signature(KEY, message.copy(options={"retries": 9})) == base
    for changed in (
        message.copy(message_id="x"),
        message.copy(actor_name="other"),
        message.copy(args=({},)),
        message.copy(kwargs={"a": 1}),
    ):
        assert guards.signature(KEY, changed) != base
    assert guards.signature(b"j" * 32, message) != base


def test_a_dead_letter_is_logged_with_what_names_the_message_cut_short(broker):
    import structlog

    gate = GuardMessages(KEY)
    message = _signed(gate, broker, _message(broker)).copy(message_id="m" * 300)
    with structlog.testing.capture_logs() as logs:
        reason = _verdict(gate, broker, message)
    (event,) = [e for e in logs if e["event"] == "message_dead_lettered"]
    assert event["log_level"] == "warning"
    assert (event["actor"], event["queue"]) == ("report", "gate")
    assert event["message_id"] == "m" * 100
    assert event["reason"] == reason == "missing or bad signature"


def test_a_long_reason_is_logged_cut_to_500_characters(broker):
    import structlog

    with structlog.testing.capture_logs() as logs:
        guards.dead_letter(dramatiq.broker.MessageProxy(_message(broker)), "r" * 600)
    (event,) = logs
    assert event["reason"] == "r" * 500
    assert event["actor"] == "report"


def test_a_bad_timestamp_is_named_in_the_reason_cut_to_50_characters(broker):
    gate = GuardMessages(None)
    reason = _verdict(gate, broker, _message(broker).copy(message_timestamp="t" * 80))
    assert reason == f"message_timestamp is not an integer: {'t' * 50!r}"
    reason = _verdict(gate, broker, _message(broker).copy(message_timestamp=1.5))
    assert reason == "message_timestamp is not an integer: '1.5'"


def test_keyword_arguments_the_actor_cannot_take_are_dead_lettered(broker):
    gate = GuardMessages(None)
    message = broker.get_actor("report").message_with_options(
        args=(), kwargs={"payload": {}, "unexpected": 1}
    )
    reason = _verdict(gate, broker, message)
    assert reason is not None and reason.startswith("arguments do not fit report")
    fits = broker.get_actor("report").message_with_options(args=(), kwargs={"payload": {}})
    assert _verdict(gate, broker, fits) is None


@pytest.mark.parametrize(
    ("declared_on", "raised", "dead_lettered"),
    [
        ("actor", ValueError("no"), True),
        ("message", ValueError("no"), True),
        ("actor", KeyError("other"), False),
        (None, ValueError("no"), False),
    ],
)
def test_an_exception_an_actor_throws_on_purpose_is_dead_lettered_with_its_reason(
    declared_on, raised, dead_lettered
):
    import structlog

    broker = StubBroker()
    try:
        options = {"throws": (ValueError,)} if declared_on == "actor" else {}

        @dramatiq.actor(broker=broker, queue_name="gate", **options)
        def act(payload: dict) -> None:  # pragma: no cover - never run
            pass

        message = act.message({})
        if declared_on == "message":
            message = message.copy(options={"throws": (ValueError,)})
        proxy = dramatiq.broker.MessageProxy(message)
        with structlog.testing.capture_logs() as logs:
            guards.LogDeadLetters().after_process_message(broker, proxy, exception=raised)
            guards.LogDeadLetters().after_process_message(broker, proxy, exception=None)
        assert proxy.failed == dead_lettered
        reasons = [e["reason"] for e in logs if e["event"] == "message_dead_lettered"]
        assert reasons == ([f"ValueError: {raised}"] if dead_lettered else [])
    finally:
        broker.close()


def test_long_actor_and_queue_names_are_logged_cut_to_100_characters():
    import structlog

    broker = StubBroker()
    try:

        @dramatiq.actor(broker=broker, actor_name="a" * 150, queue_name="q" * 150)
        def act(payload: dict) -> None:  # pragma: no cover - never run
            pass

        with structlog.testing.capture_logs() as logs:
            guards.dead_letter(dramatiq.broker.MessageProxy(act.message({})), "why")
        (event,) = logs
        assert (event["actor"], event["queue"]) == ("a" * 100, "q" * 100)
    finally:
        broker.close()


def test_the_signed_text_is_fixed_so_workers_of_two_releases_agree(broker):
    """During a rolling upgrade a message signed by a worker of one release is checked by a
    worker of the next: the text signed must not change with dict order or JSON spacing. It
    is [id, actor, args, kwargs] as compact JSON with sorted keys."""
    message = dramatiq.Message(
        queue_name="gate",
        actor_name="report",
        args=({"zeta": 1, "alpha": [1, 2]},),
        kwargs={"b": "x", "a": None},
        options={"retries": 3},
        message_id="m-1",
        message_timestamp=0,
    )
    text = '["m-1","report",[{"alpha":[1,2],"zeta":1}],{"a":null,"b":"x"}]'

    assert guards.signature(KEY, message) == hmac.new(KEY, text.encode(), "sha256").hexdigest()


@pytest.mark.parametrize(
    ("broker_url", "signing", "warnings"),
    [
        # Without a key only when signing is switched off (the settings refuse it otherwise).
        ("amqp://guest:guest@127.0.0.1:5672/", {"message_signing": False}, 1),
        ("amqp://guest:guest@127.0.0.1:5672/", {"message_signing_key": "s" * 32}, 0),
        ("stub://", {}, 0),
    ],
)
def test_a_worker_on_rabbitmq_without_a_signing_key_warns_once_at_start(
    broker_url, signing, warnings
):
    # Judged by the worker's own log: one line per worker start, whatever its thread count.
    from dramatiq import Worker
    from structlog.testing import capture_logs

    from crawlsched.brokers import middleware
    from tests.conftest import settings_for_tests

    settings = settings_for_tests(broker_url=broker_url, **{"message_signing_key": None, **signing})
    broker = StubBroker(middleware=middleware(settings))
    with capture_logs() as logs:
        worker = Worker(broker, worker_threads=3)
        worker.start()
        worker.stop()
    broker.close()
    unsigned = [e for e in logs if e["event"] == "messages_unsigned"]
    assert len(unsigned) == warnings
    if warnings:
        assert unsigned[0]["log_level"] == "warning"
        assert "ticks, plans and crawl batches" in unsigned[0]["reason"]
