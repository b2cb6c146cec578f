"""The API's kept fire times: whatever it keeps, the answer at any later moment is the one
computed afresh then (hypothesis, over interval, cron and one-time triggers), and it computes
again only when a kept list stops holding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from crawlsched.schedules.interval import IntervalSchedule
from crawlsched.schedules.triggers import CronTrigger, IntervalTrigger, OnceTrigger, upcoming
from crawlsched.schedules.upcoming import FireTimeCache, FireTimes, upcoming_by_schedule

START = datetime(2026, 3, 28, 22, tzinfo=UTC)  # the night Europe's clocks go forward

intervals = st.builds(
    lambda offset_s, every_s: IntervalTrigger(
        IntervalSchedule(START + timedelta(seconds=offset_s), every_s)
    ),
    st.integers(-86_400, 86_400),
    st.sampled_from([1.0, 59.5, 60.0, 900.0, 3600.0, 86_400.0]),
)
crons = st.builds(
    CronTrigger,
    st.sampled_from(["*/15 * * * *", "30 2 * * *", "0 9 * * 1-5", "0 0 1 * *"]),
    st.sampled_from(["UTC", "Europe/Paris", "America/New_York"]),
)
onces = st.builds(lambda s: OnceTrigger(START + timedelta(seconds=s)), st.integers(-600, 86_400))
triggers = st.one_of(intervals, crons, onces)


@given(
    trigger=triggers,
    steps_s=st.lists(st.integers(0, 7_200), min_size=1, max_size=12),
    horizon_h=st.integers(1, 72),
    limit=st.integers(1, 40),
)
def test_kept_times_are_the_fresh_answer_at_every_later_moment(trigger, steps_s, horizon_h, limit):
    cache = FireTimeCache()
    horizon = timedelta(hours=horizon_h)
    now = START
    for step in steps_s:
        now += timedelta(seconds=step)
        kept = cache.times("t", lambda: trigger, now, horizon, limit)
        assert kept == upcoming(trigger, now, horizon, limit)


def test_a_kept_list_is_reused_until_its_first_time_passes():
    trigger = IntervalTrigger(IntervalSchedule(START, 3600.0))
    built = []

    def make():
        built.append(1)
        return trigger

    cache = FireTimeCache()
    day = timedelta(days=1)
    first = cache.times("hourly", make, START, day, 100)
    assert len(first) == 24 and len(built) == 1
    # Within the hour nothing passed and the horizon's end gained no time: kept.
    assert cache.times("hourly", make, START + timedelta(minutes=59), day, 100) == first
    assert len(built) == 1
    # At the first fire time it no longer holds.
    moved = cache.times("hourly", make, START + timedelta(hours=1), day, 100)
    assert len(built) == 2 and moved[0] == START + timedelta(hours=2)


def test_a_list_short_of_its_limit_is_computed_again_when_the_horizon_reaches_a_new_time():
    trigger = IntervalTrigger(IntervalSchedule(START + timedelta(minutes=30), 3600.0))
    kept = FireTimes.compute(trigger, START, timedelta(hours=2), 100)
    assert kept.times == [START + timedelta(minutes=30), START + timedelta(minutes=90)]
    assert kept.beyond == START + timedelta(minutes=150)
    assert kept.holds_at(START + timedelta(minutes=29), timedelta(hours=2), 100)
    # now + horizon reaches 02:30, a third fire time: no longer the answer.
    assert not kept.holds_at(START + timedelta(minutes=30), timedelta(hours=2), 100)
    # An earlier moment than it was computed for is never answered from it.
    assert not kept.holds_at(START - timedelta(seconds=1), timedelta(hours=2), 100)


def test_the_cache_keeps_at_most_its_capacity():
    cache = FireTimeCache(capacity=2)
    for n in range(5):
        trigger = OnceTrigger(START + timedelta(hours=n + 1))
        cache.times(n, lambda t=trigger: t, START, timedelta(days=1), 10)
    assert len(cache._entries) == 2


def test_schedules_read_through_the_cache_get_the_same_rows():
    docs = [
        {"_id": "a", "trigger": "interval", "anchor": START, "interval_s": 600.0},
        {"_id": "b", "trigger": "cron", "cron": "*/15 * * * *", "timezone": "Europe/Paris"},
        {
            "_id": "c",
            "trigger": "interval",
            "anchor": START,
            "interval_s": 600.0,
            "next_fire_at": START + timedelta(minutes=1),
        },
    ]
    cache = FireTimeCache()
    for minutes in (0, 5, 11, 11, 40):
        now = START + timedelta(minutes=minutes)
        fresh = upcoming_by_schedule(docs, now, timedelta(hours=3), 50)
        assert upcoming_by_schedule(docs, now, timedelta(hours=3), 50, cache) == fresh
