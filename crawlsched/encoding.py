"""Store documents as JSON: ISO 8601 dates (UTC), ObjectIds as strings, nothing secret."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from typing import Any

from bson import ObjectId


def plain(value: Any) -> Any:
    """A JSON-ready copy of a store value."""
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
