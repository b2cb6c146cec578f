"""The embedded store's TTL rule: a sweep with an injected clock removes exactly what a
MongoDB server's TTL monitor would, and nothing expires on a read behind the indexes' back."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mongomock import OperationFailure
from pydantic import ValidationError

from crawlsched.planning.retention import MAX_EXPIRE_AFTER_S, Retention, ttl_expired
from crawlsched.settings import Settings
from crawlsched.store.client import drop_embedded, open_database
from crawlsched.store.embedded.ttl import sweep_expired

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

# What a document's `expire_at` may hold, as seconds from NOW where it is a date: one date, a
# list of them, a value that is no date, or nothing at all.
offsets = st.integers(min_value=-10_000, max_value=10_000)
field_values = st.one_of(
    st.tuples(st.just("date"), offsets),
    st.tuples(st.just("dates"), st.lists(offsets, min_size=1, max_size=4)),
    st.tuples(
        st.just("other"),
        st.one_of(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), st.none()),
    ),
    st.tuples(st.just("missing"), st.none()),
)


def _value(kind: str, raw):
    if kind == "date":
        return NOW + timedelta(seconds=raw)
    if kind == "dates":
        return [NOW + timedelta(seconds=s) for s in raw]
    return raw


def _goes(kind: str, raw, after: int) -> bool:
    """The oracle, in plain seconds: a date (the earliest of a list) `after` seconds old."""
    if kind == "date":
        return raw + after <= 0
    if kind == "dates":
        return min(raw) + after <= 0
    return False


@pytest.fixture
def db():
    url = f"mongomock://ttl-{uuid.uuid4().hex}"
    yield open_database(url, "crawlsched")
    drop_embedded(url)


@given(fields=st.lists(field_values, max_size=30), after=st.integers(0, 5_000))
def test_sweep_removes_exactly_the_documents_whose_date_has_passed(fields, after):
    url = f"mongomock://ttl-{uuid.uuid4().hex}"
    db = open_database(url, "crawlsched")
    try:
        db.docs.create_index("expire_at", expireAfterSeconds=after, name="expiry")
        db.docs.create_index("kind", name="kind")  # a field index the sweep must keep current
        for i, (kind, raw) in enumerate(fields):
            doc = {"_id": i, "kind": kind}
            if kind != "missing":
                doc["expire_at"] = _value(kind, raw)
            db.docs.insert_one(doc)
        with db.locked():
            removed = sweep_expired(db.raw, NOW)
        expected_gone = {i for i, (kind, raw) in enumerate(fields) if _goes(kind, raw, after)}
        kept = {d["_id"] for d in db.docs.find({})}
        assert kept == set(range(len(fields))) - expected_gone
        assert removed == ({"docs": len(expected_gone)} if expected_gone else {})
        # The field index answers as the collection does: no removed document comes back.
        for kind in ("date", "dates", "other", "missing"):
            found = {d["_id"] for d in db.docs.find({"kind": kind})}
            assert found == {i for i in kept if fields[i][0] == kind}
    finally:
        drop_embedded(url)


@given(kind_raw=field_values, after=st.integers(0, 5_000))
def test_rule_agrees_with_the_oracle_in_any_time_zone(kind_raw, after):
    kind, raw = kind_raw
    value = _value(kind, raw)
    assert ttl_expired(value, NOW, after) is _goes(kind, raw, after)
    # Naive dates (as BSON hands them back) are UTC.
    if kind == "date":
        naive = value.replace(tzinfo=None)
        assert ttl_expired(naive, NOW, after) is _goes(kind, raw, after)


def test_nothing_expires_on_a_read_only_in_the_sweep(db):
    # Given a document whose date passed long ago by the wall clock
    db.docs.create_index("expire_at", expireAfterSeconds=0, name="expiry")
    db.docs.insert_one({"_id": "old", "expire_at": datetime(2000, 1, 1, tzinfo=UTC)})
    # Then reads still find it (mongomock's own expiry on read is off)...
    assert db.docs.count_documents({}) == 1 and db.docs.find_one({"_id": "old"})
    # ...a sweep at a clock before its date keeps it, and one after removes it
    with db.locked():
        assert sweep_expired(db.raw, datetime(1999, 12, 31, tzinfo=UTC)) == {}
        assert sweep_expired(db.raw, datetime(2000, 1, 1, tzinfo=UTC)) == {"docs": 1}
    assert db.docs.find_one({"_id": "old"}) is None


def test_sweep_counts_as_a_write_for_the_snapshots(db):
    db.docs.create_index("expire_at", expireAfterSeconds=0, name="expiry")
    db.docs.insert_many([{"_id": 1, "expire_at": NOW}, {"_id": 2}])
    store = db.raw.docs._store
    before = store.generation
    with db.locked():
        sweep_expired(db.raw, NOW)
    assert store.generation > before
    unchanged = store.generation
    with db.locked():
        assert sweep_expired(db.raw, NOW + timedelta(days=1)) == {}
    assert store.generation == unchanged  # nothing removed: nothing to snapshot again


def test_collections_without_a_ttl_index_are_left_alone(db):
    db.docs.insert_one({"_id": 1, "expire_at": NOW - timedelta(days=1)})
    with db.locked():
        assert sweep_expired(db.raw, NOW) == {}
    assert db.docs.count_documents({}) == 1


@pytest.mark.parametrize(
    ("keys", "after", "says"),
    [
        ([("a", 1), ("b", 1)], 0, "exactly one field"),
        ("_id", 0, "cannot be on _id"),
        ("a", -1, "integer from 0"),
        ("a", 1.5, "integer from 0"),
        ("a", MAX_EXPIRE_AFTER_S + 1, "integer from 0"),
        ("a", True, "must be a number"),
        ("a", "60", "must be a number"),
    ],
)
def test_ttl_index_options_refused_as_a_server_refuses_them(db, keys, after, says):
    with pytest.raises(OperationFailure, match=says):
        db.docs.create_index(keys, expireAfterSeconds=after)
    assert "a_1" not in db.docs.index_information()


def test_ttl_index_accepted_at_the_bounds(db):
    db.docs.create_index("a", expireAfterSeconds=0, name="zero")
    db.docs.create_index("b", expireAfterSeconds=MAX_EXPIRE_AFTER_S, name="most")
    info = db.docs.index_information()
    assert info["zero"]["expireAfterSeconds"] == 0
    assert info["most"]["expireAfterSeconds"] == MAX_EXPIRE_AFTER_S


@pytest.mark.parametrize("value", [0, -5, float("inf"), float("nan")])
def test_retention_refuses_a_time_that_is_not_positive_and_finite(value):
    with pytest.raises(ValueError, match="history_s"):
        Retention(history_s=value)


@pytest.mark.parametrize(
    "field", ["retain_discovered_s", "retain_history_s", "retain_activity_s",
              "retain_deliveries_s", "retain_idempotency_s"],
)  # fmt: skip
@pytest.mark.parametrize("value", ["0", "inf", "-1", str(11 * 365 * 86400)])
def test_retention_settings_refuse_bad_values(monkeypatch, field, value):
    monkeypatch.setenv(f"CRAWLSCHED_{field.upper()}", value)
    with pytest.raises(ValidationError, match=field):
        Settings()


def test_retention_settings_have_the_documented_defaults():
    s = Settings()
    assert (s.retain_discovered_s, s.retain_history_s, s.retain_activity_s) == (
        7 * 86400, 30 * 86400, 30 * 86400
    )  # fmt: skip
    assert (s.retain_deliveries_s, s.retain_idempotency_s) == (7 * 86400, 86400)


def test_sweep_leaves_no_index_entry_of_what_it_removed(db):
    # Given documents filed under a field index (as a run's jobs are under its id)
    db.docs.create_index("expire_at", expireAfterSeconds=0, name="expiry")
    db.docs.insert_many([{"_id": i, "run": "r1", "expire_at": NOW} for i in range(5)])
    db.docs.insert_one({"_id": "kept", "run": "r2"})
    assert db.docs.count_documents({"run": "r1"}) == 5  # builds the `run` field index
    # When the sweep removes them
    with db.locked():
        sweep_expired(db.raw, NOW)
    # Then no index remembers them (the value r1 is never looked up again to prune it)
    indexes = db.raw.docs._indexes
    assert set(indexes.order) == {"kept"}
    assert "r1" not in indexes.fields["run"].by_value
    assert db.docs.count_documents({"run": "r2"}) == 1
