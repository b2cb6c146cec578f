"""A crawl of a site in one request (`crawlsched crawl URL…` through a server)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from crawlsched.api.auth import Admin
from crawlsched.api.idempotent import IdempotencyKey, once
from crawlsched.api.openapi import NAMED_WEB_URL
from crawlsched.api.problems import PROBLEM_RESPONSES, problem_doc
from crawlsched.api.senders import senders_of
from crawlsched.control import crawls
from crawlsched.jobs_input import MAX_DEPTH, MAX_PAGES

router = APIRouter(prefix="/v1", tags=["runs"], responses=PROBLEM_RESPONSES)


class NewCrawl(BaseModel):
    """Start URLs and the crawl's bounds: links `depth` deep, at most `max_pages` pages found
    from each start URL; the site only (its media's `follow_offsite`)."""

    model_config = ConfigDict(extra="forbid")
    urls: list[
        Annotated[str, Field(max_length=2000, json_schema_extra={"pattern": NAMED_WEB_URL})]
    ] = Field(..., min_length=1, max_length=crawls.MAX_START_URLS, description="http(s) URLs.")
    depth: int = Field(2, ge=0, le=MAX_DEPTH)
    max_pages: int = Field(100, ge=0, le=MAX_PAGES)
    media: str = Field(
        "web",
        min_length=1,
        max_length=100,
        description="The media whose driver crawls them (of the reference data).",
        json_schema_extra={"enum": ["web"]},
    )


@router.post(
    "/crawls",
    status_code=202,
    summary="Crawl start URLs now: one-off jobs with the crawl's bounds, a schedule of those "
    "targets (kept stopped), and a run of it started now",
    responses={503: problem_doc(503)},
)
def start_crawl(
    request: Request, caller: Admin, body: NewCrawl, idempotency_key: IdempotencyKey = None
) -> Any:
    senders = senders_of(request)
    return once(
        request,
        caller,
        idempotency_key,
        body.model_dump(),
        lambda: crawls.start(caller.rt, senders, **body.model_dump()),
        status=202,
    )
