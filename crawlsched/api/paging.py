"""Every list is a page: `limit` and `offset` in, `items` and `next_offset` out."""

from __future__ import annotations

from typing import Annotated, Any

import pydantic_core
from fastapi import Query, Response
from pydantic import BaseModel, Field

from crawlsched.control.pages import page_of

__all__ = ["CountedPage", "Limit", "Offset", "Page", "page_json", "page_of", "page_response"]

MAX_LIMIT = 1000

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="At most this many items.")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="Skip this many items.")]


class Page(BaseModel):
    items: list[dict[str, Any]]
    limit: int
    offset: int
    next_offset: int | None = None


class CountedPage(Page):
    """A page of a list that says how long it is."""

    total: int = Field(description="How many items match, on every page.")


def page_json(items: list[bytes], limit: int, offset: int, more: bool) -> bytes:
    """`pydantic_core.to_json(page_of(...))`, made of its items' own JSON (`to_json` of each
    `plain` item): compact JSON puts nothing between them but commas."""
    rest = {"limit": limit, "offset": offset, "next_offset": offset + limit if more else None}
    return b'{"items":[' + b",".join(items) + b"]," + pydantic_core.to_json(rest)[1:]


def page_response(items: list[dict[str, Any]], limit: int, offset: int) -> Response:
    """`page_of` of items made of JSON's own types only (no `plain` copy), as the response
    itself, its JSON encoded here as FastAPI would encode it.

    For a route with `response_model=Page` (kept: it documents the answer), FastAPI validates a
    returned dict against the model, and for a sync route it does so in a second trip through
    the thread pool; a returned `Response` is sent as it is. The items are JSON's own types,
    so there is nothing for that validation to check or convert."""
    more = len(items) > limit
    page = {
        "items": items[:limit],
        "limit": limit,
        "offset": offset,
        "next_offset": offset + limit if more else None,
    }
    return Response(pydantic_core.to_json(page), media_type="application/json")
