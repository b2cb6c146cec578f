"""TTL indexes on the embedded store: a sweep that removes expired documents, as a MongoDB
server's TTL monitor does every 60 s.

mongomock has TTL support of its own: every read of a collection with a TTL index scans the
whole collection against the wall clock and deletes behind the collection's back (around
`IndexedCollection`'s indexes and the snapshots' write counts). `install()` turns that off;
this sweep is the one place documents expire, with `now` passed in (tests inject a clock), by
the rule in `planning/retention.ttl_expired`, and through `delete_many`, so indexes and
snapshots see the removal like any other write. Run it under the store's lock
(`CountingDatabase.locked()`): no operation of another thread sees a half-swept collection.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from crawlsched.planning.retention import ttl_expired
from crawlsched.store.embedded.indexes import store_key

# How many ids one delete names (mongomock builds an `$in` set of them).
DELETE_CHUNK = 5000


def ttl_indexes(collection: Any) -> list[tuple[str, int]]:
    """(field, expireAfterSeconds) of each TTL index of a mongomock collection."""
    found = []
    for index in collection._store.indexes.values():
        after = index.get("expireAfterSeconds")
        if after is not None and len(index["key"]) == 1:
            found.append((index["key"][0][0], int(after)))
    return found


def expired_ids(collection: Any, now: datetime) -> list[Any]:
    indexes = ttl_indexes(collection)
    if not indexes:
        return []
    return [
        doc["_id"]
        for doc in collection._store.documents
        if any(ttl_expired(doc.get(field), now, after) for field, after in indexes)
    ]


def sweep_expired(database: Any, now: datetime) -> dict[str, int]:
    """Remove every document of a mongomock database that a TTL index says has expired;
    returns how many went, per collection (only those that lost some)."""
    removed: dict[str, int] = {}
    for name in database.list_collection_names():
        collection = database[name]
        ids = expired_ids(collection, now)
        for start in range(0, len(ids), DELETE_CHUNK):
            chunk = ids[start : start + DELETE_CHUNK]
            gone = collection.delete_many({"_id": {"$in": chunk}}).deleted_count
            removed[name] = removed.get(name, 0) + gone
            # The field indexes drop a deleted id only when a lookup meets it again; the
            # values of an expired run (its id, its dispatches) are never asked for again.
            indexes = collection._indexes
            for doc_id in chunk:
                indexes.forget(store_key(doc_id))
    return removed
