"""Answer a write only once it is on disk.

The standalone server keeps its store in memory. Every write is appended to its journal as
it is applied (`journal.py`): in the OS's hands at once, so a `kill -9` loses none of it, but
on disk only once the journal is flushed, every `journal_fsync_ms`. A request that changed
something and was answered must not be lost even to a power loss: `crawlsched run now` said
"sent: run …", and the run must be there after any crash. So a request that may write (any
method but GET, HEAD and OPTIONS) and succeeded is answered only after `sync()` returned once
its handler did: the journal's flush, which covers every record appended before it began,
this request's writes among them, and the store's own ids (the run's, the job's) are then
durable.

Before the journal, the answer waited for a whole snapshot (every changed collection encoded
and written to new files, each fsynced, the folder switched). A journal flush is one
fdatasync of one file, shared by the requests that wait at the same moment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread

READS = frozenset({"GET", "HEAD", "OPTIONS"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class DurableBeforeAnswer:
    """ASGI middleware: a successful write is answered after `sync()` returned."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], sync: Any):
        self.app = app
        self.sync = sync

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in READS:
            await self.app(scope, receive, send)
            return

        async def answer(message: Message) -> None:
            # The whole answer is computed when it starts (an upload's answer lines are
            # spooled before they are sent): what the request wrote is in the journal now.
            if message["type"] == "http.response.start" and message["status"] < 400:
                await anyio.to_thread.run_sync(self.sync)
            await send(message)

        await self.app(scope, receive, answer)
