"""Every list is a page: `limit` and `offset` in, `items` and `next_offset` out."""

from __future__ import annotations

from typing import Any

from crawlsched.encoding import plain


def page_of(
    items: list[dict[str, Any]], limit: int, offset: int, total: int | None = None
) -> dict[str, Any]:
    """A page of `items`, which the store read with `limit + 1`: the extra one only tells
    whether there is a next page. `total`: how many match, when it was counted."""
    more = len(items) > limit
    page = {
        "items": plain(items[:limit]),
        "limit": limit,
        "offset": offset,
        "next_offset": offset + limit if more else None,
    }
    if total is not None:
        page["total"] = total
    return page


def sliced(items: list[dict[str, Any]], limit: int, offset: int) -> dict[str, Any]:
    """A page of a list read whole."""
    return page_of(items[offset : offset + limit + 1], limit, offset)
