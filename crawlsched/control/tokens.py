"""API tokens: created (the token shown once, only its hash kept), listed, revoked."""

from __future__ import annotations

from typing import Any

from crawlsched.control.pages import sliced
from crawlsched.encoding import plain
from crawlsched.errors import Conflict
from crawlsched.runtime import Runtime


def page(rt: Runtime, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """Tokens with their role and whether they are revoked (never the tokens themselves)."""
    return sliced(rt.tokens.all(), limit, offset)


def create(rt: Runtime, role: str, name: str) -> dict[str, Any]:
    """A new token: its row, and the token itself, this once."""
    name = name.strip()
    if not name or len(name) > 100:
        raise ValueError("name: who or what uses the token, 1 to 100 characters")
    row, token = rt.tokens.create(role, name, rt.now())
    return {**plain(row), "token": token}


def revoke(rt: Runtime, token_id: str) -> dict[str, Any]:
    """Every request with the token is refused from now on."""
    try:
        return plain(rt.tokens.revoke(token_id, rt.now()))
    except LookupError:
        raise
    except ValueError as e:  # already revoked
        raise Conflict(str(e)) from None
