"""Health (no token), statistics, the activity feed, what a sweep would do (doctor), the crawl
drivers, reference data loaded, and the results crawls stored."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from crawlsched.api.auth import Admin, Reader
from crawlsched.api.models import StatsView
from crawlsched.api.paging import Limit, Offset, Page
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.catalog import MODEL_COLLECTIONS
from crawlsched.control import system
from crawlsched.reference import ReferenceData

router = APIRouter(tags=["system"], responses=PROBLEM_RESPONSES)

Model = Literal[tuple(MODEL_COLLECTIONS)]  # type: ignore[valid-type]
Filter = Annotated[str | None, Query(max_length=300)]


class Reference(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reference: ReferenceData | SkipJsonSchema[None] = Field(
        None,
        description="A reference file's content as JSON (models, media, tasks); default: the "
        "server's (CRAWLSCHED_REFERENCE_FILE, or the packaged one).",
    )


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


@router.get(
    "/v1/stats",
    response_model=StatsView,
    summary="Runs, jobs, executions and events, counted (GetStats)",
)
def stats(caller: Reader) -> dict[str, Any]:
    return system.stats(caller.rt)


@router.get("/v1/activity", response_model=Page, summary="Run and schedule events, newest first")
def activity(
    caller: Reader,
    limit: Limit = 100,
    offset: Offset = 0,
    run_id: Annotated[str | None, Query(max_length=300)] = None,
) -> dict[str, Any]:
    return system.activity(caller.rt, limit, offset, run_id)


@router.get(
    "/v1/results/{model}",
    response_model=Page,
    summary="What crawls stored for a data model, newest first (of one run or job)",
)
def results(
    caller: Reader,
    model: Model,
    limit: Limit = 100,
    offset: Offset = 0,
    run_id: Filter = None,
    job_id: Filter = None,
) -> dict[str, Any]:
    return system.results(caller.rt, model, limit, offset, run_id, job_id)


@router.get("/v1/doctor", summary="What the next sweep would plan, leave waiting or set aside")
def doctor(caller: Reader) -> dict[str, Any]:
    return system.doctor(caller.rt)


@router.get("/v1/drivers", summary="The crawl drivers this server's workers run")
def drivers(caller: Reader) -> dict[str, Any]:
    return system.drivers(caller.rt)


@router.post(
    "/v1/reference",
    summary="Indexes, reference data (models, media, tasks) and the default sweeps (init-db)",
)
def init_db(caller: Admin, body: Reference) -> dict[str, Any]:
    reference = body.reference.model_dump(mode="json") if body.reference else None
    return system.init_db(caller.rt, reference)
