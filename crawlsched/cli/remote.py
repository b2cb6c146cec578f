"""`RemoteBackend`: the command line through the API of a running server (a standalone found
in the data directory, or CRAWLSCHED_API_URL with CRAWLSCHED_API_TOKEN). Each operation is one
typed route (`cli/ops.py`); the answer comes back as the API's JSON and is rendered here, on
the caller's terminal. Files travel as streams: an upload is sent in chunks, a download read
in chunks, neither held whole."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import httpx

from crawlsched.cli.backend import CommandFailed, Op

# The API's largest page.
PAGE_LIMIT = 1000
TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=600.0, pool=10.0)
# Problems that are the caller's to fix (exit 2); anything else failed (exit 1).
BAD_INPUT = frozenset({400, 404, 409, 413, 422})
# Where a request's field was (the start of a 422's detail).
WHERE = ("body.", "query.", "path.")


class RemoteBackend:
    def __init__(self, url: str, token: str, source: str) -> None:
        self.url = url.rstrip("/")
        self.source = source  # where the address came from, for messages
        self.where = f"the API at {self.url}"
        # No token: no header (an empty one is no valid header value, and the server's 401
        # says what is missing); a token pasted with a line break around it still works.
        self.token = token.strip()
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT)

    # -- the protocol ----------------------------------------------------------------------

    def call(self, op: Op, **args: Any) -> Any:
        response = self._send(op, args)
        return response.json()

    def items(self, op: Op, limit: int, **args: Any) -> list[dict[str, Any]]:
        offset = args.pop("offset", 0)
        found: list[dict[str, Any]] = []
        while len(found) < limit:
            page = self.call(op, **args, limit=min(limit - len(found), PAGE_LIMIT), offset=offset)
            found += page["items"]
            if page.get("next_offset") is None:
                break
            offset = page["next_offset"]
        return found

    def upload(self, op: Op, chunks: Iterable[bytes], **args: Any) -> Iterator[dict[str, Any]]:
        request = self._request(op, args, content=iter(chunks))
        with self._streamed(request) as response:
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)

    def download(self, op: Op, **args: Any) -> Iterator[bytes]:
        with self._streamed(self._request(op, args)) as response:
            yield from response.iter_bytes()

    # -- HTTP ------------------------------------------------------------------------------

    def _request(self, op: Op, args: dict[str, Any], content: Any = None) -> httpx.Request:
        path, rest = fill_path(op.path, args)
        given = {k: v for k, v in rest.items() if v is not None}
        if content is not None or op.method in ("GET", "DELETE"):
            params = {k: _query_value(v) for k, v in given.items()}
            headers = {"Content-Type": "application/octet-stream"} if content is not None else {}
            return self.http.build_request(
                op.method, path, params=params, content=content, headers=headers
            )
        return self.http.build_request(op.method, path, json=given)

    def _send(self, op: Op, args: dict[str, Any]) -> httpx.Response:
        request = self._request(op, args)
        try:
            response = self.http.send(request)
        except httpx.LocalProtocolError:
            raise self._bad_token() from None
        except httpx.HTTPError as e:
            raise self._unreachable(e) from None
        if response.status_code >= 400:
            raise self._problem(response)
        return response

    @contextmanager
    def _streamed(self, request: httpx.Request) -> Iterator[httpx.Response]:
        try:
            response = self.http.send(request, stream=True)
        except httpx.LocalProtocolError:
            raise self._bad_token() from None
        except httpx.HTTPError as e:
            raise self._unreachable(e) from None
        try:
            if response.status_code >= 400:
                response.read()
                raise self._problem(response)
            yield response
        finally:
            response.close()

    def _problem(self, response: httpx.Response) -> CommandFailed:
        try:
            detail = str(response.json().get("detail") or response.text[:200])
        except ValueError:
            detail = response.text[:200] or response.reason_phrase
        status = response.status_code
        if status == 422:  # `body.interval_s: …` names the field as the command line does
            detail = detail.split(".", 1)[1] if detail.startswith(WHERE) else detail
        if status in BAD_INPUT:
            return CommandFailed(detail, 2)
        if status == 401 and not self.token:
            detail = f"{detail}: set CRAWLSCHED_API_TOKEN"
        return CommandFailed(f"{detail} ({self.where} answered {status})", 1)

    def _bad_token(self) -> CommandFailed:
        # The request could not even be written: with a usable address, the token is what
        # h11 refused (its message would print the token: it is not repeated here).
        return CommandFailed(
            f"no request could be sent to {self.url} ({self.source}): the API token is not a "
            "valid header value (one line of printable characters)",
            2,
        )

    def _unreachable(self, error: httpx.HTTPError) -> CommandFailed:
        return CommandFailed(
            f"the crawlsched API at {self.url} (from {self.source}) cannot be reached: "
            f"{type(error).__name__}; is the server running?",
            1,
        )


def fill_path(template: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The path with its `{name}` parameters filled (each escaped whole, slashes included),
    and the arguments left over."""
    rest = dict(args)
    path = template
    while "{" in path:
        start = path.index("{")
        end = path.index("}", start)
        name = path[start + 1 : end]
        path = path[:start] + quote(str(rest.pop(name)), safe="@:") + path[end + 1 :]
    return path, rest


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return [_query_value(v) for v in value]
    return value
