"""Cron, one-time and interval triggers: against croniter, across DST changes, validated."""

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.schedules.interval import IntervalSchedule
from crawlsched.schedules.triggers import (
    CronTrigger,
    IntervalTrigger,
    OnceTrigger,
    trigger_of,
    upcoming,
)
from tests.support.factories import utc_datetimes

ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Australia/Sydney"]
DST_ZONES = ["Europe/Paris", "America/New_York"]


def _field(low: int, high: int, steps: bool = True) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    step = st.integers(2, max(2, (high - low) // 2)).map(lambda k: f"*/{k}")
    return st.one_of(
        st.just("*"),
        value.map(str),
        step if steps else value.map(str),
        # No one-value range `a-a`: croniter reads a weekday `0-0` as every day.
        st.lists(value, min_size=2, max_size=2, unique=True).map(lambda p: f"{min(p)}-{max(p)}"),
        st.lists(value, min_size=2, max_size=3, unique=True).map(
            lambda vs: ",".join(map(str, sorted(vs)))
        ),
    )


# No `*/k` in the day fields: with both day fields restricted, `*/2` means "and" to cronsim
# (Vixie cron: a field starting with `*` makes the two fields both apply) and "or" to croniter.
cron_expressions = st.tuples(
    _field(0, 59), _field(0, 23), _field(1, 28, False), _field(1, 12), _field(0, 6, False)
).map(" ".join)


def near_transition(moment: datetime, zone: ZoneInfo) -> bool:
    """Within three hours of a change of the zone's UTC offset."""
    return (moment - timedelta(hours=3)).astimezone(zone).utcoffset() != (
        moment + timedelta(hours=3)
    ).astimezone(zone).utcoffset()


def exists(wall: datetime, zone: ZoneInfo) -> bool:
    """Whether a naive local wall time happens in the zone (not inside a spring-forward gap)."""
    aware = wall.replace(tzinfo=zone)
    return aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall


def first_existing(wall: datetime, zone: ZoneInfo) -> datetime:
    while not exists(wall, zone):
        wall += timedelta(minutes=1)
    return wall


def ours(expression: str, zone: str, start: datetime, n: int) -> list[datetime]:
    trigger, times, moment = CronTrigger(expression, zone), [], start
    for _ in range(n):
        moment = trigger.next_after(moment)
        times.append(moment.astimezone(UTC))
    return times


def croniters(expression: str, zone: str, start: datetime, n: int) -> list[datetime]:
    it = croniter(expression, start.astimezone(ZoneInfo(zone)))
    # In UTC: two datetimes of one zone compare and subtract as wall-clock times (fold ignored).
    return [it.get_next(datetime).astimezone(UTC) for _ in range(n)]


@settings(max_examples=300)
@given(
    cron_expressions,
    st.sampled_from(ZONES),
    utc_datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1)),
)
def test_cron_matches_croniter_away_from_offset_changes(expression, zone, start):
    mine = ours(expression, zone, start, 6)
    theirs = croniters(expression, zone, start, 6)
    tz = ZoneInfo(zone)
    # Compare up to the first fire time near a DST change: there the rules differ on purpose.
    for a, b in zip(mine, theirs, strict=True):
        if near_transition(a, tz) or near_transition(b, tz):
            break
        assert a == b, (expression, zone, start, mine, theirs)
    assert all(x < y for x, y in itertools.pairwise(mine))


@pytest.mark.parametrize("zone", ["Asia/Kolkata", "UTC"])
@settings(max_examples=100)
@given(expression=cron_expressions, start=utc_datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1)))
def test_cron_matches_croniter_exactly_in_zones_without_dst(zone, expression, start):
    assert ours(expression, zone, start, 8) == croniters(expression, zone, start, 8)


# The changes of 2024-2027 in both zones: spring forward and fall back.
TRANSITION_DAYS = {
    "Europe/Paris": [(2024, 3, 31), (2024, 10, 27), (2026, 3, 29), (2026, 10, 25)],
    "America/New_York": [(2024, 3, 10), (2024, 11, 3), (2026, 3, 8), (2026, 11, 1)],
}
transition_cases = st.sampled_from(
    [(zone, day) for zone, days in TRANSITION_DAYS.items() for day in days]
)


@settings(max_examples=200)
@given(transition_cases, st.integers(0, 59), st.integers(0, 4))
def test_fixed_time_job_fires_once_per_local_day_across_dst(case, minute, hour):
    # Given a daily job at a fixed local time, over the week around a DST change
    zone, day = case
    tz = ZoneInfo(zone)
    start = datetime(*day, tzinfo=tz) - timedelta(days=3)
    end = start + timedelta(days=7)
    # When its fire times are listed
    trigger = CronTrigger(f"{minute} {hour} * * *", zone)
    times = [t.astimezone(UTC) for t in trigger.times_between(start, end)]
    # Then each local date has exactly one, at the wall time asked for or, when that time
    # does not exist that night, at the first minute after the gap
    dates = [t.astimezone(tz).date() for t in times]
    assert len(dates) == len(set(dates)) == 7
    for t in times:
        local = t.astimezone(tz)
        wanted = local.replace(hour=hour, minute=minute, tzinfo=None)
        assert local.replace(tzinfo=None) == first_existing(wanted, tz)
    assert all(x < y for x, y in itertools.pairwise(times))


@pytest.mark.parametrize("zone", ["Europe/Paris", "America/New_York", "Asia/Kolkata"])
@pytest.mark.parametrize("step", [5, 15, 30])
def test_wildcard_job_follows_elapsed_time_through_dst(zone, step):
    for day in TRANSITION_DAYS.get(zone, [(2026, 3, 29), (2026, 10, 25)]):
        start = datetime(*day, tzinfo=ZoneInfo(zone)) - timedelta(days=1)
        trigger = CronTrigger(f"*/{step} * * * *", zone)
        # In UTC: Python subtracts two datetimes of one zone as wall-clock times.
        times = [t.astimezone(UTC) for t in trigger.times_between(start, start + timedelta(days=2))]
        gaps = {(b - a) for a, b in itertools.pairwise(times)}
        assert gaps == {timedelta(minutes=step)}, (zone, day)


def test_paris_fall_back_fires_the_repeated_half_hour_once_where_croniter_fires_twice():
    start = datetime(2026, 10, 24, 12, tzinfo=UTC)
    end = start + timedelta(days=1)
    mine = list(CronTrigger("30 2 * * *", "Europe/Paris").times_between(start, end))
    assert [t.astimezone(UTC) for t in mine] == [datetime(2026, 10, 25, 0, 30, tzinfo=UTC)]
    theirs = croniters("30 2 * * *", "Europe/Paris", start, 2)
    assert theirs[1] - theirs[0] == timedelta(hours=1)  # the doubled run we avoid


def test_paris_spring_forward_moves_the_missing_half_hour_to_three():
    start = datetime(2026, 3, 28, 12, tzinfo=UTC)
    (fire,) = CronTrigger("30 2 * * *", "Europe/Paris").times_between(
        start, start + timedelta(days=1)
    )
    assert fire.astimezone(ZoneInfo("Europe/Paris")).strftime("%H:%M %z") == "03:00 +0200"


@pytest.mark.parametrize(
    ("expression", "zone", "field"),
    [
        ("61 * * * *", "UTC", "cron"),
        ("* * * *", "UTC", "cron"),
        ("* * * * * *", "UTC", "cron"),
        ("every day", "UTC", "cron"),
        ("0 0 31 2 *", "UTC", "cron"),
        ("0 0 * * *", "Mars/Olympus", "timezone"),
        ("0 0 * * *", "", "timezone"),
    ],
)
def test_cron_rejects_bad_expressions_and_zones_naming_the_field(expression, zone, field):
    with pytest.raises(ValueError, match=rf"^{field}:"):
        CronTrigger(expression, zone)


def test_once_fires_exactly_once():
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    trigger = OnceTrigger(at)
    assert trigger.next_after(at - timedelta(seconds=1)) == at
    assert trigger.next_after(at) is None
    assert list(trigger.times_between(at - timedelta(days=1), at + timedelta(days=1))) == [at]


@settings(max_examples=100)
@given(
    utc_datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1)),
    st.floats(1, 86400, allow_nan=False),
    st.integers(0, 10**6),
)
def test_interval_trigger_lists_what_next_after_walks(anchor, interval_s, offset_s):
    trigger = IntervalTrigger(IntervalSchedule(anchor, interval_s))
    now = anchor + timedelta(seconds=offset_s)
    listed = upcoming(trigger, now, timedelta(days=3), 500)
    walked, moment = [], now
    while len(walked) < len(listed):
        moment = trigger.next_after(moment)
        walked.append(moment)
    assert listed == walked
    assert all(now < t <= now + timedelta(days=3) for t in listed)
    # Complete: when under the limit, the next fire time lies past the horizon.
    if len(listed) < 500:
        last = listed[-1] if listed else now
        assert trigger.next_after(last) > now + timedelta(days=3)


def test_trigger_of_reads_documents_of_every_kind():
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    legacy = trigger_of({"anchor": anchor.replace(tzinfo=None), "interval_s": 300})
    assert legacy.next_after(anchor) == anchor + timedelta(minutes=5)
    cron = trigger_of({"trigger": "cron", "cron": "0 12 * * *", "timezone": "Asia/Kolkata"})
    assert cron.next_after(anchor) == datetime(2026, 1, 1, 6, 30, tzinfo=UTC)
    with pytest.raises(ValueError, match=r"^trigger:"):
        trigger_of({"trigger": "lunar"})


@pytest.mark.parametrize("expression", ["*/5 * * * *", "30 2 * * *", "15 1-3 * * *"])
@pytest.mark.parametrize("zone", DST_ZONES)
def test_walking_next_after_gives_the_listed_times_through_dst(expression, zone):
    # The ticker walks next_after from each fire time; it must see what a listing sees,
    # including the second pass of a repeated hour.
    trigger = CronTrigger(expression, zone)
    for day in TRANSITION_DAYS[zone]:
        start = datetime(*day, tzinfo=ZoneInfo(zone)) - timedelta(hours=12)
        end = start + timedelta(days=1)
        listed = list(trigger.times_between(start, end))
        walked, moment = [], start
        while (moment := trigger.next_after(moment)) <= end:
            walked.append(moment)
        assert walked == listed
        assert all(t.tzinfo is UTC for t in walked)


AT = datetime(2026, 1, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "zone", "message"),
    [
        (
            "* * * *",
            "UTC",
            "cron: expected 5 fields (minute hour day month weekday), got '* * * *'",
        ),
        (None, "UTC", "cron: expected 5 fields (minute hour day month weekday), got None"),
        ("61 * * * *", "UTC", "cron: invalid expression '61 * * * *': "),
        ("0 0 * * *", None, "timezone: unknown IANA time zone None"),
        ("0 0 * * *", "Mars/Olympus", "timezone: unknown IANA time zone 'Mars/Olympus'"),
    ],
)
def test_cron_refusal_messages(expression, zone, message):
    with pytest.raises(ValueError) as caught:
        CronTrigger(expression, zone)
    assert str(caught.value).startswith(message)


def test_triggers_refuse_naive_moments():
    with pytest.raises(ValueError, match=r"^moment must be a timezone-aware datetime, got "):
        CronTrigger("0 9 * * *").next_after(datetime(2026, 1, 1))
    with pytest.raises(ValueError, match=r"^at must be a timezone-aware datetime, got "):
        OnceTrigger(datetime(2026, 1, 1))


def test_cron_defaults_to_utc_and_shows_no_zone_object():
    trigger = CronTrigger("0 9 * * *")
    assert trigger.next_after(AT) == datetime(2026, 1, 2, 9, tzinfo=UTC)
    assert repr(trigger) == "CronTrigger(expression='0 9 * * *', timezone='UTC')"


def test_cron_counts_from_the_second_it_is_asked_at():
    # Asked within the second of a fire time, or a microsecond before it: that fire time is
    # after the moment, so it is the next one.
    trigger = CronTrigger("0 9 * * *", "UTC")
    nine = datetime(2026, 1, 1, 9, tzinfo=UTC)
    assert trigger.next_after(nine - timedelta(microseconds=1)) == nine
    assert trigger.next_after(nine - timedelta(microseconds=999_999)) == nine
    assert trigger.next_after(nine) == nine + timedelta(days=1)
    assert trigger.next_after(nine + timedelta(microseconds=1)) == nine + timedelta(days=1)


def test_cron_lists_times_up_to_and_including_the_end():
    trigger = CronTrigger("0 * * * *", "UTC")
    listed = list(trigger.times_between(AT, AT + timedelta(hours=3)))
    assert listed == [AT + timedelta(hours=h) for h in (1, 2, 3)]
    assert list(trigger.times_between(AT, AT + timedelta(minutes=59))) == []


@pytest.mark.parametrize(
    ("start", "end", "listed"),
    [
        (AT - timedelta(seconds=1), AT, [AT]),  # the end is in the window
        (AT, AT + timedelta(days=1), []),  # the start is not
        (AT - timedelta(days=2), AT - timedelta(days=1), []),
    ],
)
def test_once_lists_its_time_only_inside_the_window(start, end, listed):
    assert list(OnceTrigger(AT).times_between(start, end)) == listed


def test_interval_trigger_lists_times_up_to_and_including_the_end():
    trigger = IntervalTrigger(IntervalSchedule(AT, 60.0))
    assert list(trigger.times_between(AT, AT + timedelta(minutes=2))) == [
        AT + timedelta(minutes=1),
        AT + timedelta(minutes=2),
    ]


@pytest.mark.parametrize(
    ("doc", "first"),
    [
        # An explicit interval document, naive anchor (MongoDB's) read as UTC, string seconds.
        ({"trigger": "interval", "anchor": AT.replace(tzinfo=None), "interval_s": "60"}, AT),
        ({"trigger": "cron", "cron": "0 12 * * *"}, AT),  # no zone: UTC
        ({"trigger": "cron", "cron": "0 12 * * *", "timezone": None}, AT),
        ({"trigger": "once", "at": AT.replace(tzinfo=None)}, AT),
        ({"trigger": "once", "at": AT}, AT),
        # An aware date keeps its own zone: 17:30 in Kolkata is 12:00 UTC.
        (
            {
                "trigger": "once",
                "at": datetime(2026, 1, 1, 17, 30, tzinfo=ZoneInfo("Asia/Kolkata")),
            },
            AT,
        ),
        (
            {
                "anchor": datetime(2026, 1, 1, 7, tzinfo=ZoneInfo("America/New_York")),
                "interval_s": 86400,
            },
            AT,
        ),
    ],
)
def test_trigger_of_reads_each_kind_in_utc(doc, first):
    assert trigger_of(doc).next_after(AT - timedelta(seconds=1)) == first


def test_trigger_of_names_an_unknown_kind():
    with pytest.raises(ValueError) as caught:
        trigger_of({"trigger": "lunar"})
    assert str(caught.value) == "trigger: unknown kind 'lunar' (interval, cron or once)"


@pytest.mark.parametrize("limit", [0, 1, 2, 5])
def test_upcoming_stops_at_the_limit(limit):
    trigger = IntervalTrigger(IntervalSchedule(AT, 60.0))
    times = upcoming(trigger, AT, timedelta(hours=1), limit)
    assert times == [AT + timedelta(minutes=m) for m in range(1, limit + 1)]
