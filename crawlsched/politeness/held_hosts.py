"""What a worker process keeps per host while it paces it (`pacer.ClusterHostPacer`), and
how a thread is told a host will not be ready in time (`HostNotReady`)."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime

from crawlsched.resources.host_rules import HostPolicy
from crawlsched.resources.host_slices import SliceState


class HostNotReady(Exception):
    """The host will not take a request within the thread's patience: come back `until`."""

    def __init__(
        self,
        key: str,
        until: datetime,
        why: str,
        on_release: bool = False,
        held_elsewhere: bool = False,
        answered: bool = False,
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
        # True: the host answered this very request 429 or 503 (the page was sent and refused;
        # `CRAWLSCHED_HOST_REFUSALS_PER_PAGE` of those in a run give the page up).
        self.answered = answered


@dataclass
class Refusal:
    until: datetime  # ask again then (or when the holder gives it back: `held_elsewhere`)
    why: str
    held_elsewhere: bool


@dataclass
class HostSlot:
    """What one process knows of one host. Every field is guarded by the pacer's one lock
    (`ClusterHostPacer._lock`); a thread changes `state` away from `ASKING` or `RELEASING`
    only if it is the one that set it."""

    state: SliceState = SliceState.FREE
    lease_until: datetime | None = None  # the slice held (state HELD)
    renewable: bool = True  # False once a renewal was refused: the slice runs out
    renewing: bool = False  # a thread is renewing the slice (others go on sending within it)
    policy: HostPolicy | None = None  # the limits in force, learnt with the grant
    refusal: Refusal | None = None  # the last refusal (state REFUSED)
    users: int = 0  # threads using or waiting for the host
    active: int = 0  # requests in flight
    next_start: datetime | None = None  # the next request starts no earlier
    pages: int = 0  # started since the store last counted them
    pages_left: int | None = None  # today's budget at the grant or renewal (None: no cap)
    blocked_before: bool = False  # a block was seen: a good answer clears the backoff
    answered_at: datetime | None = None  # when the last request's answer came in
    expected: int = 0  # jobs of this process that will still ask for the host


def slice_for(slice_s: float, delay_s: float) -> float:
    """A slice always fits a few requests, however long the host's delay."""
    return max(slice_s, 3 * delay_s)


def holder_name() -> str:
    """Who holds a host: the machine and process, unique per pacer."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
