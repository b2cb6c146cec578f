"""A compiled filter gives mongomock's answer, or admits it is unsure (never another answer)."""

from __future__ import annotations

import datetime

import bson
from hypothesis import given
from hypothesis import strategies as st
from mongomock.filtering import filter_applies

from crawlsched.store.embedded.matching import UNSURE, compile_filter

NAIVE = datetime.datetime(2026, 1, 1, 12)
AWARE = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.UTC)
FIELDS = ["a", "b", "_id", "a.k", "a.k.k"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from([0.0, 1.0, 1.5, float("nan"), float("inf")]),
    st.sampled_from(["", "x", "y", "é"]),
    st.sampled_from([NAIVE, NAIVE + datetime.timedelta(seconds=1), AWARE]),
    st.sampled_from([bson.ObjectId("0" * 24), bson.ObjectId("f" * 24)]),
)
document_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=2),
    st.fixed_dictionaries({"k": scalars}),
    st.just(b"bytes"),
)
operators = st.sampled_from(["$eq", "$ne", "$lt", "$lte", "$gt", "$gte"])
conditions = st.one_of(
    scalars,
    st.dictionaries(operators, scalars, min_size=1, max_size=2),
    st.builds(lambda v: {"$in": v}, st.lists(scalars, max_size=3)),
    st.builds(lambda v: {"$nin": v}, st.lists(scalars, max_size=3)),
    st.builds(lambda v: {"$exists": v}, st.booleans()),
    st.builds(
        lambda v: {"$type": v}, st.sampled_from(["double", "string", "objectId", "bool", "date"])
    ),
    st.builds(lambda v: {"$in": v}, st.lists(st.lists(scalars, max_size=1), max_size=2)),
)
field_filters = st.dictionaries(st.sampled_from(FIELDS), conditions, max_size=3)
filters = st.one_of(
    field_filters,
    st.builds(
        lambda op, clauses: {op: clauses},
        st.sampled_from(["$and", "$or", "$nor"]),
        st.lists(field_filters, min_size=1, max_size=3),
    ),
)
documents = st.dictionaries(
    st.sampled_from(["a", "b", "_id"]),
    st.one_of(
        document_values,
        st.fixed_dictionaries({"k": st.fixed_dictionaries({"k": scalars})}),
        st.lists(st.fixed_dictionaries({"k": scalars}), max_size=2),
    ),
    max_size=3,
)


def _mongomock(spec, doc):
    try:
        return ("answers", filter_applies(spec, doc))
    except Exception as error:
        return ("raises", type(error).__name__)


@given(spec=filters, doc=documents)
def test_a_compiled_filter_answers_like_mongomock_or_is_unsure(spec, doc):
    match = compile_filter(spec)
    if match is None:
        return  # not compiled: mongomock answers it
    verdict = match(doc)
    if verdict is not UNSURE:
        assert _mongomock(spec, doc) == ("answers", verdict)


@given(doc=st.dictionaries(st.sampled_from(["a", "b", "_id"]), scalars, max_size=3))
def test_the_filters_stores_send_compile_and_answer_scalar_documents(doc):
    # The claim, outcome and report filters: compiled, and sure of every scalar document.
    ids = [bson.ObjectId("0" * 24), 1, "x"]
    for spec in (
        {"_id": {"$in": ids}, "a": {"$in": [1, 3]}, "b": None},
        {"_id": doc.get("_id", 0), "b": "d1"},
        {"a": 2, "b": {"$lt": NAIVE}},
        {"a": {"$ne": None}, "$or": [{"b": {"$exists": False}}, {"b": {"$gte": 1}}]},
    ):
        match = compile_filter(spec)
        assert match is not None, spec
        verdict = match(doc)
        if not any(_is_aware(value) for value in doc.values()):  # stored dates are naive
            assert verdict is not UNSURE, (spec, doc)
            assert verdict == filter_applies(spec, doc)


def _is_aware(value):
    return isinstance(value, datetime.datetime) and value.tzinfo is not None


def test_shapes_it_does_not_know_are_left_to_mongomock():
    for spec in (
        {"a..b": 1},
        {"a": {"k": 1}},
        {"a": {"$regex": "x"}},
        {"a": {"$elemMatch": {"k": 1}}},
        {"$expr": {"$eq": ["$a", 1]}},
        {"$and": []},
        {"a": {"$in": [{"k": 1}]}},
        "not a filter",
    ):
        assert compile_filter(spec) is None, spec
