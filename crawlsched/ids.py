"""Job ids in messages: JSON has no ObjectId, so ids travel as tagged strings, decoded exactly."""

from __future__ import annotations

import reprlib
from typing import Any

from bson import ObjectId
from bson.errors import InvalidId

# Ids come from messages and command lines: an error quotes at most this much of one.
_quoted = reprlib.Repr()
_quoted.maxstring = _quoted.maxother = 80


def shown(text: object) -> str:
    """`text` quoted for an error message, long ones cut in the middle (`reprlib`)."""
    return _quoted.repr(text)


def encode_id(value: Any) -> str:
    if isinstance(value, ObjectId):
        return f"oid:{value}"
    if isinstance(value, bool):
        raise TypeError(f"a job id cannot be a boolean: {value!r}")
    if isinstance(value, int):
        return f"int:{value}"
    if isinstance(value, str):
        return f"str:{value}"
    raise TypeError(f"unsupported job id type {type(value).__name__}: {value!r}")


def decode_id(text: str) -> Any:
    kind, sep, raw = text.partition(":")
    if not sep:
        raise ValueError(f"not an encoded id (oid:…, int:… or str:…): {shown(text)}")
    try:
        if kind == "oid":
            return ObjectId(raw)
        if kind == "int":
            return int(raw)
    except (InvalidId, ValueError) as e:
        raise ValueError(f"bad {kind} id: {shown(raw)}") from e
    if kind == "str":
        return raw
    raise ValueError(f"unknown id kind {shown(kind)} in {shown(text)}")
