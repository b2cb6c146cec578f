"""The pure host rules: who may hold a host, for how long, and how long a 429 blocks it."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, replace
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


def _http_date(when: datetime) -> str:
    return when.strftime("%a, %d %b %Y %H:%M:%S GMT")


retry_after_headers = st.one_of(
    st.none(),
    st.text(),  # anything at all, control characters included
    # digits of other scripts ('\u00b2'.isdigit() is True, float() of it raises)
    st.text(alphabet="0123456789\u0660\u0661\u0663\u00b2\u00b3\u07c1 -+.,eE:", max_size=40),
    st.integers(-(10**40), 10**40).map(str),  # large numbers, negative ones
    st.text(alphabet="0123456789", min_size=300, max_size=400),  # past a float's range
    st.floats().map(str),  # '1.5', 'inf', 'nan', '1e+300'
    st.datetimes(timezones=st.just(UTC)).map(_http_date),  # years 1 to 9999
    st.builds(  # dates almost right: days, months, years, times and zones out of range
        "{}, {} {} {} {}:{}:{} {}".format,
        st.sampled_from(["Sun", "Mon", "Xyz", ""]),
        st.integers(-5, 99),
        st.sampled_from(["Mar", "Feb", "Foo", "\u0663"]),
        st.integers(-(10**6), 10**12),
        st.integers(-1, 99),
        st.integers(-1, 99),
        st.integers(-1, 99),
        st.sampled_from(["GMT", "UT", "-0000", "+9999", "-9999", "EST", "+0130", ""]),
    ),
)


@given(header=retry_after_headers, now=st.datetimes(timezones=st.just(UTC)))
def test_retry_after_never_raises_and_reads_nothing_it_cannot_wait(header, now):
    # The header is the server's: whatever it says, the answer is a wait or None, and the
    # block made of it is a finite moment from 0 to an hour
    seconds = host_rules.parse_retry_after(header, now)
    assert seconds is None or (isinstance(seconds, float) and 0 <= seconds < float("inf"))
    pause = host_rules.block_for(seconds, 0, random.Random(1))
    assert 0 <= pause <= host_rules.MAX_RETRY_AFTER_S


@pytest.mark.parametrize(
    "header",
    [
        *("1.5", "1e3", "+5", "5 s", "\u00b2", "\u0661\u0662\u0660"),  # ² and Arabic-Indic 120
        *("Sun, 32 Mar 2026 12:00:00 GMT", "Sun, 01 Foo 2026"),
    ],
)
def test_retry_after_not_in_seconds_or_an_http_date_is_unreadable(header):
    assert host_rules.parse_retry_after(header, NOW) is None


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


SLICE_S = 10.0
BEFORE_MIDNIGHT = datetime(2026, 3, 1, 23, 59, 30, tzinfo=UTC)


@dataclass
class _Slice:
    until: datetime
    left: int | None
    sent: int = 0


class _Host:
    """One host's document and its holders, moved by the pure rules the way `store/hosts.py`
    writes them and `ClusterHostPacer` acts on them (delay 0: a start is a page)."""

    def __init__(self, policy: HostPolicy) -> None:
        self.policy, self.state, self.now = policy, HostState(), BEFORE_MIDNIGHT
        self.slices: dict[str, _Slice] = {}
        self.started: Counter[str] = Counter()  # pages started per UTC day

    def release(self, holder: str) -> None:
        sliced = self.slices.pop(holder)
        self.state = self.state.counted(sliced.sent, self.now)
        if self.state.holder == holder:
            self.state = replace(self.state, holder=None, lease_until=self.now)

    def renew(self, holder: str) -> None:
        sliced = self.slices.get(holder)
        if sliced is None or not host_rules.may_renew(self.state, holder, self.now):
            return
        until = self.now + timedelta(seconds=SLICE_S)
        self.state = replace(self.state.counted(sliced.sent, self.now), lease_until=until)
        left = host_rules.pages_left(self.state, self.policy, self.now)
        self.slices[holder] = _Slice(until, left)

    def start(self, holder: str) -> bool:
        sliced = self.slices.get(holder)
        if sliced is not None and (
            self.now >= sliced.until or not host_rules.may_start(sliced.left, sliced.sent)
        ):
            self.release(holder)  # the slice ran out, or its share did: give the host back
            sliced = None
        if sliced is None:
            decision = host_rules.decide(self.state, self.policy, holder, self.now, SLICE_S)
            if isinstance(decision, Refused):
                if decision.held and self.state.wanted_at is None:
                    self.state = replace(self.state, wanted_at=self.now)
                return False
            self.state = replace(
                self.state,
                holder=holder,
                lease_until=decision.lease_until,
                lease_granted_at=self.now,
                wanted_at=None,
            )
            sliced = self.slices[holder] = _Slice(decision.lease_until, decision.pages_left)
        if not host_rules.may_start(sliced.left, sliced.sent):
            return False
        sliced.sent += 1
        self.started[host_rules.day_of(self.now)] += 1
        return True

    def advance(self, seconds: float) -> None:
        later = self.now + timedelta(seconds=seconds)
        for holder in [h for h, s in self.slices.items() if s.until <= later]:
            self.release(holder)  # a holder gives the host back by its slice's end
        self.now = later


steps = st.lists(
    st.tuples(
        st.sampled_from(["p1", "p2", "p3"]),
        st.sampled_from(["start", "start", "start", "renew", "release"]),
        st.floats(0, 4, allow_nan=False),
    ),
    max_size=80,
)


@given(daily=st.integers(1, 12), steps=steps)
def test_pages_started_in_a_day_never_exceed_the_budget_nor_are_refused_below_it(daily, steps):
    # Given three holders taking, renewing and giving back slices of one host, across midnight
    host = _Host(HostPolicy(0.0, 2, daily))
    for holder, action, seconds in steps:
        if action == "start":
            others_hold = any(h != holder and s.until > host.now for h, s in host.slices.items())
            mine = host.slices.get(holder)
            counted = host.state.counted(mine.sent if mine else 0, host.now)
            started = host.start(holder)
            # Then with budget left (as counted once this holder's pages are) and nobody else
            # holding the host, a start is never refused
            if not others_hold and counted.pages_on(host.now) < daily:
                assert started
        elif action == "renew":
            host.renew(holder)
        elif holder in host.slices:
            host.release(holder)
        host.advance(seconds)
        # And no UTC day ever sees more pages started than its budget
        assert all(n <= daily for n in host.started.values()), host.started


@given(state=states, daily=st.integers(0, 10))
def test_a_slice_is_granted_with_what_is_left_of_the_day_and_never_more(state, daily):
    decision = host_rules.decide(state, HostPolicy(1.0, 2, daily), "me", NOW, 10.0)
    if isinstance(decision, Granted):
        if daily:
            assert decision.pages_left == daily - state.pages_on(NOW) > 0
            assert host_rules.may_start(decision.pages_left, decision.pages_left - 1)
            assert not host_rules.may_start(decision.pages_left, decision.pages_left)
        else:
            assert decision.pages_left is None


def test_pages_counted_after_midnight_count_for_the_new_day():
    state = HostState(day="2026-03-01", pages_today=7)
    assert state.counted(2, NOW) == replace(state, pages_today=9)
    tomorrow = NOW + timedelta(hours=13)
    assert state.counted(2, tomorrow) == replace(state, day="2026-03-02", pages_today=2)
