"""`plain` answers what its first form answered (every value through one `isinstance` chain),
for values of the types a store document holds and for subclasses of them."""

from __future__ import annotations

import math
from collections import OrderedDict
from datetime import UTC, date, datetime, timedelta, timezone

from bson import ObjectId
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.encoding import plain


def reference(value):
    if isinstance(value, dict):
        return {str(k): reference(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [reference(v) for v in value]
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, ObjectId):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Label(str):
    pass


class Count(int):
    pass


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.builds(Label, st.text(max_size=3)),
    st.builds(Count, st.integers(0, 9)),
    st.datetimes(),
    st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=2))])),
    st.dates(),
    st.binary(max_size=4),
    st.builds(ObjectId, st.binary(min_size=12, max_size=12)),
)
keys = st.one_of(st.text(max_size=3), st.integers(0, 3), st.booleans(), st.builds(Label, st.text()))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(keys, inner, max_size=3),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(OrderedDict),
    ),
    max_leaves=12,
)


@settings(max_examples=400, derandomize=True)
@given(values)
def test_plain_answers_like_one_isinstance_chain(value):
    got, expected = plain(value), reference(value)
    assert repr(got) == repr(expected)
    assert [type(v) for v in _leaves(got)] == [type(v) for v in _leaves(expected)]


def _leaves(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def test_plain_of_a_run_document():
    at = datetime(2026, 1, 2, 3, 4, 5, 600000)
    run = {"_id": "s:1", "created_at": at, "counts": {"failed": 1}, "ms": float("nan"), 3: [at]}
    assert plain(run) == {
        "_id": "s:1",
        "created_at": "2026-01-02T03:04:05.600000+00:00",
        "counts": {"failed": 1},
        "ms": None,
        "3": ["2026-01-02T03:04:05.600000+00:00"],
    }
