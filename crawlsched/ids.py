"""Job ids in messages: JSON has no ObjectId, so ids travel as tagged strings, decoded exactly."""

from __future__ import annotations

from typing import Any

from bson import ObjectId
from bson.errors import InvalidId


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
        raise ValueError(f"not an encoded id: {text!r}")
    try:
        if kind == "oid":
            return ObjectId(raw)
        if kind == "int":
            return int(raw)
    except (InvalidId, ValueError) as e:
        raise ValueError(f"bad {kind} id: {raw!r}") from e
    if kind == "str":
        return raw
    raise ValueError(f"unknown id kind {kind!r} in {text!r}")
