"""Files a caller sends (`jobs import`, `store load`): read as they arrive into a spooled file
(in memory up to a megabyte, on disk past it), counted against CRAWLSCHED_API_MAX_UPLOAD_BYTES
by the body guard, which refused the request before a byte of it was read unless the token is
an admin's. Only a whole upload is worked on (one over the limit changes nothing), in a worker
thread, from the spooled file; the answer lines are spooled the same way and sent back as JSON
lines once the work is done."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any

from fastapi import Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from crawlsched.api.body_guard import BodyTooLarge
from crawlsched.api.problems import ApiProblem

SPOOLED_IN_MEMORY = 1024 * 1024
CHUNK = 64 * 1024
# The OpenAPI description of an upload's body and of its answer.
UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}
JSON_LINES = {200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}}}}


def _spool() -> IO[bytes]:
    return tempfile.SpooledTemporaryFile(max_size=SPOOLED_IN_MEMORY)


async def _received(request: Request) -> IO[bytes]:
    """The whole body in a spooled file (413 as soon as it passes the limit)."""
    upload = _spool()
    try:
        async for chunk in request.stream():
            upload.write(chunk)
    except BodyTooLarge as e:
        upload.close()
        raise ApiProblem(413, str(e)) from None
    upload.seek(0)
    return upload


def _chunks(upload: IO[bytes]) -> Iterator[bytes]:
    while chunk := upload.read(CHUNK):
        yield chunk


def _answered(lines: Iterator[dict[str, Any]]) -> IO[bytes]:
    answer = _spool()
    for line in lines:
        answer.write(json.dumps(line, default=str).encode() + b"\n")
    answer.seek(0)
    return answer


def _sent(answer: IO[bytes]) -> Iterator[bytes]:
    with answer:
        yield from _chunks(answer)


async def upload_answer(
    request: Request, work: Callable[[Iterator[bytes]], Iterator[dict[str, Any]]]
) -> StreamingResponse:
    """Run `work` on the whole upload's chunks in a worker thread; its answer lines."""
    upload = await _received(request)

    def run() -> IO[bytes]:
        with upload:
            return _answered(work(_chunks(upload)))

    answer = await run_in_threadpool(run)
    return StreamingResponse(_sent(answer), media_type="application/x-ndjson")
