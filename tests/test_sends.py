"""Sends: a wake-up is a delayed message only while the delay is short. dramatiq holds a
delayed message unacknowledged until its time, and RabbitMQ closes the channel of a delivery
left unacknowledged past its consumer_timeout (30 minutes by default); a later wake-up is left
to the ticker's admission pass, which runs on every tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from crawlsched.actors.sends import MAX_WAKE_DELAY_S, WAKE_KEYS_PER_MESSAGE, Sends

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def sent():
    sent: list[tuple[str, str, tuple, float]] = []
    return sent, Sends(lambda *message: sent.append(message), lambda: NOW)


def test_a_wake_up_a_few_minutes_ahead_is_a_delayed_message(sent):
    messages, sends = sent
    sends.wake_at(["host:http://a.test:80", "selenium"], NOW + timedelta(minutes=5))
    ((queue, actor, _args, delay_s),) = messages
    assert (queue, actor) == ("crawlsched.admit.selenium", "wake_selenium")
    assert delay_s == pytest.approx(300.05)


def test_a_wake_up_past_the_bound_is_left_to_the_ticker(sent):
    messages, sends = sent
    # A host blocked for an hour by its Retry-After: no message held for an hour
    sends.wake_at(["host:http://a.test:80"], NOW + timedelta(hours=1))
    sends.wake(["account:twitter"], delay_s=MAX_WAKE_DELAY_S + 1)
    assert messages == []
    # At the bound, and at once, it is sent, a few keys a message
    keys = [f"host:http://h{n}.test:80" for n in range(WAKE_KEYS_PER_MESSAGE + 1)]
    sends.wake(keys, delay_s=MAX_WAKE_DELAY_S)
    sends.wake(["account:twitter"])
    assert [m[3] for m in messages] == [MAX_WAKE_DELAY_S, MAX_WAKE_DELAY_S, 0.0]
    assert messages[-1][:2] == ("crawlsched.admit.login", "wake_login")
