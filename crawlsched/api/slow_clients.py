"""Slow clients cannot hold the API: uvicorn's HTTP/1.1 protocol with read time limits and a
cap on connections per client address.

uvicorn bounds how long an idle connection stays open between requests (its keep-alive
timeout) but not how long a request may take to arrive: a client that sends its headers, or
its body, a byte at a time holds its connection for as long as it likes (a slowloris), and
300 of them hold 300 sockets. An ASGI middleware cannot help, as the application is called
only once the headers are in. So the protocol itself keeps one clock per connection, set by
what the connection waits for:
- the request's headers: whole within `header_timeout_s` of the connection opening (or of
  the previous answer, on a kept-alive connection);
- its body: whole within `body_timeout_s` of its headers;
- nothing while the application answers.
A request late on either is answered 408 (when no answer began) and the connection closed.

A client address holds at most `max_per_client` connections; one more is answered 503 and
closed at once. Each connection is a few KB and a file descriptor: without the cap, one
client could take them all, and every other client would wait behind it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from crawlsched.api.client_slots import ClientSlots

HEADERS, BODY = "headers", "body"


@dataclass(frozen=True)
class SlowClientLimits:
    header_timeout_s: float
    body_timeout_s: float
    max_per_client: int


def plain_response(status: int, reason: str, text: str, extra: str = "") -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, for a client the application
    never saw (written to the socket, not through h11)."""
    body = text.encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n"
    ).encode() + body


def guarded_protocol(limits: SlowClientLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with these limits (`uvicorn.Config(http=...)`); its slots are
    shared by every connection of the server that uses the class."""
    slots = ClientSlots(limits.max_per_client)

    class GuardedH11Protocol(H11Protocol):
        _address: str | None = None
        _phase: str | None = None
        _timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            address = self.client[0] if self.client else None
            if address is not None and not slots.take(address):
                refusal = f"at most {limits.max_per_client} connections per client address"
                transport.write(
                    plain_response(503, "Service Unavailable", refusal, "retry-after: 5\r\n")
                )
                transport.close()
                return
            self._address = address
            self._watch()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_clock()
            if self._address is not None:
                slots.give_back(self._address)
                self._address = None
            super().connection_lost(exc)

        def _waiting_for(self) -> str | None:
            cycle = self.cycle
            if cycle is None or cycle.response_complete:
                return HEADERS  # a new connection, or one between requests
            if cycle.more_body and not cycle.disconnected:
                return BODY
            return None  # the application has the whole request

        def _watch(self) -> None:
            """Start the clock of what the connection waits for now (a clock already
            running for the same thing keeps running: trickling bytes do not reset it)."""
            if self.transport is None or self.transport.is_closing():
                return
            phase = self._waiting_for()
            if phase == self._phase:
                return
            self._stop_clock()
            self._phase = phase
            if phase is not None:
                limit = limits.header_timeout_s if phase == HEADERS else limits.body_timeout_s
                self._timer = self.loop.call_later(limit, self._late, phase)

        def _stop_clock(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._phase = None

        def _late(self, phase: str) -> None:
            self._timer = None
            if self.transport.is_closing():
                return
            # A body that stopped coming is answered only if its answer has not begun.
            if phase == HEADERS or not self.cycle.response_started:
                limit = limits.header_timeout_s if phase == HEADERS else limits.body_timeout_s
                text = f"the request's {phase} did not arrive within {limit:g} s"
                self.transport.write(plain_response(408, "Request Timeout", text))
            self.transport.close()

    return GuardedH11Protocol
