"""The clock explains itself: a heartbeat at a low rate, each broker reconnect with its reason,
and no line per tick."""

from __future__ import annotations

import threading

import pytest
from dramatiq.errors import ConnectionClosed
from structlog.testing import capture_logs

from crawlsched.flow.clocking import Heartbeat, run_clock


class FakeTime:
    """Monotonic seconds that move only when the loop waits."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _events(logs: list[dict], name: str) -> list[dict]:
    return [e for e in logs if e["event"] == name]


def test_heartbeat_is_due_once_per_period():
    beat = Heartbeat(60.0, started=0.0)
    due = [beat.tick_sent(float(second)) for second in range(0, 185, 5)]
    assert sum(due) == 3  # at 60, 120, 180 s
    assert beat.sent == 37
    with pytest.raises(ValueError, match="heartbeat_s"):
        Heartbeat(0, started=0.0)


def test_clock_logs_a_heartbeat_now_and_then_and_no_line_per_tick():
    fake = FakeTime()
    stop = threading.Event()

    def send() -> None:
        fake.now += 1.0  # a tick each second

    with capture_logs() as logs:
        sent = run_clock(
            send, period_s=0.001, stop=stop, count=150, heartbeat_s=60.0, monotonic=fake
        )

    assert sent == 150
    beats = _events(logs, "clock_alive")
    assert [b["ticks_sent"] for b in beats] == [60, 120]
    assert all(b["last_tick_at"] for b in beats)
    assert [e["event"] for e in logs] == ["clock_alive", "clock_alive", "clock_stopped"]
    assert logs[-1]["ticks"] == 150


def test_clock_logs_each_reconnect_with_its_reason_and_goes_on():
    # Given a broker that refuses two sends, then takes them again
    failures = [ConnectionClosed(OSError("Connection refused")), ConnectionClosed(OSError("EOF"))]
    sent_ok = []

    def send() -> None:
        if failures:
            raise failures.pop(0)
        sent_ok.append(1)

    with capture_logs() as logs:
        sent = run_clock(
            send, period_s=0.001, stop=threading.Event(), count=3, first_backoff_s=0.001
        )

    assert sent == 3 and len(sent_ok) == 3
    reconnecting = _events(logs, "clock_broker_reconnecting")
    assert [e["attempt"] for e in reconnecting] == [1, 2]
    assert {e["log_level"] for e in reconnecting} == {"warning"}
    assert "Connection refused" in reconnecting[0]["reason"]
    assert "ConnectionClosed" in reconnecting[0]["reason"]
    [back] = _events(logs, "clock_broker_reconnected")
    assert back["attempts"] == 3 and "EOF" in back["reason"]


def test_clock_names_a_reconnect_dramatiq_made_inside_a_send():
    class Broker:  # counts its dropped connections as CrawlschedRabbitmqBroker does
        connection_drops = 0
        last_drop_reason = None

    broker = Broker()
    calls = []

    def send() -> None:
        calls.append(1)
        if len(calls) == 2:  # a stale connection replaced within the send
            broker.connection_drops += 1
            broker.last_drop_reason = "StreamLostError: Transport indicated EOF"

    with capture_logs() as logs:
        run_clock(send, period_s=0.001, stop=threading.Event(), count=4, broker=broker)

    assert _events(logs, "clock_broker_reconnected") == [
        {
            "event": "clock_broker_reconnected",
            "log_level": "info",
            "reason": "StreamLostError: Transport indicated EOF",
            "attempts": 1,
            "connections_dropped": 1,
        }
    ]


def test_clock_stopped_while_the_broker_is_away_ends_without_a_tick():
    stop = threading.Event()

    def send() -> None:
        raise ConnectionClosed(OSError("Connection refused"))

    threading.Timer(0.3, stop.set).start()
    with capture_logs() as logs:
        sent = run_clock(send, period_s=0.001, stop=stop, first_backoff_s=0.05, max_backoff_s=0.1)

    assert sent == 0
    assert _events(logs, "clock_broker_reconnecting")
    assert logs[-1]["event"] == "clock_stopped" and logs[-1]["ticks"] == 0


@pytest.mark.rabbitmq
def test_rabbitmq_broker_counts_a_connection_it_dropped_with_the_reason(rabbitmq_broker):
    import dramatiq

    @dramatiq.actor(broker=rabbitmq_broker, queue_name="clock-drops", actor_name="clock_drop")
    def clock_drop() -> None:
        pass

    clock_drop.send()
    before = rabbitmq_broker.connection_drops
    rabbitmq_broker.connection.close()  # the connection dies under the next publish

    clock_drop.send()

    assert rabbitmq_broker.connection_drops == before + 1
    assert rabbitmq_broker.last_drop_reason == "ChannelWrongStateError: Channel is closed."
