"""The embedded store's faster paths answer exactly what mongomock answers.

An indexed collection (`store/embedded/`) and a plain mongomock collection over the same
documents must give the same aggregation results (leading `$match`, `$lookup`, `$unwind`,
later `$match`es, and mongomock's own stages around them), the same `distinct` values, the
same cursor pages (skip, limit), and refuse the same writes on a unique index whose checks
are skipped when an update leaves a document's key as it was.
"""

from __future__ import annotations

import unittest.mock
from datetime import UTC, datetime, timedelta

import mongomock
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from mongomock.collection import Collection

from crawlsched.store import embedded

T0 = datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
FIELDS = ["a", "b", "k"]
scalars = st.one_of(
    st.none(),
    st.integers(0, 3),
    st.sampled_from([1.0, True, False, "x", "y"]),
    st.sampled_from([T0, T0 + timedelta(milliseconds=1)]),
)
values = st.one_of(scalars, st.lists(st.integers(0, 3), max_size=2), st.just({"n": 1}))


def _docs(max_size):
    return st.lists(
        st.fixed_dictionaries({}, optional=dict.fromkeys(FIELDS, values)), max_size=max_size
    )


conditions = st.one_of(
    values,
    st.builds(lambda v: {"$in": v}, st.lists(scalars, max_size=3)),
    st.builds(lambda v: {"$ne": v}, scalars),
    st.builds(lambda v: {"$lte": v}, st.sampled_from([2, T0])),
    st.just({"$exists": False}),
)
filters = st.one_of(
    st.dictionaries(st.sampled_from(["_id", *FIELDS]), conditions, max_size=2),
    st.builds(
        lambda parts: {"$or": parts},
        st.lists(
            st.dictionaries(st.sampled_from(FIELDS), conditions, min_size=1, max_size=1),
            min_size=1,
            max_size=2,
        ),
    ),
)
joined_filters = st.dictionaries(
    st.sampled_from(["j.v", "j", "a", "j.when"]), conditions, min_size=1, max_size=2
)
stages = st.one_of(
    st.builds(lambda f: {"$match": f}, filters),
    st.builds(lambda f: {"$match": f}, joined_filters),
    st.builds(
        lambda field, d: {"$sort": {field: d, "_id": 1}},
        st.sampled_from(FIELDS),
        st.sampled_from([1, -1]),
    ),
    st.builds(
        lambda local: {
            "$lookup": {"from": "foreign", "localField": local, "foreignField": "k", "as": "j"}
        },
        st.sampled_from(["a", "k", "missing", "j.v"]),
    ),
    st.builds(
        lambda keep: {"$unwind": {"path": "$j", "preserveNullAndEmptyArrays": keep}},
        st.booleans(),
    ),
    st.just({"$unwind": "$j"}),
    st.just({"$addFields": {"jv": "$j.v"}}),
    st.just({"$project": {"a": 1, "j": 1}}),
    st.just({"$group": {"_id": "$a", "n": {"$sum": 1}}}),
    # Tallies by fields (counted in place by the embedded store when the values allow)
    st.just({"$group": {"_id": {"a": "$a", "k": "$k"}, "n": {"$sum": 1}}}),
    st.just({"$group": {"_id": "$k", "n": {"$sum": 1}, "m": {"$sum": 1}}}),
    st.just({"$group": {"_id": {"b": "$b"}, "n": {"$sum": 1}}}),
)
pipelines = st.lists(stages, min_size=1, max_size=5)


def _pair():
    embedded.install()
    db = mongomock.MongoClient(tz_aware=True)["t"]
    indexed = db["indexed"]
    # The same database and codec options (aware datetimes), but mongomock's own class.
    plain = Collection(db, "plain", db._store, codec_options=indexed.codec_options)
    assert isinstance(indexed, embedded.IndexedCollection)
    assert not isinstance(plain, embedded.IndexedCollection)
    return db, indexed, plain


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # both sides must fail alike
        return ("error", type(e).__name__)


@settings(max_examples=250)
@given(docs=_docs(12), foreign=_docs(6), pipeline=pipelines)
def test_aggregate_answers_as_mongomock(docs, foreign, pipeline):
    db, indexed, plain = _pair()
    for collection in (indexed, plain):
        if docs:
            collection.insert_many([dict(d, _id=i) for i, d in enumerate(docs)])
    if foreign:
        db["foreign"].insert_many([{**d, "v": i, "when": T0} for i, d in enumerate(foreign)])

    got = _outcome(lambda: list(indexed.aggregate(pipeline)))
    expected = _outcome(lambda: list(plain.aggregate(pipeline)))

    assert got == expected
    # Nothing an aggregation returns is the stored document itself.
    if got[0] == "ok":
        for row in got[1]:
            row["changed"] = True
        assert list(indexed.find({"changed": True})) == []


@settings(max_examples=150)
@given(
    docs=_docs(12),
    key=st.sampled_from(["_id", *FIELDS, "a.n"]),
    spec=st.one_of(st.none(), filters),
    skip=st.integers(0, 4),
    limit=st.integers(0, 4),
)
def test_distinct_and_cursor_pages_answer_as_mongomock(docs, key, spec, skip, limit):
    _, indexed, plain = _pair()
    for collection in (indexed, plain):
        if docs:
            collection.insert_many([dict(d, _id=i) for i, d in enumerate(docs)])

    def distinct(collection):
        return sorted(map(repr, collection.distinct(key, spec)))

    assert _outcome(lambda: distinct(indexed)) == _outcome(lambda: distinct(plain))
    assert list(indexed.find(spec).skip(skip).limit(limit)) == list(
        plain.find(spec).skip(skip).limit(limit)
    )
    expected = list(plain.find(spec))
    cursor = indexed.find(spec)
    first = [next(cursor) for _ in range(min(2, len(expected)))]
    assert first + list(cursor) == expected


@settings(max_examples=150)
@given(
    docs=_docs(12),
    spec=st.one_of(st.none(), filters),
    sort=st.lists(
        st.tuples(st.sampled_from([*FIELDS, "a.n", "_id"]), st.sampled_from([1, -1])),
        min_size=0,
        max_size=2,
        unique_by=lambda s: s[0],
    ),
    projection=st.sampled_from(
        [None, {"k": 0}, {"a": 1}, {"b": 1, "_id": 0}, {"k": 1, "a": 1}, {"a": 1, "b": 1, "k": 1}]
    ),
    skip=st.integers(0, 4),
    limit=st.integers(0, 4),
)
def test_sorted_cursor_pages_answer_as_mongomock(docs, spec, sort, projection, skip, limit):
    # A limited find copies only the page it returns; its answer is still mongomock's, its
    # fields in the same order (an API's JSON follows it).
    _, indexed, plain = _pair()
    for collection in (indexed, plain):
        if docs:
            collection.insert_many([dict(d, _id=i) for i, d in enumerate(docs)])

    def page(collection):
        cursor = collection.find(spec, projection)
        if sort:
            cursor = cursor.sort(sort)
        return [list(doc.items()) for doc in cursor.skip(skip).limit(limit)]

    def taken(collection):  # the embedded cursor's chunks, as a locked read takes them
        cursor = collection.find(spec, projection)
        if sort:
            cursor = cursor.sort(sort)
        cursor = cursor.skip(skip).limit(limit)
        read, size = [], 1
        while chunk := cursor.take(size):
            read += [list(doc.items()) for doc in chunk]
            size += 1
        return read

    assert _outcome(lambda: page(indexed)) == _outcome(lambda: page(plain))
    assert _outcome(lambda: taken(indexed)) == _outcome(lambda: page(plain))


def test_reading_a_cursor_costs_the_same_per_document_at_any_size():
    # mongomock's cursor copied the rest of its result list for every document it returned.
    _, indexed, _ = _pair()
    indexed.insert_many([{"_id": i} for i in range(20_000)])
    cursor = indexed.find({})
    copied = 0
    results = cursor._compute_results()

    class Counting(list):
        def __getitem__(self, index):
            nonlocal copied
            item = super().__getitem__(index)
            copied += len(item) if isinstance(index, slice) else 1
            return item

    cursor._results = Counting(results)
    assert len(list(cursor)) == 20_000
    assert copied == 20_000


# -- unique indexes, checked only when a document's key changes ------------------------------

key_values = st.one_of(st.none(), st.integers(0, 2), st.sampled_from([1.0, True, "x"]))


class UniqueKeys(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.db, self.indexed, self.plain = _pair()
        self.create()

    def create(self):
        for c in (self.indexed, self.plain):
            c.create_index(
                [("a", 1), ("b", 1)],
                unique=True,
                name="ab",
                partialFilterExpression={"k": {"$exists": True}},
            )

    def both(self, method, *args, **kwargs):
        got = [
            _outcome(lambda c=c: getattr(c, method)(*args, **kwargs))
            for c in (self.indexed, self.plain)
        ]
        assert [g[0] for g in got] == [got[1][0]] * 2, (method, args, got)

    @rule(doc_id=st.integers(0, 6), a=key_values, b=key_values, k=st.booleans())
    def insert(self, doc_id, a, b, k):
        doc = {"_id": doc_id, "a": a, "b": b, **({"k": 1} if k else {})}
        self.both("insert_one", doc)

    @rule(
        doc_id=st.integers(0, 6), field=st.sampled_from(["a", "b", "k", "other"]), value=key_values
    )
    def update(self, doc_id, field, value):
        self.both("update_one", {"_id": doc_id}, {"$set": {field: value}})

    @rule(doc_id=st.integers(0, 6), field=st.sampled_from(["k", "a"]))
    def unset(self, doc_id, field):
        self.both("update_one", {"_id": doc_id}, {"$unset": {field: ""}})

    @rule(doc_id=st.integers(0, 6))
    def delete(self, doc_id):
        self.both("delete_one", {"_id": doc_id})

    @rule()
    def recreate_index(self):
        # mongomock refuses a partial unique index over duplicates it does not cover: the
        # indexed side must not (it checks only covered documents), and answer like a scan.
        self.indexed.drop_index("ab")
        covered = [(d.get("a"), d.get("b")) for d in self.plain.find({"k": {"$exists": True}})]
        refused = _outcome(
            lambda: self.indexed.create_index(
                [("a", 1), ("b", 1)],
                unique=True,
                name="ab",
                partialFilterExpression={"k": {"$exists": True}},
            )
        )
        assert (refused[0] == "error") == (len(set(map(repr, covered))) < len(covered))
        if refused[0] == "error":  # only when duplicates are covered: put the old one back
            self.indexed._store.create_index("ab", self.plain._store.indexes["ab"])

    @invariant()
    def same_documents(self):
        assert list(self.indexed.find({})) == list(self.plain.find({}))


UniqueKeys.TestCase.settings = settings(max_examples=100, stateful_step_count=30)
test_unique_checks_refuse_what_mongomock_refuses = UniqueKeys.TestCase


# -- our indexes over the old system's jobs ---------------------------------------------------


def test_job_indexes_accept_jobs_without_a_target_whenever_they_are_created(store):
    # Given jobs of the old shape (no target) already there, two of them for the same media
    # and task, then our indexes created (twice: init-db may run again)
    from crawlsched.store.jobs import MongoJobStore

    name = store.collection()
    old = {"media_name": "news-site", "media_name_id": 7, "task": "profile", "state": 1}
    store.db[name].insert_many([dict(old), dict(old)])
    jobs = MongoJobStore(store.db, name)
    jobs.create_indexes()
    jobs.create_indexes()
    # Then more such jobs are still accepted, and a job of ours still may not be duplicated
    store.db[name].insert_one(dict(old))
    ours = {**old, "target": "alice"}
    assert jobs.insert_new([ours, ours]) == (1, ["alice"])
    assert store.db[name].count_documents({}) == 4


def test_locked_cursor_reads_in_chunks_under_the_lock(monkeypatch):
    import threading

    from crawlsched.store.counting import LockedCursor

    class RecordingLock:
        def __init__(self):
            self.entered = 0
            self._lock = threading.RLock()

        def __enter__(self):
            self.entered += 1
            return self._lock.__enter__()

        def __exit__(self, *exc):
            return self._lock.__exit__(*exc)

    monkeypatch.setattr(LockedCursor, "CHUNK", 4)
    lock = RecordingLock()
    cursor = LockedCursor(iter(range(10)), lock)
    assert list(cursor) == list(range(10))
    # Three chunks of at most four rows: 4 + 4 + 2, each read with the lock held.
    assert lock.entered == 3
    assert list(LockedCursor(iter([]), lock)) == []


tally_values = st.one_of(st.integers(0, 3), st.sampled_from(["x", "y"]))
tally_groups = st.sampled_from(
    [
        {"_id": "$a", "n": {"$sum": 1}},
        {"_id": {"a": "$a", "k": "$k"}, "n": {"$sum": 1}},
        {"_id": {"k": "$k", "a": "$a"}, "n": {"$sum": 1}, "m": {"$sum": 1}},
    ]
)


@settings(max_examples=150)
@given(
    docs=st.lists(st.fixed_dictionaries({"a": tally_values, "k": tally_values}), max_size=30),
    match=st.one_of(st.none(), st.builds(lambda v: {"a": {"$ne": v}}, tally_values)),
    group=tally_groups,
)
def test_a_tally_by_fields_is_counted_in_place_and_answers_as_mongomock(docs, match, group):
    # Given documents whose grouped fields are all strings and integers (counted in place)
    _, indexed, plain = _pair()
    for collection in (indexed, plain):
        if docs:
            collection.insert_many([dict(d, _id=i) for i, d in enumerate(docs)])
    counted = []
    real = embedded.aggregation.count_group

    def spy(*args):
        counted.append(real(*args))
        return counted[-1]

    pipeline = ([{"$match": match}] if match else []) + [{"$group": group}, {"$sort": {"n": -1}}]
    # Then the answer is mongomock's, row for row, and it came from the tally
    with unittest.mock.patch.object(embedded.aggregation, "count_group", spy):
        got = list(indexed.aggregate(pipeline))
    assert got == list(plain.aggregate(pipeline))
    assert len(counted) == 1 and counted[0] is not None
