"""Files through the API, as streams: a file of jobs to import, a store dump written or
loaded. An upload is for an admin token only, refused before a byte of it is read, and read as
it arrives within CRAWLSCHED_API_MAX_UPLOAD_BYTES (`api/body_guard.py`); a dump is unpacked
within CRAWLSCHED_API_MAX_UNPACKED_BYTES."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from crawlsched.api.auth import Admin
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.api.uploads import JSON_LINES, UPLOAD_BODY, upload_answer
from crawlsched.control import imports, store_files

router = APIRouter(prefix="/v1", tags=["files"], responses=PROBLEM_RESPONSES)

Format = Annotated[
    Literal["jsonl", "csv"], Query(description="JSON lines, or CSV with a header row.")
]


@router.post(
    "/imports",
    summary="Import jobs from a file (JSON lines or CSV): every rejected row with its reason, "
    "then a report, as JSON lines",
    openapi_extra=UPLOAD_BODY,
    responses=JSON_LINES,
    response_class=StreamingResponse,
)
async def import_jobs(
    request: Request,
    caller: Admin,
    format: Format,
    kind: Annotated[Literal["profile", "website"] | None, Query()] = None,
    preserve: Annotated[bool, Query(description="Rows are job documents, kept as they are.")] = (
        False
    ),
) -> StreamingResponse:
    return await upload_answer(
        request, lambda chunks: imports.import_jobs(caller.rt, chunks, format, kind, preserve)
    )


@router.get(
    "/store/dump",
    summary="The whole store in mongodump's layout, as a gzipped tar",
    responses={200: {"content": {"application/gzip": {"schema": {"type": "string"}}}}},
    response_class=StreamingResponse,
)
def dump_store(caller: Admin) -> StreamingResponse:
    return StreamingResponse(store_files.dump(caller.rt), media_type="application/gzip")


@router.post(
    "/store/load",
    summary="Load a dump sent as a gzipped tar (mongodump's layout, or a standalone data "
    "directory's `current`); the server's API tokens are kept",
    openapi_extra=UPLOAD_BODY,
    responses=JSON_LINES,
    response_class=StreamingResponse,
)
async def load_store(
    request: Request,
    caller: Admin,
    drop: Annotated[bool, Query(description="Replace collections that hold documents.")] = False,
) -> StreamingResponse:
    bound = caller.rt.settings.api_max_unpacked_bytes

    def load(chunks):
        return store_files.load(caller.rt, chunks, drop, keep_tokens=True, max_bytes=bound)

    return await upload_answer(request, load)
