"""Count MongoDB commands, the figure that carries over from any test backend to a real server.

Two views of the same thing:
- at the store boundary (`CountingDatabase`): one per collection method called. mongomock emits no
  monitoring events, so on the embedded store this is the only count;
- on the wire (`CommandCounter.listener`, pymongo command monitoring): one per command started.

The boundary count is also the `crawlsched_store_commands_total` metric (by collection and
method), when the process counts metrics.

Cursor continuations (`getMore`, whose number depends on result size and batch size) and driver
housekeeping (`hello`, `endSessions`, …) are not store decisions; both views leave them out, and
`wire_cursor_continuations` keeps the getMore count for whoever wants it.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import bson
from pymongo import monitoring

from crawlsched import metrics

_HOUSEKEEPING = frozenset(
    {
        "hello",
        "ismaster",
        "isMaster",
        "ping",
        "endSessions",
        "killCursors",
        "saslStart",
        "saslContinue",
        "buildInfo",
        "buildinfo",
        "listCollections",
    }
)
# Collection attributes that are not commands: they return another local object.
_LOCAL = frozenset({"name", "full_name", "database", "with_options", "codec_options"})


class _Listener(monitoring.CommandListener):
    def __init__(self, counter: CommandCounter) -> None:
        self._counter = counter

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self._counter.on_wire(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        if self._counter.measure_replies:
            self._counter.on_reply(event.command_name, len(bson.encode(event.reply)))

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


class CommandCounter:
    """Thread-safe tallies of commands, by name, at the boundary and on the wire."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.boundary: Counter[str] = Counter()
        self.wire: Counter[str] = Counter()
        self.wire_cursor_continuations = 0
        # The largest reply (BSON bytes) seen on the wire, when measuring: no reply may grow
        # with the number of jobs (a server caps a document at 16 MB).
        self.measure_replies = False
        self.max_reply_bytes = 0
        self.max_reply_command = ""
        self.listener = _Listener(self)

    def on_reply(self, command_name: str, size: int) -> None:
        with self._lock:
            if size > self.max_reply_bytes:
                self.max_reply_bytes, self.max_reply_command = size, command_name

    def on_boundary(self, method: str) -> None:
        with self._lock:
            self.boundary[method] += 1

    def on_wire(self, command_name: str) -> None:
        with self._lock:
            if command_name == "getMore":
                self.wire_cursor_continuations += 1
            elif command_name not in _HOUSEKEEPING:
                self.wire[command_name] += 1

    @property
    def boundary_total(self) -> int:
        return sum(self.boundary.values())

    @property
    def wire_total(self) -> int:
        return sum(self.wire.values())

    def reset(self) -> None:
        with self._lock:
            self.boundary.clear()
            self.wire.clear()
            self.wire_cursor_continuations = 0


class LockedCursor:
    """A lazy cursor of the embedded store, read under the store's lock a chunk at a time.

    Each chunk is computed with the lock held, so no concurrent write changes what it sees
    half-way; between chunks others may write, as they may between a real server's `getMore`s.
    Chained calls (`sort`, `limit`, `skip`, …) go to the cursor and stay locked-read.
    """

    CHUNK = 1000

    def __init__(self, cursor: Any, lock: AbstractContextManager) -> None:
        self._cursor = cursor
        self._lock = lock
        self._rows: list[Any] = []
        self._position = 0
        self._exhausted = False

    def __iter__(self) -> LockedCursor:
        return self

    def __next__(self) -> Any:
        if self._position >= len(self._rows):
            if self._exhausted:
                raise StopIteration
            take = getattr(self._cursor, "take", None)  # the embedded store's cursor
            with self._lock:
                self._rows = (
                    take(self.CHUNK) if take else list(itertools.islice(self._cursor, self.CHUNK))
                )
            self._position = 0
            if len(self._rows) < self.CHUNK:
                self._exhausted = True
            if not self._rows:
                raise StopIteration
        row = self._rows[self._position]
        self._position += 1
        return row

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._cursor, attr)
        if not callable(value):
            return value

        def chained(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                result = value(*args, **kwargs)
            return LockedCursor(result, self._lock) if hasattr(result, "__next__") else result

        return chained


class CountingCollection:
    """A collection whose every method call counts as one command at the store boundary."""

    def __init__(
        self,
        collection: Any,
        counter: CommandCounter,
        lock: AbstractContextManager | None = None,
    ) -> None:
        self._collection = collection
        self._counter = counter
        self._lock = lock or nullcontext()
        self._name = str(getattr(collection, "name", "?"))

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._collection, attr)
        if attr.startswith("_") or attr in _LOCAL or not callable(value):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._counter.on_boundary(attr)
            metrics.store_command(self._name, attr)
            with self._lock:
                result = value(*args, **kwargs)
            if self._locking and hasattr(result, "__next__"):
                # mongomock computes a cursor's results when it is first read: read it under
                # the same lock, or a concurrent write could change what it sees half-way.
                return LockedCursor(result, self._lock)
            return result

        return counted

    @property
    def _locking(self) -> bool:
        return not isinstance(self._lock, nullcontext)

    @property
    def raw(self) -> Any:
        return self._collection


class CountingDatabase:
    """A database handing out `CountingCollection`s: `db["jobs"]` and `db.jobs` both work."""

    def __init__(
        self,
        database: Any,
        counter: CommandCounter,
        lock: AbstractContextManager | None = None,
    ) -> None:
        self._database = database
        self.counter = counter
        self._lock = lock

    def __getitem__(self, name: str) -> CountingCollection:
        return CountingCollection(self._database[name], self.counter, self._lock)

    def __getattr__(self, name: str) -> CountingCollection:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    @property
    def raw(self) -> Any:
        return self._database

    def write_mark(self, name: str) -> tuple[object, int] | None:
        """A value that differs after any write to collection `name`, or None where the store
        cannot say cheaply (a real MongoDB). The embedded store counts each collection's
        writes (`IndexedCollection._written`), before the write and under its lock: a read
        begun after the mark was taken sees every write it counts, and any later write moves
        it."""
        if self._lock is None:
            return None
        store = getattr(self._database[name], "_store", None)
        if store is None:
            return None
        return (store, getattr(store, "generation", 0))

    def locked(self) -> AbstractContextManager:
        """Hold the embedded store's lock: no operation of any thread runs meanwhile (a real
        server has no such lock: nullcontext)."""
        return self._lock or nullcontext()

    @property
    def name(self) -> str:
        return self._database.name

    def list_collection_names(self) -> list[str]:
        return self._database.list_collection_names()
