"""An ordered index walks documents as a stable full sort orders them, and a sorted find with a
limit that reads it answers like mongomock's own collection.

The pure index is checked against `sorted` of its documents in insertion order (ties keep that
order in both directions, as `sorted(..., reverse=True)` keeps it). The collection is checked
against a plain mongomock collection after random inserts (one at a time and in batches large
enough that the index sorts itself again), updates of the sort field, deletes and re-inserts
under an old id: the same pages for every sort direction, skip and limit, with values of mixed
types (missing, null, numbers, NaN, strings, dates, booleans, arrays).
"""

from __future__ import annotations

import datetime

import mongomock
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from mongomock.collection import Collection

from crawlsched.store import embedded
from crawlsched.store.embedded.ordered import OrderedIndex

# -- the pure index ----------------------------------------------------------------------------

doc_ids = st.integers(0, 5)
# Mostly keys that order; now and then one that does not (None), which blocks every walk.
keys = st.sampled_from([(0,), (1,), (2,), (0,), (1,), (2,), (3,), None])
steps = st.lists(
    st.one_of(
        st.tuples(st.just("file"), doc_ids, keys),
        st.tuples(st.just("forget"), doc_ids, st.none()),
        st.tuples(st.just("reinsert"), doc_ids, st.none()),
        st.tuples(st.just("walk"), doc_ids, st.booleans()),
    ),
    max_size=80,
)


def _reference(live: dict[int, tuple], order: dict[int, int], descending: bool) -> list[int]:
    in_insertion_order = sorted(live, key=order.__getitem__)
    return sorted(in_insertion_order, key=live.__getitem__, reverse=descending)


@settings(max_examples=300, derandomize=True)
@given(steps)
def test_ordered_index_walks_like_a_stable_sort(steps):
    index = OrderedIndex()
    live: dict[int, tuple | None] = {}  # id -> key (None: unordered)
    order: dict[int, int] = {}
    counter = 0
    for action, doc_id, arg in steps:
        if action == "file":
            order.setdefault(doc_id, counter)
            counter += 1
            live[doc_id] = arg
            index.file(doc_id, arg, order[doc_id])
        elif action == "forget":
            live.pop(doc_id, None)
            index.forget(doc_id)
        elif action == "reinsert" and doc_id in order:
            order[doc_id] = counter
            counter += 1
            index.renumber(doc_id, order[doc_id])
        elif action == "walk":
            walked = index.walk(descending=arg)
            unordered = {i for i, key in live.items() if key is None}
            assert index.unordered() == unordered
            if unordered:
                assert walked is None
            else:
                assert list(walked) == _reference(live, order, arg)
    assert len(index) == len(live)


def test_ordered_index_keeps_ties_in_insertion_order_both_ways():
    index = OrderedIndex()
    for doc_id, key in [("a", (1,)), ("b", (2,)), ("c", (1,)), ("d", (2,)), ("e", (0,))]:
        index.file(doc_id, key, ord(doc_id))
    assert list(index.walk()) == ["e", "a", "c", "b", "d"]
    assert list(index.walk(descending=True)) == ["b", "d", "a", "c", "e"]


def test_ordered_index_puts_a_reinserted_document_last_among_its_ties():
    index = OrderedIndex()
    for order, doc_id in enumerate("abc"):
        index.file(doc_id, (1,), order)
    index.renumber("a", 3)
    assert list(index.walk()) == ["b", "c", "a"]
    assert list(index.walk(descending=True)) == ["b", "c", "a"]


def test_embedded_sorted_page_of_a_reinserted_document():
    # Given three documents with the same sort value, when the first is deleted and inserted
    # again, then it comes last among them (as it does in mongomock's insertion order).
    embedded.install()
    collection = mongomock.MongoClient()["t"]["runs"]
    collection.insert_many([{"_id": i, "at": 1} for i in range(3)])
    assert [d["_id"] for d in collection.find().sort("at", -1).limit(3)] == [0, 1, 2]
    collection.delete_one({"_id": 0})
    collection.insert_one({"_id": 0, "at": 1})
    assert [d["_id"] for d in collection.find().sort("at", -1).limit(3)] == [1, 2, 0]
    assert [d["_id"] for d in collection.find().sort("at", 1).limit(2)] == [1, 2]


def test_ordered_index_sorts_a_large_batch_at_once():
    # Given an index of 100 documents, when 50 of them change key in one go (more than the
    # share applied one at a time), then the walk is the same as a full sort's.
    index = OrderedIndex()
    for i in range(100):
        index.file(i, (i % 7,), i)
    assert len(index) == 100
    for i in range(0, 100, 2):
        index.file(i, (-(i % 5),), i)
    expected = sorted(range(100), key=lambda i: (-(i % 5),) if i % 2 == 0 else (i % 7,))
    assert list(index.walk()) == expected


# -- the collection ----------------------------------------------------------------------------

values = st.one_of(
    st.none(),
    st.integers(0, 2),
    st.sampled_from([1.0, 2.5, float("nan")]),
    st.sampled_from(["x", "y"]),
    st.booleans(),
    st.sampled_from([datetime.datetime(2026, 1, 1), datetime.datetime(2026, 1, 2)]),
    st.lists(st.integers(0, 2), max_size=2),
)
optional_values = st.one_of(st.just("missing"), values)
# A document's sort field is drawn mostly from few values, so that ties are common.
sort_values = st.one_of(st.integers(0, 2), st.just("missing"), optional_values)
page_queries = st.sampled_from(
    [{}, {"b": 1}, {"b": {"$ne": 1}}, {"$or": [{"b": 0}, {"a": {"$gt": 0}}]}, {"a": None}]
)


def _doc(doc_id: int, a, b) -> dict:
    doc = {"_id": doc_id, "b": b}
    if a != "missing":
        doc["a"] = a
    return doc


class SortedPagesVersusPlain(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        embedded.install()
        db = mongomock.MongoClient()["t"]
        self.indexed = db["indexed"]
        self.plain = Collection(db, name="plain", _db_store=db._store)
        assert isinstance(self.indexed, embedded.IndexedCollection)

    def both(self, method, *args):
        for collection in (self.indexed, self.plain):
            getattr(collection, method)(*args)

    @rule(doc_id=st.integers(0, 12), a=sort_values, b=st.integers(0, 2))
    def insert(self, doc_id, a, b):
        if self.plain.find_one({"_id": doc_id}) is None:
            self.both("insert_one", _doc(doc_id, a, b))

    @rule(first=st.integers(100, 1000), a=st.lists(sort_values, min_size=1, max_size=40))
    def insert_many(self, first, a):
        docs = [_doc(first + i, v, i % 3) for i, v in enumerate(a)]
        if self.plain.count_documents({"_id": {"$in": [d["_id"] for d in docs]}}) == 0:
            self.both("insert_many", docs)

    @rule(b=st.integers(0, 2), a=sort_values)
    def set_sort_field(self, b, a):
        update = {"$unset": {"a": ""}} if a == "missing" else {"$set": {"a": a}}
        self.both("update_many", {"b": b}, update)

    @rule(b=st.integers(0, 2), a=values)
    def set_and_push(self, b, a):
        # mongomock's own update path (a `$push` is not the fast path's), which refreshes
        # every index of the document.
        self.both("update_many", {"b": b}, {"$set": {"a": a}, "$push": {"log": 1}})

    @rule(doc_id=st.integers(0, 12))
    def delete(self, doc_id):
        self.both("delete_one", {"_id": doc_id})

    @rule(doc_id=st.integers(0, 12), a=sort_values)
    def reinsert(self, doc_id, a):
        # Deleted and inserted again: the document goes last among its ties.
        if self.plain.find_one({"_id": doc_id}) is not None:
            self.both("delete_one", {"_id": doc_id})
            self.both("insert_one", _doc(doc_id, a, 0))

    @rule(
        query=page_queries,
        field=st.sampled_from(["a", "_id", "b"]),
        direction=st.sampled_from([1, -1]),
        skip=st.integers(0, 5),
        limit=st.integers(1, 8),
    )
    def same_pages(self, query, field, direction, skip, limit):
        got = [
            repr(list(c.find(query).sort(field, direction).skip(skip).limit(limit)))
            for c in (self.indexed, self.plain)
        ]
        assert got[0] == got[1], (query, field, direction, skip, limit)


SortedPagesVersusPlain.TestCase.settings = settings(
    max_examples=150, stateful_step_count=30, derandomize=True
)
test_embedded_sorted_pages_answer_like_a_full_sort = SortedPagesVersusPlain.TestCase
