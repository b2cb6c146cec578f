"""Field indexes of one embedded collection: value -> ids, kept current by the write hook."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from mongomock import helpers

from crawlsched.store.embedded.copying import IMMUTABLE
from crawlsched.store.embedded.matching import Match, compile_filter
from crawlsched.store.embedded.ordered import OrderedIndex

SortKey = Callable[[str, Mapping[str, Any]], "tuple | None"]
_MISSING = object()
# Above this many candidates an index answer is no better than a scan.
SELECTIVE = 0.5


def hashable(value: Any) -> bool:
    if type(value) in IMMUTABLE:  # the common case, without an ABC check
        return True
    return isinstance(value, Hashable) and not isinstance(value, list | dict)


class _FieldIndex:
    """value -> ids for one top-level field, plus ids whose value is a list or a document."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.by_value: dict[Any, set[Any]] = {}
        self.complex: set[Any] = set()
        self.key_of: dict[Any, Any] = {}  # id -> the value it is filed under (or _MISSING)

    def file(self, doc_id: Any, doc: Mapping[str, Any]) -> None:
        value = doc.get(self.field)
        old = self.key_of.get(doc_id, _MISSING)
        if old is not _MISSING and hashable(value) and old == value:
            return  # the same bucket: Python equality is what files a value
        self.unfile(doc_id)
        if hashable(value):
            self.by_value.setdefault(value, set()).add(doc_id)
            self.key_of[doc_id] = value
        else:
            self.complex.add(doc_id)
            self.key_of[doc_id] = _MISSING

    def unfile(self, doc_id: Any) -> None:
        if doc_id not in self.key_of:
            return
        key = self.key_of.pop(doc_id)
        if key is _MISSING:
            self.complex.discard(doc_id)
        else:
            ids = self.by_value.get(key)
            if ids is not None:
                ids.discard(doc_id)
                if not ids:
                    del self.by_value[key]

    def estimate(self, values: Iterable[Any]) -> int:
        """How many ids `lookup(values)` would return, without building the set."""
        return len(self.complex) + sum(len(self.by_value.get(v, ())) for v in set(values))

    def lookup(self, values: Iterable[Any]) -> set[Any]:
        found = set(self.complex)
        for value in values:
            found |= self.by_value.get(value, set())
        return found


class StoreIndexes:
    """The indexes of one collection store (shared by every Collection object over it)."""

    def __init__(self) -> None:
        self.fields: dict[str, _FieldIndex] = {}
        # Per top-level field, its ids in sort order, with the sort key of a document.
        self.ordered: dict[str, tuple[OrderedIndex, SortKey]] = {}
        self.order: dict[Any, int] = {}
        self._next = itertools.count()
        # Per unique index (by name): the index definition, and for each document the key it
        # was last checked with. The definition is kept so that a re-created index starts over.
        # The compiled partial filter is kept with them.
        self.unique_keys: dict[str, tuple[Mapping[str, Any], dict[Any, tuple], Any]] = {}

    def checked_keys(self, name: str, index: Mapping[str, Any]) -> dict[Any, tuple]:
        return self._unique(name, index)[1]

    def partial_filter(self, name: str, index: Mapping[str, Any]) -> Match | None:
        """The index's partial filter, compiled once (None: no filter, or not compiled)."""
        return self._unique(name, index)[2]

    def _unique(self, name: str, index: Mapping[str, Any]) -> tuple:
        entry = self.unique_keys.get(name)
        if entry is None or entry[0] is not index:
            partial = index.get("partialFilterExpression")
            compiled = None if partial is None else compile_filter(partial)
            entry = self.unique_keys[name] = (index, {}, compiled)
        return entry

    def seen(self, doc_id: Any) -> None:
        if doc_id not in self.order:
            self.order[doc_id] = next(self._next)

    def inserted(self, doc_id: Any) -> None:
        """A (re-)inserted document goes last in the store, whatever its id was before."""
        order = self.order[doc_id] = next(self._next)
        for index, _ in self.ordered.values():
            index.renumber(doc_id, order)

    def forget_checked(self, doc_id: Any) -> None:
        for _, keys, _ in self.unique_keys.values():
            keys.pop(doc_id, None)

    def field(self, name: str, store: Any) -> _FieldIndex:
        index = self.fields.get(name)
        if index is None:
            index = self.fields[name] = _FieldIndex(name)
            for doc in store.documents:
                doc_id = store_key(doc["_id"])
                self.seen(doc_id)
                index.file(doc_id, doc)
        return index

    def sorted_by(self, name: str, key: SortKey, store: Any) -> OrderedIndex:
        """The ordered index of a top-level field (built on first use, one scan); `key` is
        the sort key of a document, None for a value it cannot order."""
        entry = self.ordered.get(name)
        if entry is None:
            index = OrderedIndex()
            for doc in store.documents:
                doc_id = store_key(doc["_id"])
                self.seen(doc_id)
                index.file(doc_id, key(name, doc), self.order[doc_id])
            entry = self.ordered[name] = (index, key)
        return entry[0]

    def refresh(
        self, doc_id: Any, doc: Mapping[str, Any], changed: Iterable[str] | None = None
    ) -> None:
        """File `doc` again under every index, or only those of the `changed` fields."""
        self.seen(doc_id)
        if changed is None:
            indexes: Iterable[_FieldIndex] = self.fields.values()
        else:
            indexes = [self.fields[f] for f in changed if f in self.fields]
        for index in indexes:
            index.file(doc_id, doc)
        for name, (ordered, key) in self.ordered.items():
            if changed is None or name in changed:
                ordered.file(doc_id, key(name, doc), self.order[doc_id])

    def forget(self, doc_id: Any) -> None:
        self.order.pop(doc_id, None)
        self.forget_checked(doc_id)
        for index in self.fields.values():
            index.unfile(doc_id)
        for ordered, _ in self.ordered.values():
            ordered.forget(doc_id)


def store_key(doc_id: Any) -> Any:
    return helpers.hashdict(doc_id) if isinstance(doc_id, dict) else doc_id


def equality_values(condition: Any) -> list[Any] | None:
    """The values a top-level condition can only match, or None if it is not equality/$in."""
    if isinstance(condition, dict):
        if set(condition) == {"$in"} and isinstance(condition["$in"], list | tuple):
            values = list(condition["$in"])
            return values if all(hashable(v) for v in values) else None
        if set(condition) == {"$eq"}:
            condition = condition["$eq"]
        else:
            return None
    return [condition] if hashable(condition) else None
