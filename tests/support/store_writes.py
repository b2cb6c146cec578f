"""Random writes to an embedded store, of every kind the store takes (hypothesis strategies),
and the store's whole state as bytes: the journal's replay tests compare what a store holds
after the writes with what a snapshot and a journal give back."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import bson
from hypothesis import strategies as st
from mongomock import BulkWriteError, DuplicateKeyError, OperationFailure
from pymongo import DeleteOne, InsertOne, ReplaceOne, UpdateOne

from crawlsched.store.counting import CountingDatabase
from crawlsched.store.dump import index_specs
from crawlsched.store.embedded.ttl import sweep_expired

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NAMES = ("jobs", "runs")

names = st.sampled_from(NAMES)
ids = st.one_of(st.integers(0, 6), st.sampled_from(["a", "b"]), st.just({"k": 1}))
dates = st.integers(-3600, 3600).map(lambda s: NOW + timedelta(seconds=s, microseconds=1234))
values = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["x", "y"]),
    st.none(),
    dates,
    st.lists(st.integers(0, 2), max_size=3),
    st.fixed_dictionaries({"n": st.integers(0, 2)}),
)

# Few ids, so that one bulk write often touches an id twice (put, deleted, put again).
_bulk_ids = st.integers(0, 2)
_bulk_ops = st.one_of(
    st.tuples(st.just("insert"), _bulk_ids, values),
    st.tuples(st.just("delete"), _bulk_ids, st.none()),
    st.tuples(st.just("set"), _bulk_ids, values),
    st.tuples(st.just("replace"), _bulk_ids, values),
)

writes = st.one_of(
    st.tuples(st.just("insert"), names, ids, values),
    st.tuples(st.just("insert_many"), names, st.lists(ids, min_size=1, max_size=4), values),
    st.tuples(st.just("set"), names, ids, values),
    st.tuples(st.just("inc"), names, ids, st.integers(-2, 2)),
    st.tuples(st.just("push"), names, ids, values),  # mongomock's own update
    st.tuples(st.just("upsert"), names, ids, values),
    st.tuples(st.just("replace"), names, ids, values),
    st.tuples(st.just("find_and_bump"), names, ids, st.none()),
    st.tuples(st.just("update_many"), names, st.none(), values),
    st.tuples(st.just("delete"), names, ids, st.none()),
    st.tuples(st.just("delete_many"), names, st.none(), st.integers(-3, 3)),
    st.tuples(st.just("bulk"), names, st.none(), st.lists(_bulk_ops, min_size=1, max_size=4)),
    st.tuples(st.just("index"), names, st.none(), st.sampled_from(["v", "u", "t"])),
    st.tuples(st.just("unindex"), names, st.none(), st.sampled_from(["v", "u", "t", "*"])),
    st.tuples(st.just("drop"), names, st.none(), st.none()),
    st.tuples(st.just("sweep"), st.none(), st.none(), st.integers(-3600, 7200)),
)


def apply_write(db: CountingDatabase, write: tuple) -> None:
    """Apply one write as the project's code would (refusals included: a write the store
    refuses may still have changed something, an ordered insert_many its first documents)."""
    kind, name, doc_id, value = write
    with contextlib.suppress(DuplicateKeyError, BulkWriteError, OperationFailure):
        _apply(db, kind, name, doc_id, value)


def _apply(db: CountingDatabase, kind: str, name: Any, doc_id: Any, value: Any) -> None:
    if kind == "sweep":
        with db.locked():  # as the standalone server sweeps
            sweep_expired(db.raw, NOW + timedelta(seconds=value))
        return
    jobs = db[name]
    if kind == "insert":
        jobs.insert_one({"_id": doc_id, "v": value, "t": _date(value)})
    elif kind == "insert_many":
        jobs.insert_many([{"_id": i, "v": value, "u": _scalar(i)} for i in doc_id])
    elif kind == "set":
        jobs.update_one({"_id": doc_id}, {"$set": {"v": value, "u": _scalar(value)}})
    elif kind == "inc":
        jobs.update_one({"_id": doc_id}, {"$inc": {"n": value}})
    elif kind == "push":
        jobs.update_one({"_id": doc_id}, {"$push": {"l": value}})
    elif kind == "upsert":
        jobs.update_one(
            {"_id": doc_id}, {"$set": {"v": value}, "$setOnInsert": {"at": NOW}}, upsert=True
        )
    elif kind == "replace":
        jobs.replace_one({"_id": doc_id}, {"r": value, "t": _date(value)})
    elif kind == "find_and_bump":
        jobs.find_one_and_update({"_id": doc_id}, {"$inc": {"n": 1}, "$currentDate": {"d": True}})
    elif kind == "update_many":
        jobs.update_many({}, {"$set": {"m": value}})
    elif kind == "delete":
        jobs.delete_one({"_id": doc_id})
    elif kind == "delete_many":
        jobs.delete_many({"n": {"$gte": value}})
    elif kind == "bulk":
        jobs.bulk_write([_bulk(op) for op in value], ordered=True)
    elif kind == "index":
        _index(jobs, value)
    elif kind == "unindex":
        if value == "*":
            jobs.drop_indexes()
        elif f"{value}_1" in jobs.index_information():
            jobs.drop_index(f"{value}_1")
    elif kind == "drop":
        jobs.drop()


def _scalar(value: Any) -> Any:
    """`u` holds no list or document: the store's unique index check cannot hash one."""
    return None if isinstance(value, list | dict) else value


def _date(value: Any) -> Any:
    return value if isinstance(value, datetime) else None


def _index(jobs: Any, field: str) -> None:
    if field == "u":
        jobs.create_index("u", unique=True, sparse=True)
    elif field == "t":
        jobs.create_index("t", expireAfterSeconds=60)
    else:
        jobs.create_index("v")


def _bulk(op: tuple) -> Any:
    kind, doc_id, value = op
    if kind == "insert":
        return InsertOne({"_id": doc_id, "v": value})
    if kind == "delete":
        return DeleteOne({"_id": doc_id})
    if kind == "set":
        return UpdateOne({"_id": doc_id}, {"$set": {"v": value}}, upsert=True)
    return ReplaceOne({"_id": doc_id}, {"r": value})


def store_state(db: CountingDatabase) -> dict[str, tuple[bytes, list]]:
    """Per collection: every document as BSON in the store's order, and its index specs."""
    state = {}
    for name in sorted(db.list_collection_names()):
        collection = db.raw[name]
        documents = b"".join(bson.encode(doc) for doc in collection._store.documents)
        state[name] = (documents, index_specs(collection.index_information()))
    return state
