"""Jobs: add a target's jobs, find jobs by state, task, target or id, change a job's meta."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.json_schema import SkipJsonSchema

from crawlsched.api.auth import Admin, Reader
from crawlsched.api.idempotent import IdempotencyKey, once
from crawlsched.api.models import Given, JobView
from crawlsched.api.paging import CountedPage, Limit, Offset, Page
from crawlsched.api.problems import PROBLEM_RESPONSES, ApiProblem
from crawlsched.catalog import JOB_COLLECTIONS, STATE_NAMES
from crawlsched.control import jobs
from crawlsched.encoding import plain
from crawlsched.errors import BadJobInput
from crawlsched.flow import job_ops
from crawlsched.jobs_input import MAX_DEPTH, MAX_INTERVAL_S, MAX_PAGES

router = APIRouter(prefix="/v1", tags=["jobs"], responses=PROBLEM_RESPONSES)

# What `crawlsched.ids.decode_id` reads: an ObjectId, a 64-bit integer or any string.
JOB_STATES = tuple(STATE_NAMES.values())
JOB_ID = r"^(oid:[0-9a-fA-F]{24}|int:-?[0-9]{1,18}|str:.*)$"
Collection = Annotated[Literal[JOB_COLLECTIONS], Path(description="A job collection.")]
JobId = Annotated[str, Path(pattern=JOB_ID, description="An encoded job id (`oid:…`, …).")]
# A meta key: 1-100 characters, no '.' or NUL (BSON cannot hold one in a key), not starting
# '$' (`job_ops.update_meta`). (Said in the schema; the flow checks it with its own message.)
META_KEY = "^[^.$\\u0000][^.\\u0000]{0,99}$"


class NewTarget(BaseModel):
    """One profile or website and the tasks to crawl it with (`crawlsched jobs add`)."""

    # A one-off crawl has no interval; a page parameter goes with its pagination. (Which
    # media, kinds and tasks go together is the store's reference data: `api.openapi` adds
    # it to the schema.)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                {
                    "not": {
                        "required": ["interval_s", "one_off"],
                        "properties": {"one_off": {"const": True}},
                    }
                },
                # `page_param` names the parameter of pagination `page_param`, and only that.
                {
                    "not": {
                        "required": ["page_param"],
                        "not": {
                            "required": ["pagination"],
                            "properties": {"pagination": {"const": "page_param"}},
                        },
                    }
                },
            ]
        },
    )
    kind: Literal["profile", "website"]
    media: str = Field(..., min_length=1, max_length=100)
    target: str = Field(..., min_length=1, max_length=2000, description="Handle or site URL.")
    url: Given[str, Field(max_length=2000)] = None
    tasks: Given[list[str], Field(max_length=20)] = None
    interval_s: Given[int, Field(ge=1, le=MAX_INTERVAL_S)] = None
    one_off: bool = False
    human_validation: bool = False
    certitude: float = Field(0.5, ge=0, le=1)
    start_at: datetime | SkipJsonSchema[None] = None
    # A website's own discovery bounds over its media's, and how its list pages paginate
    # (`crawlsched jobs add website --depth --max-pages --pagination --page-param`).
    max_depth: Given[int, Field(ge=0, le=MAX_DEPTH, description="Website: links this deep.")] = None
    max_pages: Given[
        int, Field(ge=0, le=MAX_PAGES, description="Website: at most this many pages a run.")
    ] = None
    pagination: Given[Literal["next_link", "page_param"], Field(description="Website.")] = None
    page_param: Given[
        str,
        Field(
            pattern=r"^[A-Za-z0-9_.-]{1,40}$",
            description="Website, with pagination page_param: the page number's parameter.",
        ),
    ] = None


class MetaChanges(BaseModel):
    """Keys to set; a null value removes the key."""

    model_config = ConfigDict(extra="forbid")
    meta: dict[str, Any] = Field(
        ...,
        min_length=1,
        max_length=job_ops.META_MAX_KEYS,
        json_schema_extra={
            "propertyNames": {"pattern": META_KEY},
            # A part of what the route takes (nested documents too): what MongoDB stores.
            "additionalProperties": {
                "anyOf": [
                    {"type": "string"},
                    {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
                    {"type": "number", "minimum": -(2**63), "maximum": 2**63 - 1},
                    {"type": "boolean"},
                    {"type": "null"},
                ]
            },
        },
    )


@router.get("/jobs", summary="How many jobs each collection holds, by state")
def job_counts(caller: Reader) -> dict[str, Any]:
    return jobs.counts(caller.rt)


@router.post("/jobs", status_code=201, summary="Schedule a target's tasks (AddToTaskQueue)")
def add_jobs(
    request: Request, caller: Admin, body: NewTarget, idempotency_key: IdempotencyKey = None
) -> Any:
    return once(
        request,
        caller,
        idempotency_key,
        body.model_dump(mode="json"),
        lambda: jobs.add(caller.rt, **body.model_dump()),
    )


@router.get(
    "/problems",
    response_model=Page,
    summary="Jobs set aside (bad documents, unknown media) or waiting on an operator",
)
def job_problems(caller: Reader, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    return jobs.problems(caller.rt, limit, offset)


@router.post("/problems/retry", summary="Audit the set-aside jobs again at the next sweep")
def retry_problems(caller: Admin) -> dict[str, Any]:
    return jobs.retry_problems(caller.rt)


@router.get(
    "/jobs/{collection}",
    response_model=CountedPage,
    summary="Find jobs (GetTasksStatus, GetActiveTasksV2, GetScheduledTasks, GetCompletedTasks): "
    "the jobs users added first, then the pages runs discovered",
)
def list_jobs(
    caller: Reader,
    collection: Collection,
    limit: Limit = 100,
    offset: Offset = 0,
    state: Annotated[Literal[JOB_STATES] | None, Query()] = None,
    task: Annotated[str | None, Query(max_length=100)] = None,
    target: Annotated[str | None, Query(max_length=2000)] = None,
    ids: Annotated[
        list[Annotated[str, StringConstraints(pattern=JOB_ID)]] | None,
        Query(max_length=1000, description="Encoded job ids."),
    ] = None,
) -> dict[str, Any]:
    return jobs.page(caller.rt, collection, limit, offset, state, task, target, ids)


@router.get(
    "/jobs/{collection}/{job_id}",
    response_model=JobView,
    summary="One job's status and details (GetTaskStatus, GetTaskInfo), with its configured "
    "and current recrawl interval and the evidence behind it",
)
def get_job(caller: Reader, collection: Collection, job_id: JobId) -> JSONResponse:
    # The answer as the command line gets it locally too (the model documents it; validating
    # it would turn a stored 3600 into 3600.0 and reorder its keys).
    return JSONResponse(jobs.get(caller.rt, collection, job_id))


@router.delete("/jobs/{collection}/{job_id}", summary="Remove a job no crawl holds")
def remove_job(caller: Admin, collection: Collection, job_id: JobId) -> dict[str, Any]:
    """A job being crawled is refused (409): its run waits for a report about it."""
    try:
        return jobs.remove(caller.rt, collection, job_id)
    except BadJobInput as e:
        raise ApiProblem(409, str(e)) from None


@router.patch("/jobs/{collection}/{job_id}/meta", summary="Change a job's meta (UpdateMetaByJob)")
def update_meta(
    caller: Admin, collection: Collection, job_id: JobId, body: MetaChanges
) -> dict[str, Any]:
    return plain(job_ops.update_meta(caller.rt, collection, job_id, body.meta))
