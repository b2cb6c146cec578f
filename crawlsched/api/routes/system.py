"""Health (no token), pools, accounts and nodes, statistics and the activity feed."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from crawlsched.api.auth import Reader
from crawlsched.api.models import StatsView
from crawlsched.api.paging import Limit, Offset, Page, page_of
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.encoding import plain
from crawlsched.flow import views

router = APIRouter(tags=["system"], responses=PROBLEM_RESPONSES)


@router.get(
    "/health",
    summary="Is MongoDB reachable, and the broker? (no token needed)",
    responses={503: {"description": "A service is unreachable"}},
)
def health(request: Request) -> JSONResponse:
    checks = request.app.state.health_checks
    results = {name: check() for name, check in checks.items()}
    ok = all(r["ok"] for r in results.values())
    body = {"status": "ok" if ok else "unavailable", **results}
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get("/v1/pools", summary="Capacity and use of each pool, and what waits for what")
def pools(caller: Reader) -> dict[str, Any]:
    return plain(views.pools_overview(caller.rt))


@router.get("/v1/accounts", response_model=Page, summary="Accounts, without their secrets")
def accounts(
    caller: Reader,
    limit: Limit = 100,
    offset: Offset = 0,
    media: Annotated[str | None, Query(max_length=100)] = None,
) -> dict[str, Any]:
    rows = views.account_rows(caller.rt, media)
    return page_of(rows[offset : offset + limit + 1], limit, offset)


@router.get("/v1/nodes", response_model=Page, summary="Selenium nodes with their state and load")
def nodes(caller: Reader, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    rows = views.node_rows(caller.rt)
    return page_of(rows[offset : offset + limit + 1], limit, offset)


@router.get(
    "/v1/stats",
    response_model=StatsView,
    summary="Runs, jobs, executions and events, counted (GetStats)",
)
def stats(caller: Reader) -> dict[str, Any]:
    return plain(views.gather_stats(caller.rt))


@router.get("/v1/activity", response_model=Page, summary="Run and schedule events, newest first")
def activity(
    caller: Reader,
    limit: Limit = 100,
    offset: Offset = 0,
    run_id: Annotated[str | None, Query(max_length=300)] = None,
) -> dict[str, Any]:
    return page_of(views.activity(caller.rt, run_id, limit + 1, offset), limit, offset)
