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
- **Unique indexes** are checked through the same entries instead of a scan per write, and
  not at all when an update left the index's key of that document exactly as it was (a claim
  or an outcome changes `state` and `dispatch_id`, never `(media_name_id, target, task)`).
- **Aggregations** read their leading `$match` through the same candidates and copy only the
  documents it keeps (mongomock copies the whole collection first); `$lookup` asks the
  foreign collection once per distinct local value within a stage instead of once per
  document; `$lookup` and `$unwind` copy documents with a copier for BSON-shaped data (dicts,
  lists, immutable scalars) instead of `copy.deepcopy`. Every other stage is mongomock's own.

Field indexes are built on first use, one scan each. Values that cannot be hashed (lists,
sub-documents) go to an "always a candidate" bucket, which keeps array matching correct.
"""

from __future__ import annotations

import copy
import datetime
import itertools
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any

import mongomock
from bson import ObjectId
from mongomock import DuplicateKeyError, filtering, helpers
from mongomock import aggregate as mongomock_aggregate
from mongomock.collection import Collection, Cursor
from mongomock.command_cursor import CommandCursor
from mongomock.filtering import filter_applies

_MISSING = object()
# Above this many candidates an index answer is no better than a scan.
_SELECTIVE = 0.5


def _hashable(value: Any) -> bool:
    return isinstance(value, Hashable) and not isinstance(value, list | dict)


# Values that are never changed in place: a copy of a document may share them.
_IMMUTABLE = frozenset({str, int, float, bool, type(None), bytes, datetime.datetime, ObjectId})


def copy_document(value: Any) -> Any:
    """`copy.deepcopy` for BSON-shaped data: dicts and lists copied, immutable scalars shared.

    Anything else (a `SON`, a tuple, a `Decimal128`, …) goes to `copy.deepcopy` as before.
    """
    kind = type(value)
    if kind is dict:
        return {key: copy_document(item) for key, item in value.items()}
    if kind is list:
        return [copy_document(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


def _typed(value: Any) -> tuple[type, Any] | None:
    """A scalar with its type (`1`, `1.0` and `True` differ), or None for anything else."""
    kind = type(value)
    return (kind, value) if kind in _IMMUTABLE else None


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
        if old is not _MISSING and _hashable(value) and old == value:
            return  # the same bucket: Python equality is what files a value
        self.unfile(doc_id)
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
        # Per unique index (by name): the index definition, and for each document the key it
        # was last checked with. The definition is kept so that a re-created index starts over.
        self.unique_keys: dict[str, tuple[Mapping[str, Any], dict[Any, tuple]]] = {}

    def checked_keys(self, name: str, index: Mapping[str, Any]) -> dict[Any, tuple]:
        entry = self.unique_keys.get(name)
        if entry is None or entry[0] is not index:
            entry = self.unique_keys[name] = (index, {})
        return entry[1]

    def seen(self, doc_id: Any) -> None:
        if doc_id not in self.order:
            self.order[doc_id] = next(self._next)

    def inserted(self, doc_id: Any) -> None:
        """A (re-)inserted document goes last in the store, whatever its id was before."""
        self.order[doc_id] = next(self._next)

    def forget_checked(self, doc_id: Any) -> None:
        for _, keys in self.unique_keys.values():
            keys.pop(doc_id, None)

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
        self.forget_checked(doc_id)
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


class _Cursor(Cursor):
    """mongomock's cursor, reading its n-th document in O(1).

    mongomock's `__next__` slices the whole result list past `skip` for every document, so
    reading a result of N documents cost O(N²) (half a million references copied for 1,000).
    """

    def __next__(self) -> Any:
        if self._skip < 0:
            return super().__next__()
        results = self._compute_results()
        if self._limit and self._emitted >= abs(self._limit):
            raise StopIteration
        position = self._skip + self._emitted
        if position >= len(results):
            raise StopIteration
        self._emitted += 1
        return results[position]

    next = __next__


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
        if isinstance(data, Mapping) and "_id" in data:
            # A document inserted again under an old id is checked afresh.
            self._indexes.forget_checked(_store_key(data["_id"]))
        result = super()._insert(data, *args, **kwargs)
        if isinstance(data, Mapping):
            self._indexes.inserted(_store_key(data["_id"]))
        return result

    def _ensure_uniques(self, new_data: dict) -> None:
        # Called by mongomock after every insert and every changing update of `new_data`.
        doc_id = _store_key(new_data["_id"])
        for name, index in self._store.indexes.items():
            if index.get("unique"):
                self._check_unique(name, index, new_data, doc_id)
        self._indexes.refresh(doc_id, new_data)

    def _check_unique(
        self, name: str, index: Mapping[str, Any], new_data: dict, doc_id: Any
    ) -> None:
        spec = {}
        for key, _ in index["key"]:
            try:
                spec[key] = helpers.get_value_by_dot(new_data, key)
            except KeyError:
                spec[key] = None
        partial = index.get("partialFilterExpression")
        applies = partial is None or filter_applies(partial, new_data)
        # The store held no duplicate before this write; if this document's key (and whether
        # the index covers it) is exactly what it was last checked with, it still holds none.
        typed = [_typed(value) for value in spec.values()]
        stamp = None if None in typed else (applies, *typed)
        checked = self._indexes.checked_keys(name, index)
        if stamp is not None and checked.get(doc_id) == stamp:
            return
        checked.pop(doc_id, None)
        if not (index.get("sparse") and set(spec.values()) == {None}) and applies:
            query = spec if partial is None else {"$and": [partial, spec]}
            for other in self._iter_documents(query):
                if _store_key(other["_id"]) != doc_id:
                    raise DuplicateKeyError("E11000 Duplicate Key Error", 11000)
        if stamp is not None:
            checked[doc_id] = stamp

    def create_index(
        self, key_or_list: Any, cache_for: int = 300, session: Any = None, **kwargs: Any
    ) -> str:
        """mongomock checks the documents already there against a new unique index without its
        partial filter, so a partial unique index over jobs it does not cover (the old system's,
        without `target`) was refused. Check only the covered documents, then register it."""
        partial = kwargs.get("partialFilterExpression")
        if session or not kwargs.get("unique") or partial is None:
            return super().create_index(key_or_list, cache_for, session, **kwargs)
        keys = helpers.create_index_list(key_or_list)
        name = kwargs.get("name") or helpers.gen_index_name(keys)
        index: dict[str, Any] = {"key": keys}
        if kwargs.get("sparse"):
            index["sparse"] = True
        index["unique"] = True
        if kwargs.get("expireAfterSeconds") is not None:
            index["expireAfterSeconds"] = kwargs["expireAfterSeconds"]
        index["partialFilterExpression"] = partial
        existing = self._store.indexes.get(name)
        if existing is not None:
            if existing == index:
                return name
            return super().create_index(key_or_list, cache_for, session, **kwargs)  # refuses
        for doc in list(self._store.documents):
            self._check_unique(name, index, doc, _store_key(doc["_id"]))
        self._store.create_index(name, index)
        return name

    def find(self, *args: Any, **kwargs: Any) -> Cursor:
        cursor = super().find(*args, **kwargs)
        cursor.__class__ = _Cursor
        return cursor

    def distinct(self, key: Any, filter: Any = None, session: Any = None) -> list[Any]:
        """mongomock's `distinct` reads every matching document whole (a copy each): for a
        top-level field, read only that field."""
        if session or not isinstance(key, str) or "." in key or key.startswith("$"):
            return super().distinct(key, filter, session=session)
        return self.find(filter, {key: 1}).distinct(key)

    # -- aggregation ----------------------------------------------------------------------

    def aggregate(self, pipeline: Any, session: Any = None, **kwargs: Any) -> CommandCursor:
        """mongomock's aggregation, with a leading `$match` answered like `find` (indexed
        candidates) and cheaper `$sort`, `$lookup` and `$unwind`.

        When the stages after the leading `$match` and `$sort`s all work one document at a
        time, the result streams: the matching documents are sorted as references (nothing
        copied), then copied and carried through the rest `STREAM_CHUNK` at a time, as the
        cursor is read. So a planning sweep holds one reference per due job, not a copy.
        """
        stages = list(pipeline) if isinstance(pipeline, list | tuple) else None
        if session or not stages or not all(_single_stage(s) for s in stages):
            return super().aggregate(pipeline, session=session, **kwargs)
        first = stages[0]
        if "$match" not in first or not isinstance(first["$match"], Mapping):
            return CommandCursor(self._run_stages(list(self.find()), stages))
        # References, not copies; the filter's dates made naive as `find` makes them.
        spec = helpers.patch_datetime_awareness_in_document(first["$match"])
        matched = list(self._iter_documents(spec))
        rest = stages[1:]
        while rest and "$sort" in rest[0] and _plain_sort(rest[0]["$sort"]):
            matched = _sort(matched, self.database, rest[0]["$sort"])
            rest = rest[1:]
        if not all(_streams(stage) for stage in rest):
            return CommandCursor(self._run_stages([self._read_copy(d) for d in matched], rest))
        fields = None
        if rest and _plain_inclusion(rest[0]):
            fields, rest = dict(rest[0]["$project"]), rest[1:]
        return CommandCursor(self._stream(matched, fields, rest))

    def _read_copy(self, document: dict, fields: Mapping[str, Any] | None = None) -> dict:
        """The document as `find` (with this projection) would return it."""
        copied = self._copy_only_fields(document, None if fields is None else dict(fields), dict)
        if self.codec_options.tz_aware:
            copied = helpers.make_datetime_timezone_aware_in_document(copied)
        return copied

    def _stream(
        self, matched: list[dict], fields: Mapping[str, Any] | None, stages: list[dict]
    ) -> Iterator[dict]:
        for start in range(0, len(matched), STREAM_CHUNK):
            chunk = [self._read_copy(d, fields) for d in matched[start : start + STREAM_CHUNK]]
            yield from self._run_stages(chunk, stages)

    def _run_stages(self, docs: list[dict], stages: list[dict]) -> list[dict]:
        for stage in stages:
            ((operator, options),) = stage.items()
            fast = _FAST_STAGES.get(operator)
            if fast is not None and fast[0](options):
                docs = fast[1](docs, self.database, options)
            else:
                cursor = mongomock_aggregate.process_pipeline(docs, self.database, [stage], None)
                docs = list(cursor)
        return docs


# How many documents a streaming aggregation copies and carries through its stages at a time.
STREAM_CHUNK = 500

# Stages that look at one document at a time: a chunk through them is the whole through them.
_PER_DOCUMENT = frozenset({"$match", "$project", "$addFields", "$set", "$lookup", "$unwind"})


def _streams(stage: Mapping[str, Any]) -> bool:
    ((operator, options),) = stage.items()
    if operator == "$match":
        return _plain_match(options)  # no `$expr` or text search reading other documents
    return operator in _PER_DOCUMENT


def _plain_inclusion(stage: Mapping[str, Any]) -> bool:
    """A `$project` that only includes top-level fields: what a `find` projection does."""
    spec = stage.get("$project")
    return (
        isinstance(spec, Mapping)
        and bool(spec)
        and all(
            isinstance(k, str) and not k.startswith("$") and "." not in k and v in (1, True)
            for k, v in spec.items()
        )
    )


def _single_stage(stage: Any) -> bool:
    return isinstance(stage, Mapping) and len(stage) == 1


def _plain_lookup(options: Any) -> bool:
    """A `$lookup` mongomock would accept, in its localField/foreignField form."""
    names = ("from", "localField", "foreignField", "as")
    return (
        isinstance(options, Mapping)
        and set(options) == set(names)
        and all(isinstance(options[n], str) for n in names)
        and not any(options[n].startswith("$") for n in names[1:])
        and "." not in options["as"]
    )


def _lookup(docs: list[dict], database: Any, options: Mapping[str, str]) -> list[dict]:
    """mongomock's `$lookup`, asking the foreign collection once per distinct scalar value."""
    foreign = database.get_collection(options["from"])
    local, foreign_field, into = options["localField"], options["foreignField"], options["as"]
    found_for: dict[tuple[type, Any], list[dict]] = {}
    for doc in docs:
        try:
            value = helpers.get_value_by_dot(doc, local)
        except KeyError:
            value = None
        key = _typed(value)
        if key is not None and key in found_for:
            doc[into] = [copy_document(match) for match in found_for[key]]
            continue
        query = {"$in": value} if isinstance(value, list) else value
        matches = list(foreign.find({foreign_field: query}))
        if key is not None:
            found_for[key] = matches
            matches = [copy_document(match) for match in matches]
        doc[into] = matches
    return docs


def _plain_unwind(options: Any) -> bool:
    path = options.get("path") if isinstance(options, Mapping) else options
    return isinstance(path, str) and path.startswith("$")


def _unwind(docs: list[dict], database: Any, options: Any) -> list[dict]:
    """mongomock's `$unwind`, with `copy_document` instead of `copy.deepcopy`."""
    if not isinstance(options, Mapping):
        options = {"path": options}
    path = options["path"][1:]
    keep_empty = options.get("preserveNullAndEmptyArrays")
    index_field = options.get("includeArrayIndex")
    out = []
    for doc in docs:
        try:
            array = helpers.get_value_by_dot(doc, path)
        except KeyError:
            if keep_empty:
                out.append(doc)
            continue
        if array is None:
            if keep_empty:
                out.append(doc)
            continue
        if array == []:
            if keep_empty:
                new_doc = copy_document(doc)
                helpers.delete_value_by_dot(new_doc, path)
                out.append(new_doc)
            continue
        items = enumerate(array) if isinstance(array, list) else [(None, array)]
        for position, item in items:
            new_doc = helpers.set_value_by_dot(copy_document(doc), path, item)
            if index_field:
                new_doc = helpers.set_value_by_dot(new_doc, index_field, position)
            out.append(new_doc)
    return out


def _match_fields(spec: Any) -> set[str] | None:
    """The top-level fields a filter reads, or None if it may read others (`$expr`, …)."""
    if not isinstance(spec, dict):
        return None
    fields: set[str] = set()
    for key, value in spec.items():
        if key in ("$and", "$or", "$nor") and isinstance(value, list):
            for part in value:
                inner = _match_fields(part)
                if inner is None:
                    return None
                fields |= inner
        elif key == "$comment":
            continue
        elif key.startswith("$"):
            return None
        else:
            fields.add(key.split(".", 1)[0])
    return fields


def _plain_match(options: Any) -> bool:
    return _match_fields(options) is not None


def _match(docs: list[dict], database: Any, options: dict) -> list[dict]:
    """mongomock's `$match`, which tests each document with its dates made naive: only the
    fields the filter reads are converted (it reads no other)."""
    spec = helpers.patch_datetime_awareness_in_document(options)
    fields = _match_fields(spec) or set()
    patch = helpers.patch_datetime_awareness_in_document
    return [
        doc for doc in docs if filter_applies(spec, {f: patch(doc[f]) for f in fields if f in doc})
    ]


# mongomock's sort order of BSON types (`filtering._get_compare_type`), for the plain types.
_SORT_TYPE = {
    type(None): 5,
    int: 10,
    float: 10,
    str: 15,
    ObjectId: 35,
    bool: 40,
    datetime.datetime: 45,
}


def _sort_key(field: str, doc: Mapping[str, Any]) -> tuple | None:
    """`filtering.resolve_sort_key` as plain tuples, or None for a value of another type.

    mongomock compares two values by type order, then by value (`bson_compare`); a tuple of
    (type order, value) compares the same way, without a Python call per comparison.
    """
    value = filtering.resolve_key(field, doc)
    if value is filtering.NOTHING:
        return (1, (5, 0))
    if isinstance(value, list | tuple):
        if not value:
            return (0, (5, 0))
        value = value[0]
    kind = _SORT_TYPE.get(type(value))
    if kind is None:
        return None
    return (1, (5, 0)) if value is None else (1, (kind, value))


def _plain_sort(options: Any) -> bool:
    return isinstance(options, Mapping) and all(
        isinstance(direction, int) for direction in options.values()
    )


def _sort(docs: list[dict], database: Any, options: Mapping[str, int]) -> list[dict]:
    """mongomock's `$sort` (one stable sort per field, last field first), each pass on keys
    computed once per document instead of compared through `bson_compare`."""
    for field, direction in reversed(list(options.items())):
        keys = [_sort_key(field, doc) for doc in docs]
        if None in keys:
            docs = sorted(
                docs,
                key=lambda doc, f=field: filtering.resolve_sort_key(f, doc),
                reverse=direction < 0,
            )
        else:
            order = sorted(range(len(docs)), key=keys.__getitem__, reverse=direction < 0)
            docs = [docs[i] for i in order]
    return docs


_FAST_STAGES = {
    "$sort": (_plain_sort, _sort),
    "$lookup": (_plain_lookup, _lookup),
    "$unwind": (_plain_unwind, _unwind),
    "$match": (_plain_match, _match),
}


class _CopyModule:
    """What mongomock's modules see as `copy`: the same, with `copy_document` as deepcopy (an
    update snapshots every document it touches, `$group` copies its input)."""

    copy = staticmethod(copy.copy)

    @staticmethod
    def deepcopy(value: Any, memo: Any = None) -> Any:
        return copy_document(value) if memo is None else copy.deepcopy(value, memo)


_installed = False


def install() -> None:
    """Make every mongomock database of this process create indexed collections."""
    global _installed
    if not _installed:
        mongomock.database.Collection = IndexedCollection
        mongomock.collection.copy = _CopyModule
        mongomock_aggregate.copy = _CopyModule
        _installed = True
