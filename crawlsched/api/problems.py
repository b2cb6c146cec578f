"""Errors as RFC 9457 problem details (`application/problem+json`).

Every error the API answers has the same shape: `type` (a stable URI naming the kind of
problem), `title`, `status`, `detail` (what went wrong with this request) and `instance` (the
path asked for). Validation errors add `errors`, one entry per bad field.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from crawlsched.errors import (
    Conflict,
    CrawlschedError,
    RunAlreadyEnded,
    RunRefused,
    ScheduleExists,
    ScheduleStateError,
)
from crawlsched.logs import get_logger

log = get_logger(__name__)

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://crawlsched.dev/problems/"

TITLES = {
    400: "Bad request",
    401: "Not authenticated",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Content too large",
    422: "Invalid request",
    500: "Internal error",
    503: "Service unavailable",
}
KINDS = {
    400: "bad-input",
    401: "unauthenticated",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    413: "too-large",
    422: "invalid-request",
    500: "internal-error",
    503: "unavailable",
}


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    instance: str
    errors: list[dict[str, Any]] | None = None


class ApiProblem(Exception):
    """Raise to answer with a problem: `ApiProblem(409, "…", kind="idempotency-conflict")`."""

    def __init__(
        self, status: int, detail: str, kind: str | None = None, headers: dict | None = None
    ):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.kind = kind or KINDS.get(status, "error")
        self.headers = headers


def problem_response(
    request: Request,
    status: int,
    detail: str,
    kind: str | None = None,
    headers: dict | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": TYPE_BASE + (kind or KINDS.get(status, "error")),
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "instance": request.url.path,
    }
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def problem_doc(status: int) -> dict[str, Any]:
    """The OpenAPI description of a problem answer with this status."""
    return {"model": Problem, "content": {MEDIA_TYPE: {}}, "description": TITLES[status]}


# Declared on every route so that the OpenAPI schema names the errors it may answer (413: any
# request may carry a body over the limit, `api.body_guard`).
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: problem_doc(status) for status in (400, 401, 403, 404, 409, 413, 422)
}


def _field_errors(error: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {
            # A model's own check is at the model (pydantic names it `function-after[…]`).
            "location": ".".join(str(p) for p in e.get("loc", ()) if not _is_check(p)),
            "message": str(e.get("msg", "")).removeprefix("Value error, "),
        }
        for e in error.errors()
    ]


def _is_check(part: Any) -> bool:
    return isinstance(part, str) and part.startswith(("function-after[", "function-before["))


# What the store holds refuses the request (a name taken, a state that forbids it): 409.
CONFLICTS = (ScheduleExists, ScheduleStateError, RunRefused, RunAlreadyEnded, Conflict)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiProblem)
    async def _api_problem(request: Request, exc: ApiProblem) -> JSONResponse:
        return problem_response(request, exc.status, exc.detail, exc.kind, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _field_errors(exc)
        first = errors[0] if errors else {"location": "", "message": "invalid"}
        detail = f"{first['location']}: {first['message']}"
        return problem_response(request, 422, detail, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": allowed_methods(request)}
        return problem_response(request, exc.status_code, str(exc.detail), headers=headers)

    # Errors the flow and stores raise on purpose: unknown things are 404, bad input 400.
    # KeyError and IndexError are LookupErrors too, but raised by mistakes, not on purpose.
    @app.exception_handler(LookupError)
    async def _lookup(request: Request, exc: LookupError) -> JSONResponse:
        if isinstance(exc, KeyError | IndexError):
            return _internal(request, exc)
        return problem_response(request, 404, str(exc))

    @app.exception_handler(ValueError)
    async def _value(request: Request, exc: ValueError) -> JSONResponse:
        if isinstance(exc, UnicodeError):
            return _internal(request, exc)
        return problem_response(request, 400, str(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return _internal(request, exc)

    @app.exception_handler(CrawlschedError)
    async def _crawlsched(request: Request, exc: CrawlschedError) -> JSONResponse:
        # A schedule that exists already, or whose state refuses the operation (pausing a
        # stopped one): a conflict with what the store holds, not a malformed request.
        status = 404 if isinstance(exc, LookupError) else 400
        if isinstance(exc, CONFLICTS):
            status = 409
        return problem_response(request, status, str(exc))


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> str:
    """Every method some route serves at this path. (Starlette's 405 names the methods of the
    first route whose path matched: `GET` alone for `/v1/schedules`, which `POST` serves too.)"""
    routes = request.app.router.routes
    return ", ".join(
        method
        for method in METHODS
        if any(r.matches({**request.scope, "method": method})[0] == Match.FULL for r in routes)
    )


def _internal(request: Request, exc: BaseException) -> JSONResponse:
    """A bug: logged with its traceback, answered without it."""
    log.error("api_error", path=request.url.path, exc_info=exc)
    return problem_response(request, 500, "internal error (logged on the server)")
