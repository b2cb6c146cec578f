"""Updates of top-level fields, applied without mongomock's machinery.

mongomock updates a document by deep-copying it (to roll back and to see whether anything
changed), then walking each field path through its positional-operator code and BSON-encoding
each value once per document. Claims, outcomes, releases, lease extensions, counters and lease
compare-and-sets are all `$set`, `$unset`, `$inc`, `$max` and `$pull` of top-level fields: for
those, the old top-level values are all a rollback needs and all a change test compares, and a
value is encoded once per command.

Each operator is applied only where its result is the one mongomock computes (its own
`_inc_updater`, `_max_updater` and `$pull` code); `supported` says so per document before any
document is touched, and the whole command goes to mongomock otherwise:
- `$inc` of a number (not a bool) onto a missing field or a number;
- `$max` of a number onto a missing field or a number, or of a date onto a missing field or a
  date (mongomock raises comparing a date with anything else);
- `$pull` by a condition of plain equalities (`{"id": "…"}`) from a missing field or a list of
  sub-documents, judged by the compiled filter (`matching`), which says when it is unsure.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import bson
from bson import ObjectId

from crawlsched.store.embedded.copying import copy_document
from crawlsched.store.embedded.matching import UNSURE, Match, compile_filter

_MISSING = object()
_SHARED = frozenset({str, int, float, bool, type(None), bytes, datetime.datetime, ObjectId})
_NUMBERS = (int, float)
_PLAIN_EQUALS = (str, int, ObjectId)  # pull conditions whose compiled answer is exact
_OPERATORS = ("$set", "$unset", "$inc", "$max", "$pull")
Step = tuple[str, str, Any]  # (operator, field, value); a `$pull` value is its compiled match


def _is_number(value: Any) -> bool:
    return type(value) in _NUMBERS  # bool is an int subclass, and not a number here


def _step_value(op: str, value: Any) -> Any:
    """The value a step keeps, or _MISSING when this operator's value is not handled here."""
    if op == "$inc":
        return value if _is_number(value) else _MISSING
    if op == "$max":
        return value if _is_number(value) or type(value) is datetime.datetime else _MISSING
    if op == "$pull":
        if type(value) is not dict or not value:
            return _MISSING
        if not all(
            type(k) is str and k and not k.startswith("$") and "." not in k
            and type(v) in _PLAIN_EQUALS
            for k, v in value.items()
        ):  # fmt: skip
            return _MISSING
        match = compile_filter(value)
        return _MISSING if match is None else match
    return value


def simple_steps(update: Any) -> list[Step] | None:
    """The steps of an update made only of the operators above on distinct top-level fields
    other than `_id`, or None for anything else (mongomock applies those, and raises on bad
    ones)."""
    if type(update) is not dict or not update:
        return None
    steps: list[Step] = []
    seen: set[str] = set()
    for op, fields in update.items():
        if op not in _OPERATORS or type(fields) is not dict or not fields:
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
            kept = _step_value(op, value)
            if kept is _MISSING:
                return None
            seen.add(name)
            steps.append((op, name, kept))
    return steps


def check_encodable(steps: list[Step]) -> None:
    """Raise what mongomock raises for a value BSON cannot hold (it encodes each `$set`)."""
    values = {name: value for op, name, value in steps if op == "$set"}
    if values:
        bson.encode(values)


def supported(doc: Mapping[str, Any], steps: list[Step]) -> bool:
    """Whether every step's result on this document is computed here exactly as mongomock
    computes it (else the command is mongomock's, before anything was changed)."""
    for op, name, value in steps:
        old = doc.get(name, _MISSING)
        if old is _MISSING or op in ("$set", "$unset"):
            continue
        if op == "$inc" and not _is_number(old):
            return False
        if op == "$max" and not (
            (_is_number(old) and _is_number(value))
            or (type(old) is datetime.datetime and type(value) is datetime.datetime
                and (old.tzinfo is None) == (value.tzinfo is None))
        ):  # fmt: skip
            return False
        if op == "$pull":
            if type(old) is not list:
                return False
            if any(type(item) is not dict or value(item) is UNSURE for item in old):
                return False
    return True


def _pulled(items: list, match: Match) -> list:
    return [item for item in items if not match(item)]


def apply_steps(doc: dict[str, Any], steps: list[Step]) -> list[str]:
    """Apply `steps` to `doc` in place (every step `supported`); return the fields whose value
    changed. Values that change are replaced, never mutated, so `restore` can undo."""
    changed = []
    for op, name, value in steps:
        old = doc.get(name, _MISSING)
        if op == "$unset":
            if old is not _MISSING:
                del doc[name]
                changed.append(name)
            continue
        if op == "$set":
            new = value if type(value) in _SHARED else copy_document(value)
        elif op == "$inc":
            new = (0 if old is _MISSING else old) + value
        elif op == "$max":
            new = value if old is _MISSING else max(old, value)
        else:  # $pull
            if old is _MISSING:
                continue  # nothing to pull from: mongomock leaves the document as it is
            new = _pulled(old, value)
        doc[name] = new
        # mongomock compares the whole document with its snapshot: same test per field.
        if old is _MISSING or not (old is new or old == new):
            changed.append(name)
    return changed


def restore(doc: dict[str, Any], before: Mapping[str, Any]) -> None:
    """Undo `apply_steps` (given the document's top level as it was before), in place."""
    doc.clear()
    doc.update(before)
