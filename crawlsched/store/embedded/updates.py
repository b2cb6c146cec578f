"""Updates of top-level fields by `$set`/`$unset`, applied without mongomock's machinery.

mongomock updates a document by deep-copying it (to roll back and to see whether anything
changed), then walking each field path through its positional-operator code and BSON-encoding
each value once per document. Claims, outcomes, releases and lease extensions are all `$set` and
`$unset` of top-level fields: for those, the old top-level values are all a rollback needs and
all a change test compares, and a value is encoded once per command.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import bson
from bson import ObjectId

from crawlsched.store.embedded.copying import copy_document

_MISSING = object()
_SHARED = frozenset({str, int, float, bool, type(None), bytes, datetime.datetime, ObjectId})
Step = tuple[bool, str, Any]  # (is $set, field, value)


def simple_steps(update: Any) -> list[Step] | None:
    """The steps of an update made only of `$set`/`$unset` of distinct top-level fields other
    than `_id`, or None for anything else (mongomock applies those, and raises on bad ones)."""
    if type(update) is not dict or not update:
        return None
    steps: list[Step] = []
    seen: set[str] = set()
    for op, fields in update.items():
        if op not in ("$set", "$unset") or type(fields) is not dict or not fields:
            return None
        for name, value in fields.items():
            if (
                type(name) is not str
                or not name
                or name == "_id"
                or name in seen
                or name.startswith("$")
                or "." in name
                or "\0" in name
            ):
                return None
            seen.add(name)
            steps.append((op == "$set", name, value))
    return steps


def check_encodable(steps: list[Step]) -> None:
    """Raise what mongomock raises for a value BSON cannot hold (it encodes each `$set`)."""
    values = {name: value for is_set, name, value in steps if is_set}
    if values:
        bson.encode(values)


def apply_steps(doc: dict[str, Any], steps: list[Step]) -> list[str]:
    """Apply `steps` to `doc` in place; return the fields whose value changed."""
    changed = []
    for is_set, name, value in steps:
        old = doc.get(name, _MISSING)
        if is_set:
            doc[name] = value if type(value) in _SHARED else copy_document(value)
            # mongomock compares the whole document with its snapshot: same test per field.
            if old is _MISSING or not (old is value or old == value):
                changed.append(name)
        elif old is not _MISSING:
            del doc[name]
            changed.append(name)
    return changed


def restore(doc: dict[str, Any], before: Mapping[str, Any]) -> None:
    """Undo `apply_steps` (given the document's top level as it was before), in place."""
    doc.clear()
    doc.update(before)
