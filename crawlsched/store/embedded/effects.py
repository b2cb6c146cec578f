"""What the writes to the embedded store did, one record per operation: the standalone
server's journal (`standalone/journal.py`) appends these records, and `replay` applies them.

A record holds the *effect* of the writes, not the commands: each document a write left
behind, whole, or the id of one it deleted, plus index and collection changes. Replaying an
effect gives the store those documents again, whatever `now` was, whatever order two `$inc`s
raced in and whatever mongomock would compute for the command today.

The embedded collection reports each change as it is applied (`IndexedCollection`, and
`JournaledWrites` for deletes, indexes and drops); the client's lock (`StoreLock`) turns what
one locked section changed into one record when the section ends. Every operation holds that
lock (`client.py`), so records leave in the order the writes were applied, and a write that
raised half-way (an ordered `insert_many` with a duplicate) still records what it did.

Entries of a record (`{"w": [...]}`, BSON), in the order applied:

    {"op": "put", "c": collection, "d": document}      the document as the writes left it
    {"op": "del", "c": collection, "k": _id}            deleted
    {"op": "index", "c": collection, "i": spec}         created (mongodump's index spec)
    {"op": "unindex", "c": collection, "n": name}       dropped ("*": all of them)
    {"op": "drop", "c": collection}                     the collection dropped
    {"op": "rename", "c": collection, "to": name, "drop_target": bool}

A "put" of a document present before replaces it where it stands; of a new one appends it, so
the store's order (which queries without a sort return) is the order it had.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import bson

from crawlsched.store.dump import index_specs
from crawlsched.store.embedded.indexes import store_key

_PUT, _DEL = "put", "del"
# A change: (kind, collection name, its store where the record reads the result, detail:
# the document's key in the store, the index's name, ...).
Event = tuple[str, str, Any, Any]


class WriteEffects:
    """The changes of the current locked section, turned into a record by `commit`.

    Only the thread holding the store's lock touches it (`StoreLock`): its one field,
    `_events`, needs no lock of its own."""

    def __init__(self, sink: Callable[[bytes], None]) -> None:
        self._sink = sink
        self._events: list[Event] = []

    @property
    def pending(self) -> bool:
        return bool(self._events)

    def put(self, collection: str, store: Any, key: Any) -> None:
        """A document was inserted or changed (its state at the end of the section counts)."""
        self._events.append((_PUT, collection, store, key))

    def deleted(self, collection: str, doc_id: Any) -> None:
        self._events.append((_DEL, collection, None, (store_key(doc_id), doc_id)))

    def indexed(self, collection: str, store: Any, name: str) -> None:
        self._events.append(("index", collection, store, name))

    def unindexed(self, collection: str, name: str) -> None:
        self._events.append(("unindex", collection, None, name))

    def dropped(self, collection: str) -> None:
        self._events.append(("drop", collection, None, None))

    def renamed(self, collection: str, to: str, drop_target: bool) -> None:
        self._events.append(("rename", collection, None, (to, drop_target)))

    def commit(self) -> None:
        """Hand the section's record to the sink, and start the next section empty."""
        events, self._events = self._events, []
        entries = effect_entries(events)
        if entries:
            self._sink(bson.encode({"w": entries}))


def effect_entries(events: list[Event]) -> list[dict[str, Any]]:
    """The entries of a record, from a section's events in the order they happened.

    A document changed several times is put once, as it ended; a put is only repeated after a
    delete or a drop made it a new document (it is appended again). A put whose document is
    gone at the end is left out: the delete that removed it follows it."""
    entries: list[dict[str, Any]] = []
    put: set[tuple[str, Any]] = set()  # documents put since their last delete or drop
    for kind, collection, store, detail in events:
        if kind == _PUT:
            if (collection, detail) in put:
                continue
            put.add((collection, detail))
            doc = store._documents.get(detail)
            if doc is not None:
                entries.append({"op": _PUT, "c": collection, "d": doc})
        elif kind == _DEL:
            key, doc_id = detail
            put.discard((collection, key))
            entries.append({"op": _DEL, "c": collection, "k": doc_id})
        elif kind == "index":
            index = store.indexes.get(detail)
            if index is not None:
                spec = index_specs({detail: index})[0]
                entries.append({"op": "index", "c": collection, "i": spec})
        elif kind == "unindex":
            entries.append({"op": "unindex", "c": collection, "n": detail})
        elif kind == "drop":
            put.clear()
            entries.append({"op": "drop", "c": collection})
        else:
            put.clear()
            to, drop_target = detail
            entries.append({"op": kind, "c": collection, "to": to, "drop_target": drop_target})
    return entries


class StoreLock:
    """The one lock of an embedded client (`client.py`), re-entrant; when the outermost
    holder lets go and the store's writes are recorded (`effects` set), what the section
    changed becomes one record, still under the lock, so records follow the order of writes.

    Guarded by the lock itself: `_depth` and `effects` (set once by `attach_effects`)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self.effects: WriteEffects | None = None

    def __enter__(self) -> StoreLock:
        self._lock.acquire()
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        try:
            if self._depth == 0 and self.effects is not None and self.effects.pending:
                self.effects.commit()
        finally:
            self._lock.release()


EFFECTS_ATTRIBUTE = "crawlsched_effects"


def effects_of(db_store: Any) -> WriteEffects | None:
    """The effects a database's writes are reported to (None: not recorded)."""
    return getattr(db_store, EFFECTS_ATTRIBUTE, None)


def attach_effects(raw_database: Any, lock: StoreLock, effects: WriteEffects | None) -> None:
    """Record every later write to a mongomock database into `effects` (None: stop)."""
    with lock:
        setattr(raw_database._store, EFFECTS_ATTRIBUTE, effects)
        lock.effects = effects
