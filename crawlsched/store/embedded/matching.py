"""Compiled filters: mongomock's answer for the filter shapes stores use, without interpreting
the filter again for every document.

mongomock's `filter_applies` re-reads the whole filter per document and tests `$in` by scanning
its list: a claim of a 100-job batch (`_id: {$in: [100 ids]}`) compared ~10,000 pairs of ids,
and filtering was a quarter of a pipeline's CPU time. `compile_filter` turns a filter into
one closure per condition, once per command.

A compiled filter answers True or False only where its answer is the one mongomock gives, and
UNSURE otherwise, and its caller then asks `filter_applies`:
- a document value that is not a plain scalar (a list, a sub-document, bytes, a Decimal128…),
  where mongomock matches array elements or may raise;
- a timezone-aware datetime (stored dates are naive; mongomock raises comparing the two).

It compiles field names and dotted paths through sub-documents, `$and`/`$or`/`$nor`, and
`$eq`, `$ne`, `$in`, `$nin`, `$exists`, `$type` (five aliases), `$lt`, `$lte`, `$gt`, `$gte`
(and implicit equality) against plain scalars. Anything else (regexes, `$elemMatch`, `$expr`,
sub-document equality…) is not compiled, and mongomock answers the whole filter. The checks
are evaluated in mongomock's order and the first UNSURE stops them, so an error mongomock
would raise is still raised by mongomock.
"""

from __future__ import annotations

import datetime
import operator
from collections.abc import Callable, Mapping
from typing import Any

from bson import ObjectId

UNSURE = None
_MISSING = object()
_THROUGH = object()  # not a scalar type: the field test answers UNSURE
_EMPTY: dict[str, Any] = {}  # what mongomock reads a missing parent document as
Verdict = bool | None
Match = Callable[[Mapping[str, Any]], Verdict]

# Values whose comparison compiled code answers exactly as mongomock does.
_SCALARS = frozenset({str, int, float, bool, type(None), datetime.datetime, ObjectId})
# mongomock's type order (`filtering._get_compare_type`) for those scalars: how it compares and
# sorts values of different types.
TYPE_ORDER = {
    type(None): 5,
    int: 10,
    float: 10,
    str: 15,
    ObjectId: 35,
    bool: 40,
    datetime.datetime: 45,
}
# `$type` aliases whose test of a scalar is one isinstance (`filtering.TYPE_MAP`).
_TYPE_ALIASES = {
    "double": float,
    "string": str,
    "objectId": ObjectId,
    "bool": bool,
    "date": datetime.datetime,
}
_COMPARISONS = {"$lt": operator.lt, "$lte": operator.le, "$gt": operator.gt, "$gte": operator.ge}


def compile_filter(spec: Any) -> Match | None:
    """A function answering `filter_applies(spec, doc)` (or UNSURE), or None if `spec` has a
    shape it does not compile."""
    if not isinstance(spec, dict):
        return None
    checks: list[Match] = []
    for key, search in spec.items():
        if key == "$comment":
            continue
        if key in ("$and", "$or", "$nor"):
            check = _compile_logical(key, search)
        elif not isinstance(key, str) or key.startswith("$") or not all(key.split(".")):
            return None
        else:
            check = _compile_field(key, search)
        if check is None:
            return None
        checks.append(check)
    return _all_of(checks)


def _all_of(checks: list[Match]) -> Match:
    if len(checks) == 1:
        return checks[0]  # one call less per document (each clause of an `$or` is one)

    def match(doc: Mapping[str, Any]) -> Verdict:
        for check in checks:
            verdict = check(doc)
            if verdict is not True:
                return verdict  # False, or UNSURE: mongomock decides from here on
        return True

    return match


def _compile_logical(key: str, search: Any) -> Match | None:
    if not isinstance(search, list) or not search:
        return None  # mongomock raises on an empty or malformed list
    subs = [compile_filter(clause) for clause in search]
    if any(sub is None for sub in subs):
        return None
    if key == "$and":
        return _all_of(subs)  # type: ignore[arg-type]
    stop_on = key == "$or"  # $or: the first True decides; $nor: the first True fails

    def match(doc: Mapping[str, Any]) -> Verdict:
        for sub in subs:
            verdict = sub(doc)  # type: ignore[misc]
            if verdict is UNSURE:
                return UNSURE
            if verdict:
                return stop_on
        return not stop_on

    return match


def _compile_field(key: str, search: Any) -> Match | None:
    if type(search) in _SCALARS:
        tests = [_compile_operator("$eq", search)]
    elif isinstance(search, dict) and search and all(str(k).startswith("$") for k in search):
        tests = [_compile_operator(op, value) for op, value in search.items()]
    else:
        return None  # sub-document equality, a regex, a list…
    if any(test is None for test in tests):
        return None

    if "." not in key and len(tests) == 1:
        return _top_level_test(key, tests[0])  # type: ignore[arg-type]
    read = _reader(key)

    def match(doc: Mapping[str, Any]) -> Verdict:
        value = read(doc)
        kind = type(value)
        if value is not _MISSING and kind not in _SCALARS:
            return UNSURE  # a list, a sub-document, another type, or a path through a list
        if kind is datetime.datetime and value.tzinfo is not None:
            return UNSURE  # stored dates are naive: this document was not made naive yet
        for test in tests:
            verdict = test(value)  # type: ignore[misc]
            if verdict is UNSURE:
                return UNSURE
            if not verdict:
                return False
        return True

    return match


def _top_level_test(key: str, test: Callable[[Any], Verdict]) -> Match:
    """`_compile_field`'s match for one test of a top-level field, in one call per document
    (a page of runs tests a few such fields of each run it walks)."""

    def match(doc: Mapping[str, Any]) -> Verdict:
        value = doc.get(key, _MISSING)
        kind = type(value)
        if value is not _MISSING and kind not in _SCALARS:
            return UNSURE
        if kind is datetime.datetime and value.tzinfo is not None:
            return UNSURE
        verdict = test(value)
        return verdict if verdict is UNSURE else bool(verdict)

    return match


def _reader(key: str) -> Callable[[Mapping[str, Any]], Any]:
    """The value at `key` (a dotted path through sub-documents), or _MISSING, or _THROUGH when
    the path goes through something else (mongomock then reads array elements, or nothing)."""
    if "." not in key:
        return lambda doc: doc.get(key, _MISSING)
    *parents, last = key.split(".")

    def read(doc: Mapping[str, Any]) -> Any:
        for part in parents:
            doc = doc.get(part, _EMPTY)
            if not isinstance(doc, dict):
                return _THROUGH
        return doc.get(last, _MISSING)

    return read


def _compile_operator(op: str, search: Any) -> Callable[[Any], Verdict] | None:
    if op in ("$eq", "$ne"):
        if type(search) not in _SCALARS:
            return None
        negate = op == "$ne"
        return lambda value: (
            ((search is None) if value is _MISSING else (value == search)) is not negate
        )
    if op in ("$in", "$nin"):
        if not isinstance(search, list | tuple) or not all(type(v) in _SCALARS for v in search):
            return None
        members = frozenset(search)
        with_null = None in members
        negate = op == "$nin"
        return lambda value: (with_null if value is _MISSING else value in members) is not negate
    if op == "$type":
        kind = _TYPE_ALIASES.get(search) if isinstance(search, str) else None
        if kind is None:
            return None
        return lambda value: value is not _MISSING and isinstance(value, kind)
    if op == "$exists":
        if type(search) not in (bool, int):
            return None
        wanted = bool(search)
        return lambda value: (value is not _MISSING) == wanted
    compare = _COMPARISONS.get(op)
    if compare is None or type(search) not in _SCALARS:
        return None
    return _comparison(compare, search)


def _comparison(compare: Callable[[Any, Any], bool], search: Any) -> Callable[[Any], Verdict]:
    """mongomock's `$lt`-family: a missing field or another type bracket never matches."""
    search_order = TYPE_ORDER[type(search)]
    search_aware = isinstance(search, datetime.datetime) and search.tzinfo is not None

    def test(value: Any) -> Verdict:
        if value is _MISSING or TYPE_ORDER[type(value)] != search_order:
            return False
        if value is None:
            return compare(0, 0)
        if search_aware:
            return UNSURE  # an aware date against a naive one: mongomock raises
        return compare(value, search)

    return test
