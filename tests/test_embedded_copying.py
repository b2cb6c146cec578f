"""The embedded store's copies and date conversions give what mongomock's own functions give."""

from __future__ import annotations

import copy
import datetime
from collections import OrderedDict

import bson
from hypothesis import given
from hypothesis import strategies as st
from mongomock import collection as mongomock_collection
from mongomock import helpers

from crawlsched.store.embedded.copying import (
    _mongomock_patch_datetimes,
    aware_copy,
    aware_dict,
    make_aware,
    patch_datetimes,
    reader_copy,
)

PLUS_TWO = datetime.timezone(datetime.timedelta(hours=2))
datetimes = st.datetimes(
    min_value=datetime.datetime(2000, 1, 1), max_value=datetime.datetime(2100, 1, 1)
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.just(bson.ObjectId("0" * 24)),
    datetimes,
    datetimes.map(lambda d: d.replace(tzinfo=datetime.UTC)),
    datetimes.map(lambda d: d.replace(tzinfo=PLUS_TWO)),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=2), inner, max_size=3),
        st.dictionaries(st.text(max_size=2), inner, max_size=3).map(OrderedDict),
    ),
    max_leaves=8,
)


def _typed(value):
    """The value with every container's and scalar's class spelled out (1 and True differ)."""
    if isinstance(value, dict):
        return (type(value).__name__, [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_typed(v) for v in value])
    return (type(value).__name__, repr(value))


@given(values)
def test_dates_are_made_naive_as_mongomock_makes_them(value):
    assert _typed(patch_datetimes(value)) == _typed(_mongomock_patch_datetimes(value))


@given(values)
def test_a_reader_gets_the_copy_mongomock_gives(value):
    assert _typed(reader_copy(value)) == _typed(mongomock_collection._copy_field(value, dict))


@given(st.dictionaries(st.text(max_size=2), values, max_size=4))
def test_dates_of_a_copy_become_aware_as_mongomock_makes_them(doc):
    stored = _mongomock_patch_datetimes(doc)  # what a store holds: naive dates
    expected = helpers.make_datetime_timezone_aware_in_document(copy.deepcopy(stored))
    assert _typed(make_aware(reader_copy(stored))) == _typed(expected)


@given(st.dictionaries(st.text(max_size=2), values, max_size=4), st.sets(st.text(max_size=2)))
def test_a_copy_made_aware_in_one_pass_is_mongomocks_copy_made_aware(doc, drop):
    # Stored dates are naive, but an aware one is made UTC as mongomock's helper makes it.
    stored = _mongomock_patch_datetimes(doc)
    for held in (stored, doc):
        expected = helpers.make_datetime_timezone_aware_in_document(copy.deepcopy(held))
        assert _typed(aware_copy(held)) == _typed(expected)
        kept = {k: v for k, v in expected.items() if k not in drop}
        assert _typed(aware_dict(held, drop)) == _typed(kept)
    copied = aware_copy(stored)
    for key, value in stored.items():
        if isinstance(value, dict | list):
            assert copied[key] is not value  # a reader may change its copy
