"""The pure host rules: who may hold a host, for how long, and how long a 429 blocks it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.resources import host_rules
from crawlsched.resources.host_rules import Granted, HostPolicy, HostState, Refused

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
POLICY = HostPolicy(1.0, 2)
offsets = st.floats(-100, 100, allow_nan=False).map(lambda s: NOW + timedelta(seconds=s))
maybe_times = st.none() | offsets
states = st.builds(
    HostState,
    holder=st.sampled_from([None, "me", "other"]),
    lease_until=maybe_times,
    lease_granted_at=maybe_times,
    wanted_at=maybe_times,
    next_start=maybe_times,
    blocked_until=maybe_times,
    blocked_reason=st.just("HTTP 429"),
    day=st.sampled_from(["", "2026-03-01", "2026-02-28"]),
    pages_today=st.integers(0, 10),
)


@given(state=states, daily=st.integers(0, 10))
def test_a_grant_never_overrides_a_block_a_live_holder_or_the_budget(state, daily):
    policy = HostPolicy(1.0, 2, daily)
    decision = host_rules.decide(state, policy, "me", NOW, 10.0)
    if isinstance(decision, Granted):
        assert state.blocked_until is None or state.blocked_until <= NOW
        assert not (state.holder == "other" and state.lease_until and state.lease_until > NOW)
        assert not daily or state.pages_on(NOW) < daily
        # The first start keeps the delay after whatever was sent before
        assert decision.first_start >= NOW
        assert state.next_start is None or decision.first_start >= state.next_start
        assert decision.lease_until == NOW + timedelta(seconds=10)
    else:
        assert decision.until > NOW  # a refusal always says a later moment to come back


@given(state=states)
def test_renewal_needs_the_live_lease_and_nobody_asking_since_it_was_granted(state):
    if host_rules.may_renew(state, "me", NOW):
        assert state.holder == "me" and state.lease_until > NOW
        assert state.wanted_at is None or state.wanted_at < state.lease_granted_at


def test_the_last_start_of_a_slice_leaves_the_next_holder_one_delay():
    assert host_rules.last_start(NOW, 1.5) == NOW - timedelta(seconds=1.5)


@given(tries=st.integers(0, 40), seed=st.integers(0, 2**32))
def test_a_block_without_retry_after_grows_with_tries_within_its_cap(tries, seed):
    pause = host_rules.block_for(None, tries, random.Random(seed))
    ceiling = min(host_rules.BACKOFF_CAP_S, host_rules.BACKOFF_BASE_S * 2.0 ** min(tries, 16))
    assert ceiling / 2 <= pause <= ceiling <= host_rules.BACKOFF_CAP_S


@given(seconds=st.floats(-10, 10**7, allow_nan=False))
def test_retry_after_is_obeyed_up_to_an_hour(seconds):
    pause = host_rules.block_for(seconds, 3, random.Random(1))
    assert pause == min(max(seconds, 0.0), host_rules.MAX_RETRY_AFTER_S)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("120", 120.0),
        (" 5 ", 5.0),
        ("Sun, 01 Mar 2026 12:01:00 GMT", 60.0),
        ("Sun, 01 Mar 2026 11:00:00 GMT", 0.0),  # a date in the past: no wait
        ("soon", None),
        ("-3", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(header, seconds):
    assert host_rules.parse_retry_after(header, NOW) == seconds


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("https://Example.COM/a?b", "https://example.com:443"),
        ("http://example.com:8080/", "http://example.com:8080"),
        ("http://127.0.0.1/x", "http://127.0.0.1:80"),
        ("http://[::1]:9000/", "http://[::1]:9000"),
    ],
)
def test_a_host_is_its_origin_with_the_port_written(url, key):
    assert host_rules.host_key(url) == key


def test_an_operator_names_a_host_as_a_name_or_an_origin():
    assert host_rules.parse_host("example.com") == "https://example.com:443"
    assert host_rules.parse_host("http://127.0.0.1:8001/") == "http://127.0.0.1:8001"
    for bad in ("", "  ", "http://"):
        with pytest.raises(ValueError):
            host_rules.parse_host(bad)


@given(
    media=st.fixed_dictionaries(
        {}, optional={"delay_s": st.floats(0, 60), "concurrency": st.integers(1, 64)}
    ),
    host=st.fixed_dictionaries(
        {}, optional={"delay_s": st.floats(0, 60), "daily_pages": st.integers(0, 100)}
    ),
    crawl_delay=st.none() | st.floats(0, 1000),
)
def test_the_hosts_own_limits_win_and_a_crawl_delay_only_raises(media, host, crawl_delay):
    merged = host_rules.merge_policy(POLICY, media, host)
    assert merged.delay_s == host.get("delay_s", media.get("delay_s", POLICY.delay_s))
    assert merged.concurrency == media.get("concurrency", POLICY.concurrency)
    assert merged.daily_pages == host.get("daily_pages", 0)
    raised = merged.with_crawl_delay(crawl_delay)
    assert merged.delay_s <= raised.delay_s <= max(merged.delay_s, host_rules.MAX_CRAWL_DELAY_S)


def test_a_refused_asker_is_told_why_and_whether_to_ask_for_the_host():
    held = HostState(holder="other", lease_until=NOW + timedelta(seconds=4))
    assert host_rules.decide(held, POLICY, "me", NOW, 10.0) == Refused(
        NOW + timedelta(seconds=4), "held by other", held=True
    )
    blocked = HostState(blocked_until=NOW + timedelta(seconds=3), blocked_reason="HTTP 429")
    refused = host_rules.decide(blocked, POLICY, "me", NOW, 10.0)
    assert (refused.why, refused.held) == ("blocked: HTTP 429", False)
