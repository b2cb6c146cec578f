"""Files a caller sends, read as they arrive: a route that takes an upload (`jobs import`,
`store load`) runs in a worker thread and reads the body chunk by chunk from the event loop
(never whole: the body guard counts it against CRAWLSCHED_API_MAX_UPLOAD_BYTES, after checking
the caller may send it at all). Its answer lines are spooled (to disk past a megabyte) and sent
back as JSON lines once the work is done."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any

import anyio.from_thread
from fastapi import Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from crawlsched.api.body_guard import BodyTooLarge
from crawlsched.api.problems import ApiProblem

SPOOLED_IN_MEMORY = 1024 * 1024
READ_BACK = 64 * 1024
# The OpenAPI description of an upload's body and of its answer.
UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}
JSON_LINES = {200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}}}}


def body_chunks(request: Request) -> Iterator[bytes]:
    """The request's body as it arrives, from a worker thread (413 past the limit)."""
    stream = request.stream().__aiter__()
    while True:
        try:
            chunk = anyio.from_thread.run(stream.__anext__)
        except StopAsyncIteration:
            return
        except BodyTooLarge as e:
            raise ApiProblem(413, str(e)) from None
        if chunk:
            yield chunk


def _spooled(lines: Iterator[dict[str, Any]]) -> IO[bytes]:
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOLED_IN_MEMORY)  # noqa: SIM115
    for line in lines:
        spool.write(json.dumps(line, default=str).encode() + b"\n")
    spool.seek(0)
    return spool


def _read_back(spool: IO[bytes]) -> Iterator[bytes]:
    with spool:
        while chunk := spool.read(READ_BACK):
            yield chunk


async def upload_answer(
    request: Request, work: Callable[[Iterator[bytes]], Iterator[dict[str, Any]]]
) -> StreamingResponse:
    """Run `work` on the body's chunks in a worker thread; its answer lines, as JSON lines."""

    def run() -> IO[bytes]:
        return _spooled(work(body_chunks(request)))

    spool = await run_in_threadpool(run)
    return StreamingResponse(_read_back(spool), media_type="application/x-ndjson")
