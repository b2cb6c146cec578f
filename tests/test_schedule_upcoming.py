"""Upcoming fire times of many schedules: shared triggers computed once, each schedule's own
early fire time first, disabled and finished schedules left out, rows in time order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from crawlsched.schedules.upcoming import (
    UPCOMING_LIMIT,
    trigger_key,
    upcoming_by_schedule,
    upcoming_rows,
)

NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)
DAY = timedelta(days=1)


def every(hours: float, sid: str = "s") -> dict:
    anchor = NOW + timedelta(hours=hours)
    return {"_id": sid, "trigger": "interval", "anchor": anchor, "interval_s": hours * 3600}


def hourly_from(start: datetime, n: int) -> list[datetime]:
    return [start + timedelta(hours=h) for h in range(n)]


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"trigger": "cron", "cron": "0 9 * * *"}, ("cron", "0 9 * * *", "UTC")),
        ({"trigger": "cron", "cron": "0 9 * * *", "timezone": None}, ("cron", "0 9 * * *", "UTC")),
        (
            {"trigger": "cron", "cron": "0 9 * * *", "timezone": "Asia/Kolkata"},
            ("cron", "0 9 * * *", "Asia/Kolkata"),
        ),
        ({"trigger": "once", "at": NOW}, ("once", NOW)),
        ({"trigger": "interval", "anchor": NOW, "interval_s": 60.0}, ("interval", NOW, 60.0)),
        # Documents of earlier versions carry no `trigger`: interval sweeps.
        ({"anchor": NOW, "interval_s": 60.0}, ("interval", NOW, 60.0)),
    ],
)
def test_trigger_key_table(doc, key):
    assert trigger_key(doc) == key


def test_upcoming_by_schedule_lists_each_schedules_own_trigger():
    # Four schedules, two sharing one trigger: each gets its trigger's times, never another's.
    docs = [
        {**every(1), "_id": "a"},
        {**every(1), "_id": "b"},
        {**every(2), "_id": "c"},
        {"_id": "d", "trigger": "cron", "cron": "0 0 * * *", "timezone": "Asia/Kolkata"},
        {"_id": "e", "trigger": "once", "at": NOW + timedelta(hours=5)},
    ]

    got = upcoming_by_schedule(docs, NOW, DAY)

    assert got["a"] == got["b"] == hourly_from(NOW + timedelta(hours=1), 24)
    assert got["c"] == [NOW + timedelta(hours=2 * k) for k in range(1, 13)]
    # Midnight in Kolkata is 18:30 UTC the day before.
    assert got["d"] == [datetime(2026, 3, 2, 18, 30, tzinfo=UTC)]
    assert got["e"] == [NOW + timedelta(hours=5)]


@pytest.mark.parametrize(
    ("extra", "listed"),
    [
        ({}, True),  # no flag: enabled
        ({"enabled": True}, True),
        ({"enabled": False}, False),  # paused
        ({"next_fire_at": None}, False),  # a one-time schedule that fired: nothing to come
    ],
)
def test_upcoming_by_schedule_leaves_out_paused_and_finished_schedules(extra, listed):
    got = upcoming_by_schedule([{**every(1), **extra}], NOW, DAY)
    assert ("s" in got) is listed


@pytest.mark.parametrize(
    ("early", "expected_first", "count"),
    [
        # Made due early ("fire now"): its own next fire time comes first, then the grid.
        (NOW + timedelta(minutes=10), NOW + timedelta(minutes=10), 25),
        # Already a grid time: not listed twice.
        (NOW + timedelta(hours=3), NOW + timedelta(hours=1), 24),
        # At now (due, not upcoming) or past the horizon: not added.
        (NOW, NOW + timedelta(hours=1), 24),
        (NOW + DAY + timedelta(minutes=1), NOW + timedelta(hours=1), 24),
        # The horizon's end is in the window (now, now + horizon].
        (NOW + DAY - timedelta(minutes=30), NOW + timedelta(hours=1), 25),
    ],
)
def test_upcoming_by_schedule_lists_an_early_fire_time_once_in_order(early, expected_first, count):
    got = upcoming_by_schedule([{**every(1), "next_fire_at": early}], NOW, DAY)["s"]
    assert got[0] == expected_first
    assert len(got) == count
    assert got == sorted(set(got))
    if NOW < early <= NOW + DAY:
        assert early in got


def test_an_early_fire_time_stays_with_its_schedule():
    # Two schedules share a trigger; only the one made due early lists the extra time, and the
    # limit still holds for it.
    early = NOW + timedelta(minutes=10)
    docs = [{**every(1), "_id": "early", "next_fire_at": early}, {**every(1), "_id": "plain"}]

    got = upcoming_by_schedule(docs, NOW, DAY, limit=3)

    assert got["early"] == [early, NOW + timedelta(hours=1), NOW + timedelta(hours=2)]
    assert got["plain"] == hourly_from(NOW + timedelta(hours=1), 3)
    # In the other order, too (the shared list is not changed in place).
    got = upcoming_by_schedule(list(reversed(docs)), NOW, DAY, limit=3)
    assert got["plain"] == hourly_from(NOW + timedelta(hours=1), 3)


def test_upcoming_is_capped_per_schedule_by_default():
    # A 1 s interval over three hours would list 10,800 times.
    doc = {"_id": "fast", "trigger": "interval", "anchor": NOW, "interval_s": 1.0}
    got = upcoming_by_schedule([doc], NOW, timedelta(hours=3))["fast"]
    assert len(got) == UPCOMING_LIMIT == 10_000
    assert got[-1] == NOW + timedelta(seconds=UPCOMING_LIMIT)
    rows = upcoming_rows([doc], NOW, timedelta(hours=3))
    assert len(rows) == UPCOMING_LIMIT


def test_upcoming_rows_are_in_time_order_then_by_schedule_id():
    docs = [
        {**every(2), "_id": "b"},
        {**every(1), "_id": "a"},
        {**every(2), "_id": 10},  # ids need not be strings
    ]

    rows = upcoming_rows(docs, NOW, timedelta(hours=4))

    one, two, three, four = hourly_from(NOW + timedelta(hours=1), 4)
    assert rows == [
        ("a", one),
        (10, two),
        ("a", two),
        ("b", two),
        ("a", three),
        (10, four),
        ("a", four),
        ("b", four),
    ]
    assert upcoming_rows(docs, NOW, timedelta(hours=4), limit=1) == [
        ("a", one),
        (10, two),
        ("b", two),
    ]


def test_upcoming_by_schedule_goes_on_past_a_paused_schedule():
    docs = [{**every(1), "_id": "paused", "enabled": False}, {**every(2), "_id": "on"}]
    assert list(upcoming_by_schedule(docs, NOW, DAY)) == ["on"]


def test_an_early_fire_time_at_the_horizons_end_is_listed():
    # Every 5 h from now + 5 h: 24 h from now is no grid time, and it is in (now, now + 24 h].
    times = upcoming_by_schedule([{**every(5), "next_fire_at": NOW + DAY}], NOW, DAY)["s"]
    assert times == [NOW + timedelta(hours=h) for h in (5, 10, 15, 20, 24)]
