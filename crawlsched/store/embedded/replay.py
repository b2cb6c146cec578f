"""Apply the records of `effects.py` to a mongomock database: the standalone server's start
replays its journal onto the snapshot it loaded.

Each entry says what the store held after a write, so applying it reruns no command: a put
stores the document as it was recorded (where it stood if the id is there, else last, as an
insert would), a delete removes the id. The documents pass through the same doors as the
snapshot's loading (`_insert`, the date patch, the index refresh of the write hook), so a
store loaded and replayed answers queries exactly as the one that wrote the journal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mongomock import helpers

from crawlsched.store.dump import create_index_from_spec
from crawlsched.store.embedded.indexes import store_key


class BadRecord(ValueError):
    """A record that does not apply to the store it is replayed onto."""


def apply_record(database: Any, entries: Iterable[Mapping[str, Any]]) -> None:
    """Apply one record's entries, in order, to a mongomock database (its caller holds the
    store's lock, and no write effects are recorded meanwhile)."""
    for entry in entries:
        try:
            _apply(database, entry)
        except BadRecord:
            raise
        except Exception as e:  # mongomock's own refusal: this record does not fit the store
            raise BadRecord(f"{entry.get('op')} on {entry.get('c')}: {e}") from e


def _apply(database: Any, entry: Mapping[str, Any]) -> None:
    op, name = entry.get("op"), entry.get("c")
    if not isinstance(name, str):
        raise BadRecord(f"an entry without a collection: {op!r}")
    collection = database[name]
    if op == "put":
        _put(collection, entry["d"])
    elif op == "del":
        _delete(collection, entry["k"])
    elif op == "index":
        create_index_from_spec(collection, entry["i"])
    elif op == "unindex":
        if entry["n"] == "*":
            collection.drop_indexes()
        else:
            collection.drop_index(entry["n"])
    elif op == "drop":
        collection.drop()
    elif op == "rename":
        collection.rename(entry["to"], dropTarget=entry["drop_target"])
    else:
        raise BadRecord(f"unknown entry {op!r} on {name}")


def _put(collection: Any, document: dict[str, Any]) -> None:
    key = store_key(document["_id"])
    existing = collection._store._documents.get(key)
    if existing is None:
        collection._insert(document)  # last in the store, as its insert put it
        return
    collection._written()
    # In place: the document keeps its position, as an update leaves it.
    existing.clear()
    existing.update(helpers.patch_datetime_awareness_in_document(document))
    collection._ensure_uniques(existing)


def _delete(collection: Any, doc_id: Any) -> None:
    key = store_key(doc_id)
    store = collection._store
    if key in store._documents:
        collection._written()
        del store[key]
        collection._indexes.forget(key)
