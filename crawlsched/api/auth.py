"""Bearer tokens: every route but `/health` needs one; changing routes need the admin role.

The token comes from `Authorization: Bearer …` or, for the status page in a browser, from the
`crawlsched_token` cookie its login form sets. The cookie reads, it never writes: it counts on
GET and HEAD only (a form another page auto-submits carries it, an `Authorization` header it
cannot), and only read tokens may log in to the page. A missing, unknown or revoked token is
401; a read token on an admin route is 403.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from crawlsched.api.problems import ApiProblem
from crawlsched.api.token_cache import TokenCache
from crawlsched.runtime import Runtime
from crawlsched.store.tokens import allows, revocations

COOKIE = "crawlsched_token"
COOKIE_METHODS = frozenset({"GET", "HEAD"})
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="crawlsched"'}
UNKNOWN_TOKEN = "the token is unknown or revoked"
VERIFIED = "verified_token"  # (token, row) the body guard already verified, in request.state
# The scheme the OpenAPI schema declares for every route that needs a token (`api/openapi.py`
# adds it; FastAPI's `HTTPBearer` dependency would declare it too, at the price of one more
# dependency to solve on every request).
BEARER_SCHEME = {
    "HTTPBearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "A token from `crawlsched tokens create`.",
    }
}


@dataclass(frozen=True)
class Caller:
    """Who sent the request, and the runtime to answer it with."""

    rt: Runtime
    token_id: str
    role: str


def runtime_of(request: Request) -> Runtime:
    return request.app.state.runtime


def token_of(request: Request) -> str | None:
    """The bearer token of `Authorization`, else the cookie on a GET or HEAD."""
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    if request.method in COOKIE_METHODS:
        return request.cookies.get(COOKIE)
    return None


def verify_token(app: Any, token: str) -> dict[str, Any] | None:
    """The token's row from the store (None: unknown or revoked), remembered in the app's
    `token_cache` when it has one. Reads the store: call it from a worker thread."""
    cache: TokenCache | None = getattr(app.state, "token_cache", None)
    before = revocations()  # before the store: a revoke after it makes the entry stale
    row = app.state.runtime.tokens.verify(token)
    if row is not None and cache is not None:
        cache.put(token, row, before, time.monotonic())
    return row


async def _verified(request: Request, token: str) -> dict[str, Any] | None:
    """The token's row: the body guard's check of this very request, the token cache's, or
    a check now (in a worker thread: the store may be a network away)."""
    done = getattr(request.state, VERIFIED, None)
    if done is not None and done[0] == token:
        return done[1]
    cache: TokenCache | None = getattr(request.app.state, "token_cache", None)
    if cache is not None:
        row = cache.get(token, revocations(), time.monotonic())
        if row is not None:
            return row
    return await run_in_threadpool(verify_token, request.app, token)


def _caller(needed: str) -> Any:
    # Async: on the event loop, so that a token the cache knows costs no trip to the pool.
    async def dependency(request: Request) -> Caller:
        token = token_of(request)
        if not token:
            raise ApiProblem(401, "a bearer token is required", headers=CHALLENGE)
        row = await _verified(request, token)
        if row is None:
            raise ApiProblem(401, UNKNOWN_TOKEN, headers=CHALLENGE)
        if not allows(row["role"], needed):
            raise ApiProblem(403, f"this needs an {needed} token; yours is {row['role']}")
        return Caller(runtime_of(request), row["_id"], row["role"])

    dependency.needs_token = needed  # type: ignore[attr-defined]  (read by `needs_token`)
    return dependency


def needs_token(route: APIRoute) -> bool:
    """Whether the route (any of its dependencies, however deep) asks for a caller."""
    pending = [route.dependant]
    while pending:
        dependant = pending.pop()
        if getattr(dependant.call, "needs_token", None):
            return True
        pending += dependant.dependencies
    return False


Reader = Annotated[Caller, Depends(_caller("read"))]
Admin = Annotated[Caller, Depends(_caller("admin"))]
