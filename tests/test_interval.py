"""IntervalSchedule: fire times anchor + k·interval, the next one after a moment, missed ones."""

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlsched.schedules.interval import IntervalSchedule
from tests.support.factories import utc_datetimes

ANCHOR = datetime(2024, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)
US = timedelta(microseconds=1)

intervals = st.one_of(
    st.integers(1, 7 * 24 * 3600).map(float),
    st.floats(0.001, 7 * 24 * 3600, allow_nan=False, allow_infinity=False),
)
offsets = st.one_of(
    st.integers(-86_400_000, 5 * 365 * 86_400_000).map(lambda ms: timedelta(milliseconds=ms)),
    st.integers(-(10**6), 10**9).map(lambda us: timedelta(microseconds=us)),
)
anchors = utc_datetimes(datetime(2000, 1, 1), datetime(2050, 1, 1))


def grid_error(schedule: IntervalSchedule, moment: datetime) -> timedelta:
    """Distance from `moment` to the nearest exact grid point anchor + k·interval."""
    elapsed_us = (moment - schedule.anchor) // US
    k = round(elapsed_us / (schedule.interval_s * 1e6))
    return abs(timedelta(microseconds=elapsed_us - k * schedule.interval_s * 1e6))


@settings(max_examples=100)
@given(anchors, intervals, offsets)
def test_interval_next_after_is_the_first_grid_point_strictly_after(anchor, interval_s, offset):
    schedule = IntervalSchedule(anchor, interval_s)
    moment = anchor + offset

    fire_at = schedule.next_after(moment)

    assert fire_at > moment
    assert fire_at >= anchor
    assert grid_error(schedule, fire_at) <= MS
    # Smallest: the grid point before it (if it is not the anchor) is not after the moment.
    if fire_at > anchor:
        assert fire_at - timedelta(seconds=interval_s) <= moment + MS


@given(anchors, intervals, st.integers(1, 10**6))
def test_interval_next_after_a_moment_before_the_anchor_is_the_anchor(anchor, interval_s, ms):
    schedule = IntervalSchedule(anchor, interval_s)
    assert schedule.next_after(anchor - timedelta(milliseconds=ms)) == anchor


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (ANCHOR - timedelta(days=1), ANCHOR),
        (ANCHOR, ANCHOR + timedelta(minutes=5)),
        (ANCHOR + timedelta(minutes=4, seconds=59), ANCHOR + timedelta(minutes=5)),
        (ANCHOR + timedelta(minutes=5), ANCHOR + timedelta(minutes=10)),
        (ANCHOR + timedelta(hours=1, milliseconds=1), ANCHOR + timedelta(hours=1, minutes=5)),
    ],
)
def test_interval_next_after_table(moment, expected):
    assert IntervalSchedule(ANCHOR, 300).next_after(moment) == expected


def test_interval_next_after_survives_float_intervals():
    # 0.1 s is not a binary fraction: 3 * 0.1 != 0.3, yet the grid point 0.3 s must be skipped.
    schedule = IntervalSchedule(ANCHOR, 0.1)
    assert schedule.next_after(ANCHOR + timedelta(seconds=0.3)) == ANCHOR + timedelta(seconds=0.4)


# The walk below steps one fire time at a time, so its cost grows with the count: offsets reach
# at most WALKED_AT_MOST intervals (the table test covers larger counts in one step).
WALKED_AT_MOST = 2_000


@settings(max_examples=100)
@given(anchors, st.integers(1, 3600), st.data())
def test_interval_missed_between_counts_the_fire_times_due(fired_at, interval_s, data):
    offset_ms = data.draw(st.integers(-10, WALKED_AT_MOST * interval_s * 1000), label="offset_ms")
    schedule = IntervalSchedule(fired_at, interval_s)
    now = fired_at + timedelta(milliseconds=offset_ms)

    missed = schedule.missed_between(fired_at, now)

    # Walking the grid one fire time at a time finds as many.
    walked, fire_at = 0, schedule.next_after(fired_at)
    while fire_at <= now and walked <= missed:
        walked += 1
        fire_at = schedule.next_after(fire_at)
    assert missed == walked


def test_interval_properties_have_no_wall_clock_deadline():
    # This property once failed on a busy machine with DeadlineExceeded (200 ms): the suite's
    # profile (tests/conftest.py) must reach it, whatever the machine's speed.
    own = test_interval_missed_between_counts_the_fire_times_due._hypothesis_internal_use_settings
    assert own.deadline is None
    assert HealthCheck.too_slow in own.suppress_health_check
    assert own.max_examples == 100


@pytest.mark.parametrize(
    ("elapsed", "expected"),
    [
        (timedelta(0), 0),
        (timedelta(seconds=-30), 0),
        (timedelta(seconds=59, milliseconds=999), 0),
        (timedelta(seconds=60), 1),
        (timedelta(minutes=3, seconds=30), 3),
        (timedelta(days=2, seconds=59), 2 * 24 * 60),
        (timedelta(days=5 * 365), 5 * 365 * 24 * 60),
    ],
)
def test_interval_missed_between_table(elapsed, expected):
    assert IntervalSchedule(ANCHOR, 60).missed_between(ANCHOR, ANCHOR + elapsed) == expected


@pytest.mark.parametrize("interval_s", [0, -1, -0.001])
def test_interval_rejects_non_positive_interval(interval_s):
    with pytest.raises(ValueError, match="interval_s"):
        IntervalSchedule(ANCHOR, interval_s)


def test_interval_rejects_naive_anchor():
    with pytest.raises(ValueError) as caught:
        IntervalSchedule(datetime(2024, 1, 1), 60)
    assert str(caught.value) == "anchor must be timezone-aware"


@pytest.mark.parametrize("interval_s", [math.nan, math.inf, 1e-7])
def test_interval_rejects_intervals_it_cannot_step_by(interval_s):
    with pytest.raises(ValueError, match="interval_s"):
        IntervalSchedule(ANCHOR, interval_s)


def test_interval_takes_the_smallest_step_it_can_make():
    # A millisecond is the floor (MongoDB keeps milliseconds); anything below is refused.
    schedule = IntervalSchedule(ANCHOR, 0.001)
    assert schedule.next_after(ANCHOR) == ANCHOR + MS
    with pytest.raises(ValueError) as caught:
        IntervalSchedule(ANCHOR, 0.000999)
    assert str(caught.value) == "interval_s must be finite and >= 0.001, got 0.000999"
