"""Sends: a wake-up is a delayed message only while the delay is short. dramatiq holds a
delayed message unacknowledged until its time, and RabbitMQ closes the channel of a delivery
left unacknowledged past its consumer_timeout (30 minutes by default); a later wake-up is left
to the ticker's admission pass, which runs on every tick. And where a batch and a wake-up go:
a proxy need sends a batch to a gatekeeper only when it needs nothing else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from crawlsched.actors.sends import MAX_WAKE_DELAY_S, WAKE_KEYS_PER_MESSAGE, Sends
from crawlsched.ids import encode_id
from crawlsched.messages import BatchMessage, WakeMessage
from crawlsched.planning.due import Category

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


def _batch(category: Category, need_proxy: bool) -> BatchMessage:
    login = category in (Category.ONLY_LOGIN, Category.SELENIUM_AND_LOGIN)
    selenium = category in (Category.ONLY_SELENIUM, Category.SELENIUM_AND_LOGIN)
    return BatchMessage(
        run_id="r", dispatch_id="0" * 32, collection="profiles", task="profile",
        category=category, media_name="twitter", media_id=1, driver_class="http",
        need_login=login, need_selenium=selenium, need_proxy=need_proxy, crawl_limit=1,
        job_ids=[encode_id("j")],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("category", "need_proxy", "route"),
    [
        (Category.NEITHER, False, ("crawlsched.crawl.profile", "crawl_profile")),
        (Category.NEITHER, True, ("crawlsched.admit.proxy", "admit_proxy")),
        (Category.ONLY_SELENIUM, True, ("crawlsched.admit.selenium", "admit_selenium")),
        (Category.ONLY_LOGIN, True, ("crawlsched.admit.login", "admit_login")),
        (Category.SELENIUM_AND_LOGIN, True, ("crawlsched.admit.login", "admit_login")),
    ],
)
def test_a_proxy_need_sends_only_a_batch_that_needs_nothing_else_to_the_proxy_gatekeeper(
    sent, category, need_proxy, route
):
    messages, sends = sent
    sends.batch(_batch(category, need_proxy))
    assert [m[:2] for m in messages] == [route]


def test_a_proxy_release_wakes_the_proxy_gatekeeper_unless_an_account_was_freed_too(sent):
    messages, sends = sent
    sends.wake(["proxy"])
    sends.wake(["proxy", "account:twitter"])
    sends.wake(["proxy", "selenium"])
    assert [m[:2] for m in messages] == [
        ("crawlsched.admit.proxy", "wake_proxy"),
        ("crawlsched.admit.login", "wake_login"),
        ("crawlsched.admit.selenium", "wake_selenium"),
    ]
    assert WakeMessage.parse(messages[0][2][0]).pool_keys == ["proxy"]
