"""Schedule input: valid input makes a schedule that fires after now; updates keep or restart
the fire times as documented; bad settings are refused naming the field."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from crawlsched.schedules.spec import apply_update, build_schedule, horizon
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


NOW = datetime(2026, 3, 2, 12, 0, 0, 123456, tzinfo=UTC)
OUT_OF_RANGE = (
    "interval_s: seconds between fire times, more than 0 and at most 315360000 (10 years)"
)
SWEEP = {"collections": ["profiles"], "interval_s": 60}
WEBHOOK = {"url": "http://h.example/k?t=1", "shown": "http://h.example"}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        # One trigger, exactly.
        ({"collections": ["profiles"]}, "trigger: give exactly one of interval_s, cron or at"),
        ({**SWEEP, "cron": "* * * * *"}, "trigger: give exactly one of interval_s, cron or at"),
        ({**SWEEP, "timezone": "UTC"}, "timezone: only a cron trigger takes a time zone"),
        (
            {"collections": ["profiles"], "at": NOW + timedelta(days=1), "timezone": "UTC"},
            "timezone: only a cron trigger takes a time zone",
        ),
        ({**SWEEP, "interval_s": True}, "interval_s: must be a number of seconds, got True"),
        ({**SWEEP, "interval_s": "60"}, "interval_s: must be a number of seconds, got '60'"),
        ({**SWEEP, "interval_s": 0}, f"{OUT_OF_RANGE}, got 0"),
        ({**SWEEP, "interval_s": 0.0009}, f"{OUT_OF_RANGE}, got 0.0009"),
        ({**SWEEP, "interval_s": math.inf}, f"{OUT_OF_RANGE}, got inf"),
        ({**SWEEP, "interval_s": math.nan}, f"{OUT_OF_RANGE}, got nan"),
        ({**SWEEP, "interval_s": 1e308}, f"{OUT_OF_RANGE}, got 1e+308"),
        ({**SWEEP, "interval_s": 315360001}, f"{OUT_OF_RANGE}, got 315360001"),
        ({"collections": ["profiles"], "cron": "61 * * * *"}, "cron: invalid expression"),
        (
            {"collections": ["profiles"], "cron": "0 0 * * *", "timezone": "Mars/Olympus"},
            "timezone: unknown IANA time zone 'Mars/Olympus'",
        ),
        (
            {"collections": ["profiles"], "at": "2030-01-01T00:00:00Z"},
            "at: must be a date and time with a time zone, got '2030-01-01T00:00:00Z'",
        ),
        (
            {"collections": ["profiles"], "at": datetime(2030, 1, 1)},
            "at: must be a date and time with a time zone, got 2030-01-01T00:00:00",
        ),
        ({"collections": ["profiles"], "at": NOW}, f"at: {NOW.isoformat()} is in the past"),
        (
            {"collections": ["profiles"], "at": NOW - timedelta(seconds=1)},
            "at: 2026-03-02T11:59:59.123456+00:00 is in the past",
        ),
        # What it fires: a sweep of known collections, or targets of one known collection.
        ({"interval_s": 60}, "collections: a sweep needs at least one job collection"),
        ({"interval_s": 60, "collections": []}, "collections: a sweep needs at least one"),
        (
            {"interval_s": 60, "collections": ["profiles", "pets"]},
            "collections: unknown ['pets']; known: ['profiles', 'websites']",
        ),
        (
            {"interval_s": 60, "targets": ["a"]},
            "target_collection: must be one of ['profiles', 'websites']",
        ),
        (
            {"interval_s": 60, "targets": ["a"], "target_collection": "pets"},
            "target_collection: must be one of",
        ),
        (
            {"interval_s": 60, "targets": [], "target_collection": "websites"},
            "targets: give at least one target",
        ),
        (
            {"interval_s": 60, "targets": "a", "target_collection": "websites"},
            "targets: give at least one target",
        ),
        (
            {"interval_s": 60, "targets": ["x"] * 10_001, "target_collection": "websites"},
            "targets: at most 10000, got 10001",
        ),
        (
            {"interval_s": 60, "targets": ["a", " "], "target_collection": "websites"},
            "targets: each target must be a non-empty string",
        ),
        (
            {"interval_s": 60, "targets": ["a", 3], "target_collection": "websites"},
            "targets: each target must be a non-empty string",
        ),
        # Policies and fan-out.
        (
            {**SWEEP, "misfire": "later"},
            "misfire: one of ['skip', 'run_once', 'catch_up']",
        ),
        (
            {**SWEEP, "overlap": "queue"},
            "overlap: one of ['skip', 'buffer_one', 'allow']",
        ),
        ({**SWEEP, "catch_up_limit": -1}, "catch_up_limit: an integer from 0 to 1000, got -1"),
        ({**SWEEP, "catch_up_limit": 1001}, "catch_up_limit: an integer from 0 to 1000"),
        ({**SWEEP, "catch_up_limit": True}, "catch_up_limit: an integer from 0 to 1000"),
        ({**SWEEP, "catch_up_limit": 2.0}, "catch_up_limit: an integer from 0 to 1000"),
        ({**SWEEP, "catch_up_limit": None}, "catch_up_limit: an integer from 0 to 1000"),
        ({**SWEEP, "shards": 0}, "shards: an integer from 1 to 64, got 0"),
        ({**SWEEP, "shards": 65}, "shards: an integer from 1 to 64, got 65"),
        ({**SWEEP, "shards": True}, "shards: an integer from 1 to 64, got True"),
        ({**SWEEP, "shards": 2.0}, "shards: an integer from 1 to 64, got 2.0"),
        # The webhook: http(s), a host, no credentials, known events.
        ({**SWEEP, "webhook": 42}, "webhook: a URL of at most 2000 characters"),
        (
            {**SWEEP, "webhook": "https://h.example/" + "x" * 1983},
            "webhook: a URL of at most 2000 characters",
        ),
        # A refused URL is not echoed back: a webhook's path or query may hold its secret.
        ({**SWEEP, "webhook": "ftp://h.example/x"}, "webhook: an http:// or https:// URL"),
        ({**SWEEP, "webhook": "https:///x"}, "webhook: an http:// or https:// URL with a host"),
        ({**SWEEP, "webhook": "http://h.example:99999/x"}, "webhook: an http:// or https://"),
        # The trigger is checked first: a bad zone is named even when later fields are bad too.
        (
            {
                "collections": ["profiles"],
                "cron": "0 0 * * *",
                "timezone": "Mars/Olympus",
                "webhook": "ftp://h.example",
            },
            "timezone: unknown IANA time zone 'Mars/Olympus'",
        ),
        ({**SWEEP, "webhook": "http://[::1"}, "webhook: an http:// or https:// URL with a host"),
        (
            {**SWEEP, "webhook": "https://ops:pw@h.example/x"},
            "webhook: no user:password@ in the URL",
        ),
        ({**SWEEP, "webhook": "https://ops@h.example/x"}, "webhook: no user:password@"),
        (
            {**SWEEP, "webhook": "https://h.example/x", "notify_on": ["finished", "paused"]},
            "notify_on: unknown ['paused']; one or more of "
            "['finished', 'failed', 'incomplete', 'stopped']",
        ),
        # Who owns it.
        ({**SWEEP, "owner": "o" * 101}, "owner: a string of at most 100 characters"),
        ({**SWEEP, "owner": 7}, "owner: a string of at most 100 characters"),
    ],
)
def test_build_schedule_refuses_bad_input_naming_the_field(given, message):
    with pytest.raises(ValueError) as caught:
        build_schedule("s-1", given, NOW)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("schedule_id", ["", "-a", ".a", "a b", "a/b", "é", "a" * 101, 7, None])
def test_build_schedule_refuses_a_bad_id(schedule_id):
    with pytest.raises(ValueError, match=r"^id: 1-100 letters, digits or _\.:- starting with"):
        build_schedule(schedule_id, SWEEP, NOW)


@pytest.mark.parametrize("schedule_id", ["a", "0", "A" * 100, "sweep_profiles.v2:eu-1"])
def test_build_schedule_takes_ids_up_to_100_characters(schedule_id):
    assert build_schedule(schedule_id, SWEEP, NOW)["_id"] == schedule_id


def test_build_schedule_of_an_interval_sweep_fills_every_field():
    doc = build_schedule("s-1", SWEEP, NOW)

    # The grid starts one interval after now, cut to the millisecond as MongoDB keeps it.
    first = datetime(2026, 3, 2, 12, 1, 0, 123000, tzinfo=UTC)
    assert doc == {
        "_id": "s-1",
        "owner": "default",
        "kind": "sweep",
        "collections": ["profiles"],
        "targets": None,
        "trigger": "interval",
        "interval_s": 60.0,
        "anchor": first,
        "misfire": "run_once",
        "overlap": "allow",
        "catch_up_limit": 10,
        "shards": 1,
        "notify": None,
        "state": "active",
        "enabled": True,
        "buffered_fire_at": None,
        "created_at": NOW,
        "updated_at": NOW,
        "next_fire_at": first,
    }
    assert type(doc["interval_s"]) is float


def test_build_schedule_of_a_target_set_with_every_option():
    doc = build_schedule(
        "s-2",
        {
            "owner": "o" * 100,
            "targets": ["b.example", "a.example", "b.example"],
            "target_collection": "websites",
            "cron": "30 2 * * *",
            "timezone": "Europe/Paris",
            "misfire": "catch_up",
            "catch_up_limit": 1000,
            "overlap": "buffer_one",
            "shards": 64,
            "webhook": "https://h.example/" + "x" * 1982,
            "notify_on": ["stopped", "finished", "stopped"],
        },
        NOW,
    )

    assert (doc["owner"], doc["kind"], doc["collections"]) == ("o" * 100, "targets", ["websites"])
    # Targets once each, sorted; events in their documented order.
    assert (doc["target_collection"], doc["targets"]) == ("websites", ["a.example", "b.example"])
    assert (doc["trigger"], doc["cron"], doc["timezone"]) == ("cron", "30 2 * * *", "Europe/Paris")
    assert "anchor" not in doc and "interval_s" not in doc
    assert (doc["misfire"], doc["catch_up_limit"], doc["overlap"]) == (
        "catch_up",
        1000,
        "buffer_one",
    )
    assert doc["shards"] == 64
    assert doc["notify"] == {
        "webhook": {"url": "https://h.example/" + "x" * 1982, "shown": "https://h.example"},
        "on": ["finished", "stopped"],
    }
    # 02:30 in Paris (UTC+1 in March before the change) is 01:30 UTC, the next morning.
    assert doc["next_fire_at"] == datetime(2026, 3, 3, 1, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("extra", "fields"),
    [
        ({"cron": "0 9 * * *"}, {"trigger": "cron", "cron": "0 9 * * *", "timezone": "UTC"}),
        ({"cron": "0 9 * * *", "timezone": ""}, {"timezone": "UTC"}),
        (
            {"at": NOW + timedelta(microseconds=1)},
            {"trigger": "once", "at": NOW + timedelta(microseconds=1)},
        ),
        ({"interval_s": 0.001}, {"interval_s": 0.001}),
        (
            {"interval_s": 60, "targets": ["a"] * 10_000, "target_collection": "profiles"},
            {"targets": ["a"]},
        ),
        (
            {"interval_s": 60, "misfire": None, "overlap": ""},
            {"misfire": "run_once", "overlap": "allow"},
        ),
        ({"interval_s": 60, "catch_up_limit": 0, "shards": 1}, {"catch_up_limit": 0, "shards": 1}),
        ({"interval_s": 60, "owner": ""}, {"owner": "default"}),
        ({"interval_s": 60, "webhook": ""}, {"notify": None}),
        (
            {"interval_s": 60, "webhook": "http://h.example/k?t=1"},
            {"notify": {"webhook": WEBHOOK, "on": ["finished", "failed", "incomplete"]}},
        ),
        (
            {"interval_s": 60, "webhook": "http://h.example/k?t=1", "notify_on": []},
            {"notify": {"webhook": WEBHOOK, "on": ["finished", "failed", "incomplete"]}},
        ),
    ],
)
def test_build_schedule_takes_the_edges_and_fills_the_defaults(extra, fields):
    doc = build_schedule("s-1", {"collections": ["profiles"], **extra}, NOW)
    assert {k: doc[k] for k in fields} == fields


@pytest.mark.parametrize("days", [0, -1, 31.001, math.inf, math.nan])
def test_horizon_refuses_days_outside_zero_to_31(days):
    with pytest.raises(ValueError, match=r"^horizon: between 0 and 31 days"):
        horizon(days)


@pytest.mark.parametrize("days", [0.5, 1, 31])
def test_horizon_is_that_many_days(days):
    assert horizon(days) == timedelta(days=days)


LATER = NOW + timedelta(hours=5)


def stored(**given):
    """A schedule as the store holds it, made an hour before NOW."""
    return build_schedule("s-1", {"collections": ["profiles"], **given}, NOW - timedelta(hours=1))


def test_apply_update_refuses_fields_that_belong_to_the_operations():
    for field in ("state", "enabled", "_id", "next_fire_at", "created_at"):
        with pytest.raises(ValueError) as caught:
            apply_update(stored(interval_s=60), {field: "x"}, LATER)
        assert str(caught.value).startswith(f"{field}: cannot be changed (editable: owner, ")


def test_apply_update_of_a_setting_keeps_the_fire_times_and_the_rest():
    current = {
        **stored(
            interval_s=60,
            misfire="skip",
            overlap="buffer_one",
            catch_up_limit=3,
            shards=4,
            webhook="https://h.example/x",
            notify_on=["stopped"],
        ),
        "buffered_fire_at": NOW,
        "next_fire_at": NOW + timedelta(minutes=2),
    }

    fields = apply_update(current, {"owner": "ops", "shards": None}, LATER)

    # Only the owner and the update time change; a None in the changes changes nothing; the
    # operations' fields (id, state, enabled, created_at, buffered time) are not touched.
    assert fields == {
        "owner": "ops",
        "kind": "sweep",
        "collections": ["profiles"],
        "targets": None,
        "trigger": "interval",
        "interval_s": 60.0,
        "anchor": current["anchor"],
        "next_fire_at": NOW + timedelta(minutes=2),
        "misfire": "skip",
        "overlap": "buffer_one",
        "catch_up_limit": 3,
        "shards": 4,
        "notify": {
            "webhook": {"url": "https://h.example/x", "shown": "https://h.example"},
            "on": ["stopped"],
        },
        "updated_at": LATER,
        "cron": None,
        "at": None,
        "timezone": None,
    }


def test_apply_update_of_the_trigger_restarts_from_now_and_drops_the_buffered_time():
    current = {**stored(interval_s=60), "buffered_fire_at": NOW}

    fields = apply_update(current, {"cron": "0 9 * * *", "timezone": "Asia/Kolkata"}, LATER)

    # 09:00 in Kolkata is 03:30 UTC, the next day after LATER (17:00 UTC).
    assert (fields["trigger"], fields["cron"], fields["timezone"]) == (
        "cron",
        "0 9 * * *",
        "Asia/Kolkata",
    )
    assert fields["next_fire_at"] == datetime(2026, 3, 3, 3, 30, tzinfo=UTC)
    assert (fields["interval_s"], fields["anchor"], fields["at"]) == (None, None, None)
    assert fields["buffered_fire_at"] is None


def test_apply_update_of_the_interval_alone_drops_the_old_grid():
    current = stored(interval_s=60)
    fields = apply_update(current, {"interval_s": 3600}, LATER)
    first = LATER.replace(microsecond=123000) + timedelta(hours=1)
    assert (fields["interval_s"], fields["anchor"], fields["next_fire_at"]) == (
        3600.0,
        first,
        first,
    )


def test_apply_update_of_the_time_zone_alone_moves_a_cron_schedule():
    current = stored(cron="0 9 * * *", timezone="Asia/Kolkata")

    fields = apply_update(current, {"timezone": "UTC"}, LATER)

    # The expression stays; the next fire time is 09:00 UTC, the day after LATER.
    assert (fields["cron"], fields["timezone"]) == ("0 9 * * *", "UTC")
    assert fields["next_fire_at"] == datetime(2026, 3, 3, 9, tzinfo=UTC)
    assert fields["buffered_fire_at"] is None


def test_apply_update_of_a_cron_schedule_keeps_its_zone_and_fire_time():
    current = stored(cron="0 9 * * *", timezone="Asia/Kolkata")
    fields = apply_update(current, {"misfire": "skip"}, LATER)
    assert (fields["cron"], fields["timezone"]) == ("0 9 * * *", "Asia/Kolkata")
    assert fields["next_fire_at"] == current["next_fire_at"]
    assert "buffered_fire_at" not in fields


def test_apply_update_of_an_interval_schedule_ignores_stale_fields_of_another_trigger():
    # An interval schedule (or one of earlier versions, without `trigger`) may still carry the
    # field of another kind; an edit of something else must not read it as a second trigger.
    for current in (
        {**stored(interval_s=60), "cron": "0 9 * * *"},
        {**stored(interval_s=60), "at": LATER + timedelta(days=1)},
        {k: v for k, v in stored(interval_s=60).items() if k != "trigger"} | {"cron": "* * * * *"},
    ):
        fields = apply_update(current, {"owner": "ops"}, LATER)
        assert (fields["owner"], fields["interval_s"], fields["cron"], fields["at"]) == (
            "ops",
            60.0,
            None,
            None,
        )


def test_apply_update_of_a_target_set():
    current = stored(interval_s=60, targets=["a"], target_collection="websites")

    fields = apply_update(current, {"targets": ["c", "b"]}, LATER)
    assert (fields["target_collection"], fields["targets"]) == ("websites", ["b", "c"])
    fields = apply_update(current, {"target_collection": "profiles"}, LATER)
    assert (fields["collections"], fields["targets"]) == (["profiles"], ["a"])
    # A sweep has no target collection to keep, whatever the update says.
    fields = apply_update(stored(interval_s=60), {"target_collection": "websites"}, LATER)
    assert (fields["kind"], fields["collections"]) == ("sweep", ["profiles"])


def test_apply_update_drops_the_webhook_with_an_empty_url():
    current = stored(interval_s=60, webhook="https://h.example/x")
    assert apply_update(current, {"webhook": ""}, LATER)["notify"] is None
    kept = apply_update(current, {"notify_on": ["failed"]}, LATER)["notify"]
    assert kept == {
        "webhook": {"url": "https://h.example/x", "shown": "https://h.example"},
        "on": ["failed"],
    }


def test_a_sealed_webhook_is_kept_as_it_is_and_a_new_one_shown_by_scheme_and_host():
    sealed = {"secret": "gAAAA-ciphertext", "shown": "https://h.example:8443"}
    current = {**stored(interval_s=60), "notify": {"webhook": sealed, "on": ["failed"]}}
    assert apply_update(current, {"owner": "ops"}, LATER)["notify"]["webhook"] == sealed
    new = apply_update(current, {"webhook": "https://x.example:8443/p?key=s3cr3t"}, LATER)
    assert new["notify"]["webhook"]["shown"] == "https://x.example:8443"


def test_an_interval_grid_starts_on_the_millisecond_now_is_in():
    # 500.25 ms and 999.999 ms are in the 500th and 999th milliseconds.
    for micro, milli in ((500_250, 500), (999_999, 999), (1_000, 1)):
        now = datetime(2026, 3, 2, 12, 0, 0, micro, tzinfo=UTC)
        doc = build_schedule("s-1", SWEEP, now)
        assert doc["anchor"] == datetime(2026, 3, 2, 12, 1, 0, milli * 1000, tzinfo=UTC)
