"""The embedded store's indexes change how fast it answers, never what it answers.

Random writes (insert, update one/many by `$set`/`$unset` or otherwise, delete, upsert) go to an
indexed collection and to a plain mongomock collection side by side; after each, random queries
(equality, `$in`/`$nin`, `$ne`, comparisons, `$exists`, `$and`/`$or`/`$nor`, on `_id` and other
fields, values of mixed types including NaN, arrays and sub-documents) must return the same
documents in the same order, and a unique index must refuse the same writes. Aggregations (a
leading `$match`, `$sort`, then stages that stream a few documents at a time) must answer like
mongomock's own.
"""

from __future__ import annotations

import datetime

import bson
import mongomock
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from mongomock.collection import Collection

from crawlsched.store import embedded
from crawlsched.store.embedded import aggregation as embedded_aggregation
from crawlsched.store.embedded import collection as embedded_collection

FIELDS = ["a", "b", "c"]
values = st.one_of(
    st.none(),
    st.integers(0, 3),
    st.sampled_from([1.0, 2.5, float("nan")]),
    st.sampled_from(["x", "y"]),
    st.booleans(),
    st.sampled_from([datetime.datetime(2026, 1, 1), datetime.datetime(2026, 1, 2, 3, 4, 5)]),
    st.sampled_from([bson.ObjectId("0" * 24), bson.ObjectId("1" * 24)]),
    st.lists(st.integers(0, 3), max_size=2),
    st.fixed_dictionaries({"k": st.integers(0, 1)}),
    # What a resource holds its leases in: a list of sub-documents ($pull takes from it).
    st.lists(
        st.fixed_dictionaries(
            {"k": st.sampled_from([0, 1, "x", [1]])}, optional={"m": st.integers(0, 1)}
        ),
        max_size=3,
    ),
)
ids = st.integers(0, 12)
OPERATORS = ["$eq", "$ne", "$lt", "$lte", "$gt", "$gte"]


def condition():
    return st.one_of(
        values,
        st.builds(lambda v: {"$in": v}, st.lists(values, max_size=3)),
        st.builds(lambda v: {"$nin": v}, st.lists(values, max_size=3)),
        st.builds(lambda v: {"$exists": v}, st.booleans()),
        st.dictionaries(st.sampled_from(OPERATORS), values, min_size=1, max_size=2),
    )


def field_queries(names):
    return st.dictionaries(st.sampled_from(names), condition(), min_size=1, max_size=2)


queries = st.one_of(
    field_queries(["_id", *FIELDS]),
    st.builds(
        lambda op, parts: {op: parts},
        st.sampled_from(["$and", "$or", "$nor"]),
        st.lists(field_queries(FIELDS), min_size=1, max_size=2),
    ),
)
updates = st.one_of(
    st.builds(lambda f, v: {"$set": {f: v}}, st.sampled_from(FIELDS), values),
    st.builds(
        lambda sets, unset: {"$set": sets, "$unset": {unset: ""}},
        st.dictionaries(st.sampled_from(FIELDS[:2]), values, min_size=1),
        st.just("c"),
    ),
    st.builds(lambda f: {"$unset": {f: ""}}, st.sampled_from(FIELDS)),
    # Counters, compare-and-sets and releases (`$pull` a lease, count the version, `$max`
    # the release time): the fast path where it computes mongomock's answer, mongomock's
    # where it does not (a `$inc` onto a string, a `$max` of a date onto a number, a list
    # element that is not a sub-document), and the same errors either way.
    st.builds(
        lambda f, v: {"$inc": {f: v}},
        st.sampled_from(FIELDS),
        st.sampled_from([1, 2, 0, -1, 0.5, True]),
    ),
    st.builds(lambda f, v: {"$max": {f: v}}, st.sampled_from(FIELDS), values),
    st.builds(
        lambda f, k, extra: {"$pull": {f: {"k": k, **extra}}},
        st.sampled_from(FIELDS),
        st.sampled_from([0, 1, "x"]),
        st.sampled_from([{}, {"m": 1}, {"m": {"$gt": 0}}]),
    ),
    st.builds(
        lambda v, b: {"$set": {"a": v}, "$inc": {"b": b}},
        values,
        st.sampled_from([1, 1.5]),
    ),
    st.builds(
        lambda k, when: {"$pull": {"c": {"k": k}}, "$inc": {"a": 1}, "$max": {"b": when}},
        st.sampled_from([0, 1]),
        st.sampled_from([datetime.datetime(2026, 1, 1), datetime.datetime(2026, 1, 3), 2]),
    ),
)
# What a crawl's result and discovered page are stored by: `$set` beside `$setOnInsert`, or
# `$setOnInsert` alone; and the cases mongomock must take (a field named twice, an empty
# `$setOnInsert`, a field of the filter set again).
upserts = st.one_of(
    st.builds(
        lambda sets, once: {"$set": sets, "$setOnInsert": once},
        st.dictionaries(st.sampled_from(FIELDS[:2]), values, min_size=1, max_size=2),
        st.fixed_dictionaries({"c": values}, optional={"first": values}),
    ),
    st.builds(
        lambda once: {"$setOnInsert": once},
        st.dictionaries(st.sampled_from([*FIELDS, "first"]), values, min_size=1, max_size=3),
    ),
    st.builds(
        lambda once, n: {"$setOnInsert": once, "$inc": {"n": n}},
        st.fixed_dictionaries({"b": values}),
        st.sampled_from([1, 2.5]),
    ),
    st.just({"$set": {"a": 1}, "$setOnInsert": {"a": 2}}),
    st.just({"$setOnInsert": {}}),
    updates,
)
projections = st.sampled_from(
    [None, {"a": 1}, {"a": 1, "_id": 0}, {"a": 0}, {"a": 0, "_id": 0}, {"b": 0, "c": 0, "_id": 1}]
)


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as error:
        return ("raises", type(error).__name__)


def _same(got, expected):
    """The same documents, fields in the same order (repr: a NaN equals a NaN here)."""
    return repr(list(got)) == repr(list(expected))


class IndexedVersusPlain(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        embedded.install()
        client = mongomock.MongoClient()
        db = client["t"]
        # Stream aggregations three documents at a time, so that results cross chunk edges.
        self._chunk = embedded_aggregation.STREAM_CHUNK
        embedded_aggregation.STREAM_CHUNK = 3
        self.indexed = db["indexed"]
        # The same database, but mongomock's own collection class: scans every time.
        self.plain = Collection(db, name="plain", _db_store=db._store)
        assert isinstance(self.indexed, embedded.IndexedCollection)
        assert not isinstance(self.plain, embedded.IndexedCollection)
        for collection in (self.indexed, self.plain):
            collection.create_index(
                [("b", 1), ("c", 1)],
                unique=True,
                partialFilterExpression={"b": {"$type": "string"}},
            )

    def both(self, method, *args, **kwargs):
        got = [
            _outcome(lambda c=c: getattr(c, method)(*args, **kwargs))
            for c in (self.indexed, self.plain)
        ]
        assert got[0][0] == got[1][0], (method, args, got)

    @rule(doc_id=ids, a=values, b=values, c=values)
    def insert(self, doc_id, a, b, c):
        existing = self.plain.find_one({"_id": doc_id})
        if existing is None:
            self.both("insert_one", {"_id": doc_id, "a": a, "b": b, "c": c})

    @rule(query=queries, update=updates, many=st.booleans())
    def update(self, query, update, many):
        self.both("update_many" if many else "update_one", query, update)

    @rule(doc_id=ids, field=st.sampled_from(FIELDS), match=values, update=st.none() | upserts)
    def upsert(self, doc_id, field, match, update):
        # With the _id in the query, so that both sides insert the same document.
        update = update or {"$set": {"a": match}}
        self.both("update_one", {"_id": doc_id, field: match}, update, upsert=True)

    @rule(query=queries)
    def delete(self, query):
        self.both("delete_one", query)

    @rule(query=queries, projection=projections)
    def same_answers(self, query, projection):
        assert _same(self.indexed.find(query, projection), self.plain.find(query, projection))
        assert self.indexed.count_documents(query) == self.plain.count_documents(query)

    @rule(
        query=st.one_of(st.just({}), queries),
        field=st.sampled_from(["_id", *FIELDS]),
        direction=st.sampled_from([1, -1]),
        skip=st.integers(0, 3),
        limit=st.integers(1, 4),
        projection=projections,
    )
    def same_pages(self, query, field, direction, skip, limit, projection):
        # A sort on one field with a limit walks that field's ordered index (ties, missing
        # fields, nulls, arrays, NaN and mixed types as mongomock's full sort orders them).
        pages = [
            _outcome(
                lambda c=c: list(
                    c.find(query, projection).sort(field, direction).skip(skip).limit(limit)
                )
            )
            for c in (self.indexed, self.plain)
        ]
        assert repr(pages[0]) == repr(pages[1]), (query, field, direction, skip, limit, pages)

    @rule(
        query=queries,
        field=st.sampled_from(FIELDS),
        direction=st.sampled_from([1, -1]),
        keep=st.sampled_from(FIELDS),
    )
    def same_aggregations(self, query, field, direction, keep):
        pipeline = [
            {"$match": query},
            {"$sort": {field: direction, "_id": 1}},
            {"$project": {"a": 1, "b": 1, keep: 1}},
            {"$addFields": {"copied": "$a"}},
            {"$match": {"b": {"$ne": "y"}}},
        ]
        assert _same(self.indexed.aggregate(pipeline), self.plain.aggregate(pipeline))

    @rule(query=queries, local=st.sampled_from(FIELDS), into=st.sampled_from(["j", "a"]))
    def same_joins(self, query, local, into):
        # Joined to the plain side's documents (the same as the indexed side's), then unwound
        # (an element of a list keeps the rest of its document), lifted and filtered by path.
        pipeline = [
            {"$match": query},
            {"$lookup": {"from": "plain", "localField": local, "foreignField": "b", "as": into}},
            {"$unwind": f"${into}"},
            {"$addFields": {"lifted": f"${into}.c", "whole": f"${into}"}},
            {"$match": {f"{into}.a": {"$ne": 1}, "lifted": {"$nin": ["x"]}}},
            {"$project": {"lifted": 1, into: 1, "_id": 0}},
        ]
        a, b = list(self.indexed.aggregate(pipeline)), list(self.plain.aggregate(pipeline))
        assert _same(a, b), (a, b, list(self.plain.find({})))

    def teardown(self):
        embedded_aggregation.STREAM_CHUNK = self._chunk

    @invariant()
    def same_documents(self):
        assert _same(self.indexed.find({}), self.plain.find({}))


IndexedVersusPlain.TestCase.settings = settings(
    max_examples=80, stateful_step_count=30, derandomize=True
)
test_embedded_indexes_answer_like_a_scan = IndexedVersusPlain.TestCase


@pytest.mark.parametrize("n", [2000])
def test_embedded_index_lookup_touches_only_matching_documents(n, monkeypatch):
    embedded.install()
    collection = mongomock.MongoClient()["t"]["jobs"]
    collection.insert_many([{"_id": i, "dispatch_id": f"d{i % 100}"} for i in range(n)])
    examined = 0
    compile_filter = embedded_collection.compile_filter

    def counting_compile(spec):
        match = compile_filter(spec)

        def counting_match(doc):
            nonlocal examined
            examined += 1
            return match(doc)

        return counting_match

    monkeypatch.setattr(embedded_collection, "compile_filter", counting_compile)
    assert len(list(collection.find({"dispatch_id": "d7"}))) == n // 100
    assert len(list(collection.find({"_id": {"$in": [1, 2, 3]}}))) == 3
    # Only the candidates were filtered: 20 + 3 documents, not 2 x 2,000.
    assert examined == n // 100 + 3


def test_embedded_aggregation_streams_a_chunk_at_a_time(monkeypatch):
    # Given more matching documents than one chunk
    embedded.install()
    collection = mongomock.MongoClient(tz_aware=True)["t"]["jobs"]
    collection.insert_many([{"_id": i, "state": 1, "rank": i % 7} for i in range(50)])
    monkeypatch.setattr(embedded_aggregation, "STREAM_CHUNK", 10)
    copies = 0
    original = embedded.IndexedCollection._read_copy

    def counting(self, document, fields=None):
        nonlocal copies
        copies += 1
        return original(self, document, fields)

    monkeypatch.setattr(embedded.IndexedCollection, "_read_copy", counting)
    pipeline = [
        {"$match": {"state": 1}},
        {"$sort": {"rank": -1, "_id": 1}},
        {"$project": {"rank": 1}},
    ]
    # When the first row is read, only the first chunk has been copied
    cursor = collection.aggregate(pipeline)
    first = next(cursor)
    assert copies == 10
    # Then the whole result is what a sort of everything gives, in order
    rest = list(cursor)
    expected = sorted(range(50), key=lambda i: (-(i % 7), i))
    assert [first["_id"], *(row["_id"] for row in rest)] == expected
    assert copies == 50


# Values weighted towards what counters, compare-and-sets and releases meet: numbers, dates,
# lists of sub-documents; `values` for everything else.
counted = st.one_of(
    st.sampled_from([0, 3, 2.5, datetime.datetime(2026, 1, 2)]),
    st.lists(st.fixed_dictionaries({"k": st.sampled_from([0, 1])}), min_size=1, max_size=3),
    values,
)


def _side_by_side() -> tuple[Collection, Collection]:
    """An indexed collection and a plain mongomock one in the same fresh database."""
    embedded.install()
    db = mongomock.MongoClient()["t"]
    return db["indexed"], Collection(db, name="plain", _db_store=db._store)


@settings(max_examples=1000, derandomize=True)
@given(
    docs=st.lists(
        st.fixed_dictionaries({}, optional={"a": counted, "b": counted, "c": counted}),
        min_size=1,
        max_size=3,
    ),
    # Mostly queries that match, so that the update has documents to change.
    query=st.one_of(st.just({}), st.builds(lambda i: {"_id": i}, st.integers(0, 2)), queries),
    update=st.one_of(
        st.builds(
            lambda op, f, v: {op: {f: v}},
            st.sampled_from(["$inc", "$max"]),
            st.sampled_from(FIELDS),
            st.sampled_from([1, 0.5, -1, datetime.datetime(2026, 1, 3), "x"]),
        ),
        st.builds(lambda f, k: {"$pull": {f: {"k": k}}}, st.sampled_from(FIELDS), st.just(1)),
        updates,
    ),
    many=st.booleans(),
)
def test_embedded_updates_change_documents_like_mongomock(docs, query, update, many):
    """Each update, on documents that hold every kind of value: the same count, the same
    documents (fields in the same order), or the same error. The state machine above rarely
    meets a counter or a list of sub-documents; this meets them on every example."""
    answers = []
    for collection in _side_by_side():
        for doc_id, doc in enumerate(docs):
            collection.insert_one({"_id": doc_id, **doc})
        method = collection.update_many if many else collection.update_one
        outcome = _outcome(lambda method=method: method(query, update).modified_count)
        answers.append((outcome, repr(list(collection.find({})))))
    assert answers[0] == answers[1]


@settings(max_examples=600, derandomize=True)
@given(
    docs=st.lists(
        st.fixed_dictionaries({}, optional={"a": values, "b": values, "c": values}),
        max_size=3,
    ),
    query=st.one_of(
        st.builds(lambda i: {"_id": i}, st.integers(0, 4)),
        st.builds(lambda i, v: {"_id": i, "a": v}, st.integers(0, 4), values),
        st.builds(lambda v: {"b": {"$in": [v]}, "_id": 3}, values),
        # No _id: each side makes a new one (compared by where it stands, not its value).
        st.builds(lambda v, w: {"a": v, "b": w}, values, values),
    ),
    update=upserts,
)
def test_embedded_upserts_change_documents_like_mongomock(docs, query, update):
    """An upsert by plain equality, matching a stored document or none: the same answer (the
    upserted id, the counts), the same documents with their fields in the same order, or the
    same error; a unique index refuses the same inserts."""
    answers = []
    for collection in _side_by_side():
        collection.create_index([("c", 1)], unique=True, sparse=True)
        # (Both refuse a list in a sparse unique index's field, with the same error.)
        stored = [
            _outcome(lambda c=collection, d=doc, i=i: c.insert_one({"_id": i, **d}).inserted_id)
            for i, doc in enumerate(docs)
        ]

        def upsert(collection=collection):
            result = collection.update_one(query, update, upsert=True)
            return _made(result.upserted_id), result.matched_count, result.modified_count

        outcome = _outcome(upsert)
        documents = [
            {k: _made(v) if k == "_id" else v for k, v in d.items()} for d in collection.find({})
        ]
        answers.append((stored, outcome, repr(documents)))
    assert answers[0] == answers[1]


def _made(doc_id):
    """An _id the store made (the documents given have int ids) as a mark of its place."""
    return "a new ObjectId" if isinstance(doc_id, bson.ObjectId) else doc_id


def test_an_upsert_without_an_id_inserts_a_new_one_each_time_it_finds_nothing():
    embedded.install()
    collection = mongomock.MongoClient()["t"]["indexed"]
    collection.create_index([("model_id", 1), ("key", 1)], unique=True)
    calls = []
    original = Collection._update
    Collection._update = lambda self, *a, **k: calls.append(a) or original(self, *a, **k)
    try:
        first = collection.update_one(
            {"model_id": 1, "key": "k"}, {"$set": {"v": 1}, "$setOnInsert": {"f": 0}}, upsert=True
        )
        again = collection.update_one(
            {"model_id": 1, "key": "k"}, {"$set": {"v": 2}, "$setOnInsert": {"f": 9}}, upsert=True
        )
    finally:
        Collection._update = original
    assert calls == []  # both applied without mongomock's update
    assert isinstance(first.upserted_id, bson.ObjectId) and again.upserted_id is None
    assert again.matched_count == 1 and again.modified_count == 1
    (stored,) = collection.find({}, {"_id": 0})
    assert stored == {"model_id": 1, "key": "k", "v": 2, "f": 0}
