"""Bounded before authenticated: a pure ASGI middleware in front of every route.

A request that carries a body (a `Content-Length` or a chunked `Transfer-Encoding`) is let in
only once its token is known (401 before a byte of the body is read; `/login` and `/logout`
are open, being how a browser gets or drops its token) and only up to its size limit: a
`Content-Length` over it is 413 at once, and a body that streams past it is 413 when it
does. The body is read here, bounded, and handed to the route as one message, so no route can
read more than the limit whatever it does. Requests without a body pass straight through (the
routes' own token check answers them).

Uploads (`UPLOAD_PATHS`: a file a command sends) are for admin tokens only, refused (403)
before a byte is read, and are not read here: the route spools them to disk as they arrive
(`api/uploads.py`), counted against CRAWLSCHED_API_MAX_UPLOAD_BYTES (`BodyTooLarge` past it),
so a large file is never held whole in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crawlsched.api.auth import CHALLENGE, UNKNOWN_TOKEN, VERIFIED, token_of
from crawlsched.api.problems import problem_response
from crawlsched.store.tokens import allows

# Routes a caller without a bearer token may send a body to (capped all the same): the login
# form, and the page's buttons, which check the page's cookie, origin and CSRF token.
OPEN_PATHS = frozenset({"/login", "/logout"})
PAGE_ACTIONS = "/status/runs/"
UPLOAD_PATHS = frozenset({"/v1/imports", "/v1/store/load"})
UPLOAD_ROLE = "admin"

Verify = Callable[[str], "dict[str, Any] | None"]


class BodyGuard:
    """`app.add_middleware(BodyGuard, verify=..., max_body_bytes=..., max_upload_bytes=...)`:
    `verify` turns a token into its row (None: unknown or revoked)."""

    def __init__(
        self, app: ASGIApp, verify: Verify, max_body_bytes: int, max_upload_bytes: int
    ) -> None:
        self.app = app
        self.verify = verify
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes

    def limit_of(self, path: str) -> int:
        return self.max_upload_bytes if path in UPLOAD_PATHS else self.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        if declared is None and "transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body to bound
            return
        request = Request(scope)
        if scope["path"] not in OPEN_PATHS and not scope["path"].startswith(PAGE_ACTIONS):
            token = token_of(request)
            row = await run_in_threadpool(self.verify, token) if token else None
            if row is None:
                detail = "a bearer token is required" if not token else UNKNOWN_TOKEN
                await _refuse(request, send, 401, detail, CHALLENGE)
                return
            scope.setdefault("state", {})[VERIFIED] = (token, row)
            if scope["path"] in UPLOAD_PATHS and not allows(row["role"], UPLOAD_ROLE):
                detail = f"an upload needs an {UPLOAD_ROLE} token; yours is {row['role']}"
                await _refuse(request, send, 403, detail)
                return
        limit = self.limit_of(scope["path"])
        if declared is not None:
            if not declared.isdigit():
                await _refuse(request, send, 400, "Content-Length is not a number")
                return
            if int(declared) > limit:
                await _refuse(request, send, 413, f"the body is over {limit} bytes")
                return
        if scope["path"] in UPLOAD_PATHS:
            await self.app(scope, _counted(receive, limit), send)
            return
        try:
            body = await _read_bounded(receive, limit)
        except _TooLarge:
            await _refuse(request, send, 413, f"the body is over {limit} bytes")
            return
        except _Disconnected:
            return  # the client went away: no one to answer
        await self.app(scope, _replay(body, receive), send)


class _TooLarge(Exception):
    pass


class BodyTooLarge(Exception):
    """An upload passed its limit while the route read it."""


def _counted(receive: Receive, limit: int) -> Receive:
    """`receive`, raising BodyTooLarge once the body passes `limit` (the rest is never read)."""
    size = 0

    async def counted() -> Message:
        nonlocal size
        message = await receive()
        size += len(message.get("body", b""))
        if size > limit:
            raise BodyTooLarge(f"the body is over {limit} bytes")
        return message

    return counted


class _Disconnected(Exception):
    pass


async def _read_bounded(receive: Receive, limit: int) -> bytes:
    """The whole body; _TooLarge as soon as it passes `limit` (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body as one message, then the connection's own messages (a disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _refuse(
    request: Request, send: Send, status: int, detail: str, headers: dict | None = None
) -> None:
    # The body is left unread: the server closes the connection after this answer.
    response = problem_response(request, status, detail, headers={**(headers or {})})
    response.headers["Connection"] = "close"
    await response(request.scope, request.receive, send)
