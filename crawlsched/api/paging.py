"""Every list is a page: `limit` and `offset` in, `items` and `next_offset` out."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from pydantic import BaseModel

MAX_LIMIT = 1000

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="At most this many items.")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="Skip this many items.")]


class Page(BaseModel):
    items: list[dict[str, Any]]
    limit: int
    offset: int
    next_offset: int | None = None


def page_of(items: list[dict[str, Any]], limit: int, offset: int) -> dict[str, Any]:
    """A page of `items`, which the store read with `limit + 1`: the extra one only tells
    whether there is a next page."""
    from crawlsched.encoding import plain

    more = len(items) > limit
    return {
        "items": plain(items[:limit]),
        "limit": limit,
        "offset": offset,
        "next_offset": offset + limit if more else None,
    }
