"""Indexes for the embedded store, so that its cost per job stays flat as collections grow.

mongomock answers every query, update and unique-index check by scanning the whole collection:
an update of one job by `_id` costs O(N), and a sweep that claims N jobs in batches costs
O(N²). A real server uses indexes. This module gives mongomock the same shape of cost without
touching what it computes:

- **Candidates, then mongomock's own filter.** When a query's top level names `_id` or another
  field by equality or `$in`, only the documents that index finds are handed to mongomock's
  `filter_applies`; the result is exactly what the full scan would return (in insertion
  order), only cheaper. Any other query scans, as before.
- **Kept current by the write hook.** mongomock calls `_ensure_uniques(doc)` after every insert
  and every update that changed a document, before it is visible to anyone else (each operation
  holds the client's lock, see `client.py`). That call refreshes this document's entries.
  Deleted documents are dropped when a lookup finds them gone.
- **Unique indexes** are checked through the same entries instead of a scan per write.

Field indexes are built on first use, one scan each. Values that cannot be hashed (lists,
sub-documents) go to an "always a candidate" bucket, which keeps array matching correct.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any

import mongomock
from mongomock import DuplicateKeyError, helpers
from mongomock.collection import Collection
from mongomock.filtering import filter_applies

_MISSING = object()
# Above this many candidates an index answer is no better than a scan.
_SELECTIVE = 0.5


def _hashable(value: Any) -> bool:
    return isinstance(value, Hashable) and not isinstance(value, list | dict)


class _FieldIndex:
    """value -> ids for one top-level field, plus ids whose value is a list or a document."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.by_value: dict[Any, set[Any]] = {}
        self.complex: set[Any] = set()
        self.key_of: dict[Any, Any] = {}  # id -> the value it is filed under (or _MISSING)

    def file(self, doc_id: Any, doc: Mapping[str, Any]) -> None:
        self.unfile(doc_id)
        value = doc.get(self.field)
        if _hashable(value):
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


class _StoreIndexes:
    """The indexes of one collection store (shared by every Collection object over it)."""

    def __init__(self) -> None:
        self.fields: dict[str, _FieldIndex] = {}
        self.order: dict[Any, int] = {}
        self._next = itertools.count()

    def seen(self, doc_id: Any) -> None:
        if doc_id not in self.order:
            self.order[doc_id] = next(self._next)

    def inserted(self, doc_id: Any) -> None:
        """A (re-)inserted document goes last in the store, whatever its id was before."""
        self.order[doc_id] = next(self._next)

    def field(self, name: str, store: Any) -> _FieldIndex:
        index = self.fields.get(name)
        if index is None:
            index = self.fields[name] = _FieldIndex(name)
            for doc in store.documents:
                doc_id = _store_key(doc["_id"])
                self.seen(doc_id)
                index.file(doc_id, doc)
        return index

    def refresh(self, doc_id: Any, doc: Mapping[str, Any]) -> None:
        self.seen(doc_id)
        for index in self.fields.values():
            index.file(doc_id, doc)

    def forget(self, doc_id: Any) -> None:
        self.order.pop(doc_id, None)
        for index in self.fields.values():
            index.unfile(doc_id)


def _store_key(doc_id: Any) -> Any:
    return helpers.hashdict(doc_id) if isinstance(doc_id, dict) else doc_id


def _equality_values(condition: Any) -> list[Any] | None:
    """The values a top-level condition can only match, or None if it is not equality/$in."""
    if isinstance(condition, dict):
        if set(condition) == {"$in"} and isinstance(condition["$in"], list | tuple):
            values = list(condition["$in"])
            return values if all(_hashable(v) for v in values) else None
        if set(condition) == {"$eq"}:
            condition = condition["$eq"]
        else:
            return None
    return [condition] if _hashable(condition) else None


class IndexedCollection(Collection):
    """mongomock's Collection with candidate lookups by `_id` and by equality fields."""

    @property
    def _indexes(self) -> _StoreIndexes:
        store = self._store
        indexes = getattr(store, "_crawlsched_indexes", None)
        if indexes is None:
            indexes = _StoreIndexes()
            store._crawlsched_indexes = indexes
        return indexes

    def _narrowest(self, filter: Mapping[str, Any]) -> set[Any] | None:
        """The smallest id set some top-level equality (or one inside `$and`) allows.

        Sizes are compared before any set is built: copying the ids of a common value (say
        every job whose `dispatch_id` is null) would cost as much as the scan it replaces.
        """
        best: tuple[int, Any] | None = None  # (size, how to build the set)
        for field, condition in filter.items():
            if field == "$and" and isinstance(condition, list):
                sets = [self._narrowest(c) for c in condition if isinstance(c, Mapping)]
                ids = min((s for s in sets if s is not None), key=len, default=None)
                option = None if ids is None else (len(ids), lambda ids=ids: ids)
            else:
                plain = not field.startswith("$") and "." not in field
                values = _equality_values(condition) if plain else None
                if values is None:
                    continue
                if field == "_id":
                    keys = {_store_key(v) for v in values}
                    option = (len(keys), lambda keys=keys: keys)
                else:
                    index = self._indexes.field(field, self._store)
                    option = (index.estimate(values), lambda i=index, v=values: i.lookup(v))
            if option is not None and (best is None or option[0] < best[0]):
                best = option
        return None if best is None else best[1]()

    def _candidates(self, filter: Any) -> list[dict] | None:
        if not isinstance(filter, Mapping) or not filter or self._store.is_empty:
            return None
        store = self._store
        best = self._narrowest(filter)
        if best is None or len(best) > len(store) * _SELECTIVE:
            return None
        indexes = self._indexes
        docs = []
        for doc_id in best:
            if doc_id in store:
                indexes.seen(doc_id)
                docs.append((indexes.order[doc_id], store[doc_id]))
            else:
                indexes.forget(doc_id)  # deleted since it was filed
        docs.sort(key=lambda pair: pair[0])
        return [doc for _, doc in docs]

    def _iter_documents(self, filter: Any) -> Iterator[dict]:
        candidates = self._candidates(filter)
        if candidates is None:
            yield from super()._iter_documents(filter)
            return
        for document in candidates:
            if filter_applies(filter, document):
                yield document

    def _insert(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        result = super()._insert(data, *args, **kwargs)
        if isinstance(data, Mapping):
            self._indexes.inserted(_store_key(data["_id"]))
        return result

    def _ensure_uniques(self, new_data: dict) -> None:
        # Called by mongomock after every insert and every changing update of `new_data`.
        doc_id = _store_key(new_data["_id"])
        for index in self._store.indexes.values():
            if index.get("unique"):
                self._check_unique(index, new_data, doc_id)
        self._indexes.refresh(doc_id, new_data)

    def _check_unique(self, index: Mapping[str, Any], new_data: dict, doc_id: Any) -> None:
        keys = [key for key, _ in index["key"]]
        spec = {}
        for key in keys:
            try:
                spec[key] = helpers.get_value_by_dot(new_data, key)
            except KeyError:
                spec[key] = None
        if index.get("sparse") and set(spec.values()) == {None}:
            return
        partial = index.get("partialFilterExpression")
        if partial is not None and not filter_applies(partial, new_data):
            return
        query = spec if partial is None else {"$and": [partial, spec]}
        for other in self._iter_documents(query):
            if _store_key(other["_id"]) != doc_id:
                raise DuplicateKeyError("E11000 Duplicate Key Error", 11000)


_installed = False


def install() -> None:
    """Make every mongomock database of this process create indexed collections."""
    global _installed
    if not _installed:
        mongomock.database.Collection = IndexedCollection
        _installed = True
