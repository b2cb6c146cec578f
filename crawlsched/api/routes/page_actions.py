"""The run page's buttons: pause, resume, retry-failed and stop, for an admin's page.

`POST /status/runs/{run}/{action}` acts with the cookie of an admin token, from the page's
own origin and with its CSRF token (`api/page_guard.py`); anything else is refused and
changes nothing. Each action is the API route of the same name, called with the same caller,
so its answer, its refusals (404, 409, 503) and what it changes are the API's.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from crawlsched.api import run_ids  # noqa: F401  (registers `{run_id:run_id}`)
from crawlsched.api.auth import COOKIE, Caller, runtime_of, verify_token
from crawlsched.api.page_guard import CSRF_HEADER, csrf_matches, same_origin
from crawlsched.api.problems import ApiProblem
from crawlsched.api.routes import run_control, runs

router = APIRouter(include_in_schema=False)

ACTIONS = {
    "pause": lambda request, caller, run_id: run_control.pause_run(caller, run_id),
    "resume": run_control.resume_run,
    "retry-failed": run_control.retry_failed,
    "stop": lambda request, caller, run_id: runs.stop_run(request, caller, run_id, None),
}


@router.post("/status/runs/{run_id:run_id}/{action}")
async def act(request: Request, run_id: str, action: str) -> dict[str, Any]:
    if action not in ACTIONS:
        raise ApiProblem(404, f"no action {action[:40]!r}: one of {', '.join(ACTIONS)}")
    if not same_origin(request.headers):
        raise ApiProblem(403, "refused: the request does not come from this page's origin")
    token = request.cookies.get(COOKIE)
    row = await run_in_threadpool(verify_token, request.app, token) if token else None
    if row is None:
        raise ApiProblem(401, "sign in on the status page first")
    if row["role"] != "admin":
        raise ApiProblem(403, f"this needs an admin token; the page's is {row['role']}")
    if not csrf_matches(token, request.headers.get(CSRF_HEADER)):
        raise ApiProblem(403, "refused: the page's CSRF token is missing or wrong")
    caller = Caller(runtime_of(request), row["_id"], row["role"])
    return await run_in_threadpool(ACTIONS[action], request, caller, run_id)
