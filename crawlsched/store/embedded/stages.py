"""Aggregation stages the embedded store runs faster than mongomock, with the same answers."""

from __future__ import annotations

import datetime
import heapq
import math
from collections.abc import Mapping
from typing import Any

from mongomock import filtering, helpers
from mongomock.filtering import filter_applies

from crawlsched.store.embedded.copying import copy_document, typed
from crawlsched.store.embedded.matching import TYPE_ORDER, UNSURE, compile_filter
from crawlsched.store.embedded.reshaping import (
    add_fields,
    plain_add_fields,
    plain_projection,
    project,
)

# Stages that look at one document at a time: a chunk through them is the whole through them.
_PER_DOCUMENT = frozenset({"$match", "$project", "$addFields", "$set", "$lookup", "$unwind"})


def streams(stage: Mapping[str, Any]) -> bool:
    ((operator, options),) = stage.items()
    if operator == "$match":
        return plain_match(options)  # no `$expr` or text search reading other documents
    return operator in _PER_DOCUMENT


def single_stage(stage: Any) -> bool:
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
        key = typed(value)
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
    """mongomock's `$unwind`, with `copy_document` instead of `copy.deepcopy`, and no copy for
    the last element."""
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
        items = list(enumerate(array)) if isinstance(array, list) else [(None, array)]
        for position, item in items:
            # The last element takes the document itself (each stage's input is its own, and a
            # top-level path replaces one value, changing nothing it shares); the others a copy.
            last = position == items[-1][0] and "." not in path
            new_doc = helpers.set_value_by_dot(doc if last else copy_document(doc), path, item)
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


def plain_match(options: Any) -> bool:
    return _match_fields(options) is not None


def _match(docs: list[dict], database: Any, options: dict) -> list[dict]:
    """mongomock's `$match`, through a compiled filter; where it is unsure, mongomock tests the
    document with its dates made naive (only the fields the filter reads: it reads no other)."""
    spec = helpers.patch_datetime_awareness_in_document(options)
    fields = _match_fields(spec) or set()
    patch = helpers.patch_datetime_awareness_in_document
    compiled = compile_filter(spec)
    kept = []
    for doc in docs:
        verdict = UNSURE if compiled is None else compiled(doc)
        if verdict is UNSURE:
            verdict = filter_applies(spec, {f: patch(doc[f]) for f in fields if f in doc})
        if verdict:
            kept.append(doc)
    return kept


def _sort_key(field: str, doc: Mapping[str, Any]) -> tuple | None:
    """`filtering.resolve_sort_key` as plain tuples, or None for a value of another type.

    mongomock compares two values by type order, then by value (`bson_compare`); a tuple of
    (type order, value) compares the same way, without a Python call per comparison.
    """
    if "." in field or not isinstance(doc, dict):
        value = filtering.resolve_key(field, doc)
    else:
        value = doc.get(field, filtering.NOTHING)  # what `resolve_key` reads, without its calls
    if value is filtering.NOTHING:
        return (1, (5, 0))
    if isinstance(value, list | tuple):
        if not value:
            return (0, (5, 0))
        value = value[0]
    kind = TYPE_ORDER.get(type(value))
    if kind is None:
        return None
    return (1, (5, 0)) if value is None else (1, (kind, value))


def index_key(field: str, doc: Mapping[str, Any]) -> tuple | None:
    """`_sort_key` of a top-level field where any two keys compare (what an ordered index
    holds), or None: a value of another type, a NaN, a date with a time zone."""
    key = _sort_key(field, doc)
    if key is None:
        return None
    value = key[1][1]
    if type(value) is float and math.isnan(value):
        return None
    if type(value) is datetime.datetime and value.tzinfo is not None:
        return None
    return key


def plain_sort(options: Any) -> bool:
    return isinstance(options, Mapping) and all(
        isinstance(direction, int) for direction in options.values()
    )


def sort_documents(
    docs: list[dict], database: Any, options: Mapping[str, int], first: int | None = None
) -> list[dict]:
    """mongomock's `$sort` (one stable sort per field, last field first), each pass on keys
    computed once per document instead of compared through `bson_compare`. `first`: only
    that many documents are wanted (a single-field sort then keeps the `first` best in a heap,
    which `heapq` documents as equal to the sorted list cut, ties in order, when every key
    compares)."""
    fields = list(options.items())
    if first is not None and len(fields) == 1 and first < len(docs):
        ((field, direction),) = fields
        # A NaN compares false to everything: a heap of it is not the sorted list cut.
        keys = [index_key(field, doc) for doc in docs]
        if None not in keys:
            pick = heapq.nsmallest if direction > 0 else heapq.nlargest
            return [docs[i] for i in pick(first, range(len(docs)), key=keys.__getitem__)]
    for field, direction in reversed(fields):
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


def _group_fields(key: Any) -> list[str] | None:
    """The top-level fields a `$group` `_id` of `"$field"` or `{name: "$field", …}` reads."""
    if isinstance(key, str):
        paths = [key]
    else:
        paths = list(key.values()) if isinstance(key, Mapping) else []
    fields = []
    for path in paths:
        if not isinstance(path, str) or not path.startswith("$") or path.startswith("$$"):
            return None
        if "." in path or len(path) < 2:
            return None
        fields.append(path[1:])
    return fields or None


def plain_count_group(options: Any) -> bool:
    """A `$group` that counts documents by top-level fields: `_id` as `_group_fields` reads
    it, every other field `{"$sum": 1}` (the stores' tallies by state, outcome, depth)."""
    if not isinstance(options, Mapping) or "_id" not in options or len(options) < 2:
        return False
    key = options["_id"]
    if isinstance(key, Mapping) and any(not isinstance(name, str) or "." in name for name in key):
        return False
    if _group_fields(key) is None:
        return False
    return all(
        isinstance(acc, Mapping) and len(acc) == 1 and acc.get("$sum") == 1
        and type(acc["$sum"]) is int
        for name, acc in options.items()
        if name != "_id"
    )  # fmt: skip


# Group keys counted as they are: values that equal each other exactly when MongoDB's do.
# (A bool equals 1 in Python, a float may equal an int, a date needs making aware: those,
# and a missing field, leave the tally to mongomock.)
_COUNTABLE = frozenset({str, int})


def count_group(documents: Any, options: Mapping[str, Any]) -> list[dict] | None:
    """`$group` (`plain_count_group`) over documents read in place, nothing copied; None when
    a document has a field's value this does not count (the caller runs mongomock's)."""
    key = options["_id"]
    fields = _group_fields(key)
    assert fields is not None
    names = list(key) if isinstance(key, Mapping) else None
    tally: dict[tuple, int] = {}
    for document in documents:
        values = []
        for field in fields:
            value = document.get(field, _MISSING)
            if type(value) not in _COUNTABLE:
                return None
            values.append(value)
        group = tuple(values)
        tally[group] = tally.get(group, 0) + 1
    counters = [name for name in options if name != "_id"]
    rows = []
    for group, n in tally.items():
        row: dict[str, Any] = dict.fromkeys(counters, n)
        row["_id"] = dict(zip(names, group, strict=True)) if names else group[0]
        rows.append(row)
    # MongoDB gives groups in no order; mongomock sorts them by key, as here (same answers)
    rows.sort(key=lambda row: filtering.BsonComparable(row["_id"]))
    return rows


_MISSING = object()


FAST_STAGES = {
    "$project": (plain_projection, project),
    "$addFields": (plain_add_fields, add_fields),
    "$set": (plain_add_fields, add_fields),
    "$sort": (plain_sort, sort_documents),
    "$lookup": (_plain_lookup, _lookup),
    "$unwind": (_plain_unwind, _unwind),
    "$match": (plain_match, _match),
}
