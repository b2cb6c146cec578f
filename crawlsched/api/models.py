"""Pieces of request models shared by the routes."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic.json_schema import SkipJsonSchema


class _Given:
    """`Given[T, Field(...)]`: an optional field, T with its constraints or None (read as not
    given), whose schema admits no null (what the schema accepts, the route accepts)."""

    def __class_getitem__(cls, params: tuple[Any, Any]) -> Any:
        kind, field = params
        return Annotated[kind, field] | SkipJsonSchema[None]


Given = _Given
