"""What a command asks for, whether a server answers or the store itself: one small protocol
with two implementations, chosen once per command at the edge (`crawlsched.cli.connect`).

- `RemoteBackend` (`cli/remote.py`) calls the API's typed routes over HTTP;
- `LocalBackend` (`cli/local.py`) calls the same functions the routes call
  (`crawlsched.control`) on a runtime of its own.

Both answer with the same plain data (the API's JSON), so a command renders it the same way
wherever it came from. An operation is named once (`cli/ops.py`): its route, and the function
that answers it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Op:
    """One operation: `method` and `path` of its route (path parameters in braces are taken
    from the call's arguments; the rest go in the query of a GET or DELETE, in the JSON body
    otherwise), and `answer`, the `crawlsched.control` function (`module:function`) that
    answers it from a runtime. `sends`: it sends messages to workers (the answering function
    takes `senders`). `store`: it reads or changes the store."""

    method: str
    path: str
    answer: str
    sends: bool = False
    store: bool = True

    @property
    def changes(self) -> bool:
        return self.method not in ("GET", "HEAD")


class CommandFailed(Exception):
    """A command that cannot go on: one line on stderr, and its exit code (README)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class Backend(Protocol):
    where: str  # the store or the server, for messages ("the API at http://…")

    def call(self, op: Op, **args: Any) -> Any:
        """One answer: a document, or a page (`items`, `next_offset`, maybe `total`)."""

    def items(self, op: Op, limit: int, **args: Any) -> list[dict[str, Any]]:
        """Up to `limit` items of a paged operation, from `offset` (default 0) on."""

    def upload(self, op: Op, chunks: Iterable[bytes], **args: Any) -> Iterator[dict[str, Any]]:
        """Send a file's bytes; the answer's JSON lines, as they come."""

    def download(self, op: Op, **args: Any) -> Iterator[bytes]:
        """A file's bytes, as they come."""
