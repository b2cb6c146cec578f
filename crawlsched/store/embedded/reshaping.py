"""`$project` (top-level inclusions) and `$addFields` (field paths) without mongomock's
expression parser, which it runs once per field per document.

Both answer as mongomock does: `$project` keeps the included fields (and `_id` unless excluded)
in the document's own order; `$addFields` reads each path from the document as it came in,
leaves a field out when its path is missing (or goes through a scalar or null), and hands a
document whose path goes through an array to mongomock, which maps over the array.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mongomock import aggregate as mongomock_aggregate

_MISSING = object()
_THROUGH_ARRAY = object()


def _plain_name(name: Any) -> bool:
    return isinstance(name, str) and bool(name) and not name.startswith("$") and "." not in name


def plain_projection(options: Any) -> bool:
    """Top-level inclusions only (`_id` may be included or excluded)."""
    return (
        isinstance(options, Mapping)
        and any(name != "_id" for name in options)
        and all(
            _plain_name(name) and (value in (0, 1) if name == "_id" else value in (1, True))
            for name, value in options.items()
        )
        and all(type(value) in (int, bool) for value in options.values())
    )


def project(docs: list[dict], database: Any, options: Mapping[str, Any]) -> list[dict]:
    keep = {name for name in options if name != "_id"}
    if options.get("_id", 1):
        keep.add("_id")
    # Values are shared, not copied: a stage's input documents are dropped after it.
    return [{key: value for key, value in doc.items() if key in keep} for doc in docs]


def plain_add_fields(options: Any) -> bool:
    """New top-level fields, each a field path (`"$a.b"`), no variables or expressions."""
    return (
        isinstance(options, Mapping)
        and bool(options)
        and all(
            _plain_name(name)
            and isinstance(path, str)
            and path.startswith("$")
            and all(_plain_name(part) for part in path[1:].split("."))
            for name, path in options.items()
        )
    )


def _resolve(doc: dict, parts: list[str]) -> Any:
    value: Any = doc
    for part in parts:
        if isinstance(value, dict):
            value = value.get(part, _MISSING)
            if value is _MISSING:
                return _MISSING
        elif isinstance(value, list | tuple):
            return _THROUGH_ARRAY
        else:
            return _MISSING  # through a scalar or null: mongomock adds nothing
    return value


def add_fields(docs: list[dict], database: Any, options: Mapping[str, str]) -> list[dict]:
    paths = [(name, path[1:].split(".")) for name, path in options.items()]
    out = []
    for doc in docs:
        values = [(name, _resolve(doc, parts)) for name, parts in paths]
        if any(value is _THROUGH_ARRAY for _, value in values):
            stage = [{"$addFields": dict(options)}]
            out.extend(mongomock_aggregate.process_pipeline([doc], database, stage, None))
            continue
        new = dict(doc)
        for name, value in values:
            if value is not _MISSING:
                new[name] = value
        out.append(new)
    return out
