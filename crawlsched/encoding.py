"""Store documents as JSON: ISO 8601 dates (UTC), ObjectIds as strings, nothing secret."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any

from bson import ObjectId

# Values JSON takes as they are, by exact type (a subclass goes through `_plain_other`).
_AS_IS = frozenset({str, int, bool, type(None)})


def plain(value: Any) -> Any:
    """A JSON-ready copy of a store value. The common types are told apart by their exact type
    (a page of runs is thousands of values, each tested once); anything else, subclasses
    included, by `_plain_other`."""
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is dict:
        copied = {}
        for name, item in value.items():  # the common scalars without a call each
            key = name if type(name) is str else str(name)
            item_kind = type(item)
            if item_kind in _AS_IS:
                copied[key] = item
            elif item_kind is datetime:
                copied[key] = (item if item.tzinfo else item.replace(tzinfo=UTC)).isoformat()
            else:
                copied[key] = plain(item)
        return copied
    if kind is datetime:
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    if kind is list:
        return [plain(v) for v in value]
    if kind is float:
        return value if math.isfinite(value) else None  # NaN and infinities have no JSON form
    return _plain_other(value)


@lru_cache(maxsize=65_536)
def iso_utc(value: datetime) -> str:
    """`plain` of one datetime, remembered: lists of fire times repeat the same few thousand."""
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()


def _plain_other(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, ObjectId):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):  # no JSON form
        return None
    return value
