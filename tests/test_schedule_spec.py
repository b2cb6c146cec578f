"""Schedule input: valid input makes a schedule that fires after now; updates keep or restart
the fire times as documented; bad settings are refused naming the field."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from crawlsched.schedules.spec import apply_update, build_schedule
from crawlsched.schedules.triggers import trigger_of
from crawlsched.settings import Settings
from tests.support.factories import utc_datetimes

nows = utc_datetimes(datetime(2020, 1, 1), datetime(2035, 1, 1))
triggers = st.one_of(
    st.floats(0.5, 30 * 86400, allow_nan=False).map(lambda s: {"interval_s": s}),
    st.tuples(
        st.sampled_from(["*/5 * * * *", "0 9 * * 1-5", "30 2 * * *", "0 0 1 * *"]),
        st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata"]),
    ).map(lambda p: {"cron": p[0], "timezone": p[1]}),
    st.integers(1, 10**8).map(lambda s: {"at_in_s": s}),
)


def _resolve(trigger: dict, now: datetime) -> dict:
    if "at_in_s" in trigger:
        return {"at": now + timedelta(seconds=trigger["at_in_s"])}
    return trigger


@settings(max_examples=200)
@given(nows, triggers, st.sampled_from([["profiles"], ["websites"], ["profiles", "websites"]]))
def test_a_new_schedule_first_fires_after_now_on_its_trigger(now, trigger, collections):
    doc = build_schedule("s-1", {**_resolve(trigger, now), "collections": collections}, now)
    first = doc["next_fire_at"]
    assert first > now
    # It is a fire time of the trigger: the trigger's first after a moment just before it
    assert trigger_of(doc).next_after(first - timedelta(milliseconds=1)) == first
    assert (doc["state"], doc["enabled"], doc["misfire"], doc["overlap"]) == (
        "active",
        True,
        "run_once",
        "allow",
    )


@settings(max_examples=100)
@given(nows, triggers, triggers, st.integers(0, 10**6))
def test_updates_keep_the_next_fire_time_unless_the_trigger_changes(now, old, new, later_s):
    doc = build_schedule("s-1", {**_resolve(old, now), "collections": ["websites"]}, now)
    later = now + timedelta(seconds=later_s)
    kept = (
        apply_update(doc, {"owner": "ops"}, later) if "at" not in doc or doc["at"] > later else None
    )
    if kept is not None:
        assert (kept["owner"], kept["next_fire_at"]) == ("ops", doc["next_fire_at"])
    moved = apply_update(doc, _resolve(new, later), later)
    assert moved["next_fire_at"] > later
    # No field of another trigger kind is left behind
    own = {"interval": {"interval_s", "anchor"}, "cron": {"cron", "timezone"}, "once": {"at"}}
    for name in {"interval_s", "anchor", "cron", "timezone", "at"} - own[moved["trigger"]]:
        assert moved[name] is None, name


@pytest.mark.parametrize(
    ("field", "value"),
    [("misfire_grace_s", "0"), ("misfire_grace_s", "nan"), ("schedule_horizon_days", "40")],
)
def test_bad_schedule_settings_are_refused_naming_the_field(monkeypatch, field, value):
    monkeypatch.setenv(f"CRAWLSCHED_{field.upper()}", value)
    with pytest.raises(ValidationError, match=field):
        Settings()


def test_misfire_grace_defaults_to_three_clock_intervals():
    assert Settings(clock_interval_s=2).misfire_grace == timedelta(seconds=6)
    assert Settings(misfire_grace_s=30).misfire_grace == timedelta(seconds=30)
