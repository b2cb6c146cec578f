"""What a worker process keeps per host while it paces it (`pacer.ClusterHostPacer`),
and how a thread is told a host will not be ready in time (`HostNotReady`)."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from crawlsched.resources.host_rules import HostPolicy


class HostNotReady(Exception):
    """The host will not take a request within the thread's patience: come back `until`."""

    def __init__(
        self,
        key: str,
        until: datetime,
        why: str,
        on_release: bool = False,
        held_elsewhere: bool = False,
    ) -> None:
        when = "until another process gives it back" if on_release else f"until {until:%H:%M:%S}"
        super().__init__(f"{key} not ready {when}: {why}")
        self.key = key
        self.until = until
        self.why = why
        # True: wait for the holder's release (it wakes the waiting batch), not for a time.
        self.on_release = on_release
        # True: this process asked and another holds the host (False for one this process
        # just handed over: asking again at once would take it back from whoever asked).
        self.held_elsewhere = held_elsewhere


@dataclass
class HeldHost:
    """What one process knows of one host: its slice, its threads, its pacing."""

    condition: threading.Condition = field(default_factory=threading.Condition)
    users: int = 0  # threads using or waiting for the host (guarded by the pacer's lock)
    active: int = 0  # requests in flight
    next_start: datetime | None = None
    lease_until: datetime | None = None
    renewable: bool = True  # False once a renewal was refused: the slice runs out
    policy: HostPolicy | None = None
    refused: tuple[datetime, str, bool] | None = None  # until, why, held by another
    pages: int = 0  # sent since the store last counted them
    pages_left: int | None = None  # today's budget left at the grant or renewal (None: no cap)
    blocked_before: bool = False  # a block was seen: a good answer clears the backoff
    answered_at: datetime | None = None  # when the last request's answer was in


def slice_for(slice_s: float, delay_s: float) -> float:
    """A slice always fits a few requests, however long the host's delay."""
    return max(slice_s, 3 * delay_s)


def holder_name() -> str:
    """Who holds a host: the machine and process, unique per pacer."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
