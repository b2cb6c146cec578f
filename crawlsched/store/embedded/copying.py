"""Copies of stored documents: what mongomock hands out, made without `copy.deepcopy`."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Collection, Mapping
from typing import Any

from bson import ObjectId
from mongomock import helpers

# Values that are never changed in place: a copy of a document may share them.
IMMUTABLE = frozenset({str, int, float, bool, type(None), bytes, datetime.datetime, ObjectId})


def copy_document(value: Any) -> Any:
    """`copy.deepcopy` for BSON-shaped data: dicts and lists copied, immutable scalars shared.

    Anything else (a `SON`, a tuple, a `Decimal128`, …) goes to `copy.deepcopy` as before.
    """
    kind = type(value)
    if kind is dict:
        return {key: copy_document(item) for key, item in value.items()}
    if kind is list:
        return [copy_document(item) for item in value]
    if kind in IMMUTABLE:
        return value
    return copy.deepcopy(value)


def typed(value: Any) -> tuple[type, Any] | None:
    """A scalar with its type (`1`, `1.0` and `True` differ), or None for anything else."""
    kind = type(value)
    return (kind, value) if kind in IMMUTABLE else None


def reader_copy(value: Any) -> Any:
    """What mongomock hands a reader (`collection._copy_field`): lists and documents copied,
    documents of any mapping class as plain dicts (an upserted document is an OrderedDict),
    other values by `copy.copy`, immutable scalars shared."""
    kind = type(value)
    if kind in IMMUTABLE:
        return value
    if kind is dict or (kind is not list and isinstance(value, dict)):
        return {key: reader_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [reader_copy(item) for item in value]
    return copy.copy(value)


def aware_copy(value: Any) -> Any:
    """`make_aware(reader_copy(value))` in one pass: the reader's copy with its dates made
    UTC-aware as they are copied."""
    kind = type(value)
    if kind is datetime.datetime:
        return value.replace(tzinfo=helpers.utc)
    if kind in IMMUTABLE:
        return value
    if kind is dict or (kind is not list and isinstance(value, dict)):
        return aware_dict(value)
    if isinstance(value, list):
        return [aware_copy(item) for item in value]
    return helpers.make_datetime_timezone_aware_in_document(copy.copy(value))


def aware_dict(doc: Mapping[str, Any], drop: Collection[str] = ()) -> dict[str, Any]:
    """`aware_copy` of a document without its fields named in `drop`, in the document's
    order; its scalars copied without a call each (a page of runs is thousands of them)."""
    copied = {}
    for key, value in doc.items():
        if key in drop:
            continue
        kind = type(value)
        if kind is datetime.datetime:
            copied[key] = value.replace(tzinfo=helpers.utc)
        elif kind in IMMUTABLE:
            copied[key] = value
        else:
            copied[key] = aware_copy(value)
    return copied


def copy_fields(doc: dict[str, Any], keep: Collection[str]) -> dict[str, Any]:
    """A reader's copy of the top-level fields of `doc` named in `keep`, in the document's
    order."""
    return {key: reader_copy(value) for key, value in doc.items() if key in keep}


def make_aware(doc: Any) -> Any:
    """`helpers.make_datetime_timezone_aware_in_document` for a document this process owns
    (a fresh copy): its dates become UTC-aware in place instead of in yet another copy."""
    if type(doc) is not dict:
        return helpers.make_datetime_timezone_aware_in_document(doc)
    _aware_in_place(doc)
    return doc


def _aware_in_place(container: dict | list) -> None:
    items = container.items() if type(container) is dict else enumerate(container)
    for key, value in items:
        kind = type(value)
        if kind is datetime.datetime:
            container[key] = value.replace(tzinfo=helpers.utc)
        elif kind is dict or kind is list:
            _aware_in_place(value)
        elif kind not in IMMUTABLE:
            container[key] = helpers.make_datetime_timezone_aware_in_document(value)


_mongomock_patch_datetimes = helpers.patch_datetime_awareness_in_document
# Scalars that patching returns as they are (every type but datetime of `IMMUTABLE`).
_UNPATCHED = IMMUTABLE - {datetime.datetime}


def patch_datetimes(value: Any) -> Any:
    """`helpers.patch_datetime_awareness_in_document` (dates made naive UTC, to the millisecond,
    as MongoDB stores them), with the same answers and no Python call per plain scalar.

    mongomock runs it over every filter, update and inserted document; other mapping and
    sequence classes (an OrderedDict stays one, a SON becomes a dict) go to its own code.
    """
    kind = type(value)
    if kind in _UNPATCHED:
        return value
    if kind is dict:
        return {key: patch_datetimes(item) for key, item in value.items()}
    if kind is list:
        return [patch_datetimes(item) for item in value]
    if kind is datetime.datetime:
        mongo_us = (value.microsecond // 1000) * 1000
        if value.tzinfo:
            return (value - value.utcoffset()).replace(tzinfo=None, microsecond=mongo_us)
        return value.replace(microsecond=mongo_us)
    return _mongomock_patch_datetimes(value)
