"""`Idempotency-Key` on creating routes: a retry returns the first answer, never acts twice.

Without the header the request runs as usual. With it, the key is claimed for this token; a
retry with the same body replays the stored answer, marked `Idempotent-Replayed: true`; the
same key with another body is 422, and a retry while the first is still running is 409.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Header, Request
from fastapi.responses import JSONResponse

from crawlsched.api.auth import Caller
from crawlsched.api.problems import ApiProblem
from crawlsched.encoding import plain
from crawlsched.store.idempotency import Claimed, Conflict, Replay, fingerprint

MAX_KEY = 200

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=MAX_KEY,
        pattern=r"^[!-~]+$",
        description="Any unique string; a retry with the same key is answered, not repeated.",
    ),
]


def once(
    request: Request,
    caller: Caller,
    key: str | None,
    body: Any,
    act: Callable[[], Any],
    status: int = 201,
) -> JSONResponse:
    """Run `act` (its result is the response body) at most once per key."""
    if key is None:
        return JSONResponse(plain(act()), status_code=status)
    if not key.strip():
        raise ApiProblem(400, "Idempotency-Key must not be empty")
    store = caller.rt.idempotency
    seen = store.begin(
        caller.token_id, key, fingerprint(request.method, request.url.path, body), caller.rt.now()
    )
    if isinstance(seen, Replay):
        return JSONResponse(
            seen.body, status_code=seen.status, headers={"Idempotent-Replayed": "true"}
        )
    if isinstance(seen, Conflict):
        if seen.reason == "in-progress":
            raise ApiProblem(409, "a request with this Idempotency-Key is still being answered")
        raise ApiProblem(
            422,
            "this Idempotency-Key was used with a different request",
            kind="idempotency-key-reused",
        )
    assert isinstance(seen, Claimed)
    try:
        result = plain(act())
    except Exception:
        store.abandon(caller.token_id, key)
        raise
    store.finish(caller.token_id, key, status, result)
    return JSONResponse(result, status_code=status)
