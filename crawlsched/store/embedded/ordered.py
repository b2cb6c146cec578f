"""An ordered index of one field: document ids in sort order, for a sort with a limit.

Pure: keys are computed by the caller (comparable tuples, or None for a value this index
cannot order) and each document carries its insertion `order`, which breaks ties as a stable
sort of the documents in insertion order does, in both directions: `walk(descending=True)`
yields the largest key first and, among equal keys, the earliest inserted first (what
`sorted(docs, key=..., reverse=True)` gives).

Writes are recorded and applied on the next walk: one at a time (a bisection) when they are
few, by sorting everything again when they are many (an `insert_many` of a whole collection
then costs one sort, not one list insertion each).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterator
from typing import Any

# Pending changes above this share of the index are applied by sorting everything again.
REBUILD_SHARE = 0.125
_UNORDERED = object()  # a document whose key is None: the index cannot answer while it is here


class OrderedIndex:
    """`(key, order, id)` entries kept sorted, plus the changes not applied yet."""

    def __init__(self) -> None:
        self._entries: list[tuple[Any, int, Hashable]] = []
        self._filed: dict[Hashable, tuple[Any, int]] = {}  # what `_entries` holds per id
        self._pending: dict[Hashable, Any] = {}  # id -> (key, order), _UNORDERED or None (gone)
        self._unordered: set[Hashable] = set()

    def file(self, doc_id: Hashable, key: tuple | None, order: int) -> None:
        """Record the document's key (None: a value this index cannot order) and its order."""
        self._pending[doc_id] = _UNORDERED if key is None else (key, order)

    def forget(self, doc_id: Hashable) -> None:
        self._pending[doc_id] = None

    def renumber(self, doc_id: Hashable, order: int) -> None:
        """The document keeps its key and takes a new order (it was inserted again)."""
        entry = self._pending[doc_id] if doc_id in self._pending else self._filed.get(doc_id)
        if isinstance(entry, tuple):
            self._pending[doc_id] = (entry[0], order)

    def unordered(self) -> frozenset[Hashable]:
        """Ids whose value this index cannot order (it cannot answer while there are any)."""
        self._apply()
        return frozenset(self._unordered)

    def walk(self, descending: bool = False) -> Iterator[Hashable] | None:
        """Every filed id in sort order, or None while some document's key is unordered.
        The caller must not write through this index until it has finished walking."""
        self._apply()
        if self._unordered:
            return None
        return self._descending() if descending else (entry[2] for entry in self._entries)

    def __len__(self) -> int:
        self._apply()
        return len(self._entries) + len(self._unordered)

    def _descending(self) -> Iterator[Hashable]:
        entries = self._entries
        end = len(entries)
        while end > 0:
            key = entries[end - 1][0]
            if end == 1 or entries[end - 2][0] != key:
                start = end - 1  # a key of its own (the common case: no bisection)
            else:
                start = bisect.bisect_left(entries, (key,), 0, end)  # the first of its equals
            for position in range(start, end):
                yield entries[position][2]
            end = start

    def _apply(self) -> None:
        pending = self._pending
        if not pending:
            return
        self._pending = {}
        rebuild = len(pending) > 32 and len(pending) > REBUILD_SHARE * len(self._entries)
        for doc_id, change in pending.items():
            old = self._filed.pop(doc_id, None)
            self._unordered.discard(doc_id)
            if old is not None and not rebuild:
                self._remove((*old, doc_id))
            if change is _UNORDERED:
                self._unordered.add(doc_id)
            elif change is not None:
                self._filed[doc_id] = change
                if not rebuild:
                    bisect.insort(self._entries, (*change, doc_id))
        if rebuild:
            self._entries = sorted((*entry, doc_id) for doc_id, entry in self._filed.items())

    def _remove(self, entry: tuple[Any, int, Hashable]) -> None:
        entries = self._entries
        position = bisect.bisect_left(entries, entry)
        if position < len(entries) and entries[position] == entry:
            del entries[position]
