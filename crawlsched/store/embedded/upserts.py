"""Upserts by plain equality, applied without mongomock's machinery.

A crawl stores each page's result and registers each page it finds by upsert (`{"model_id":
…, "key": …}` with `$set` and `$setOnInsert`, `{"_id": …}` with `$setOnInsert` alone): the
embedded store's busiest writes in a crawl. mongomock applies an upsert field by field
through its general update code (a deep copy of the document, positional-operator paths, a
server version parsed per field). When the filter is plain equalities on top-level fields and
the update is `$setOnInsert` beside the operators `updates` handles, the result is computed
here exactly as mongomock computes it: the document found is updated by `updates`' steps
(`$setOnInsert` ignored), and when none is found the filter's fields, then a new `_id`, then
the update's fields in the update's order (`$setOnInsert` among them) make the inserted one.
Anything else goes to mongomock.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from bson import ObjectId

from crawlsched.store.embedded.updates import Step, simple_steps

# Filter values taken as they are into an inserted document (mongomock copies the filter).
_PLAIN = (str, int, float, bool, ObjectId, datetime.datetime)


def _plain_filter(spec: Mapping[str, Any]) -> bool:
    return all(
        type(name) is str
        and name
        and not name.startswith("$")
        and "." not in name
        and type(value) in _PLAIN
        for name, value in spec.items()
    )


def upsert_steps(spec: Any, update: Any) -> tuple[list[Step], list[Step]] | None:
    """(the steps applied to a document found, the steps that build the one inserted), or
    None when mongomock must apply this upsert."""
    if type(update) is not dict or not isinstance(spec, Mapping) or not _plain_filter(spec):
        return None
    on_insert = update.get("$setOnInsert", {})
    if type(on_insert) is not dict or ("$setOnInsert" in update and not on_insert):
        return None
    others = {op: fields for op, fields in update.items() if op != "$setOnInsert"}
    found = simple_steps(others) if others else []
    if found is None:
        return None
    # Inserted: `$setOnInsert` is one more `$set`, at its place in the update's order.
    inserting: dict[str, dict] = {}
    for op, fields in update.items():
        as_op = "$set" if op == "$setOnInsert" else op
        merged = inserting.setdefault(as_op, {})
        if type(fields) is not dict or set(fields) & set(merged):
            return None  # a field named twice: mongomock's error
        merged.update(fields)
    inserted = simple_steps(inserting)
    if inserted is None or any(name in spec for _, name, _ in inserted):
        return None
    return found, inserted


def new_document(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The inserted document before the update's steps: the filter's fields, then `_id` (the
    filter's, else a new one), in mongomock's order."""
    doc = dict(spec)
    doc["_id"] = spec["_id"] if spec.get("_id") is not None else ObjectId()
    return doc
