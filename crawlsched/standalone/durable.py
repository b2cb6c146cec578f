"""Answer a write only once it is on disk.

The standalone server keeps its store in memory and writes it to its data directory every
`snapshot_interval_s`; a `kill -9` loses what came after the last snapshot. A request that
changed something and was answered must not be among that: `crawlsched run now` said "sent:
run …" and the run could vanish with the snapshot interval. So a request that may write (any
method but GET, HEAD and OPTIONS) and succeeded is answered only after a snapshot taken once its
handler returned: the snapshot holds what it wrote, and the store's own ids (the run's, the
job's) are then durable. A snapshot encodes only what changed since the last one.
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


class SnapshotBeforeAnswer:
    """ASGI middleware: a successful write is answered after `snapshot()` returned."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], snapshot: Any):
        self.app = app
        self.snapshot = snapshot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in READS:
            await self.app(scope, receive, send)
            return

        async def answer(message: Message) -> None:
            # The whole answer is computed when it starts (an upload's answer lines are
            # spooled before they are sent): what the request wrote is in the store now.
            if message["type"] == "http.response.start" and message["status"] < 400:
                await anyio.to_thread.run_sync(self.snapshot)
            await send(message)

        await self.app(scope, receive, answer)
