"""Reserving a request's start on a host the process holds, and keeping to it.

Part of `pacer.ClusterHostPacer` (its lock guards every field used here): a thread reserves
the next start (one delay after the one before, at most `concurrency` in flight, within the
slice and today's budget), sleeps until it, and sends only if it woke on time.

A thread that wakes more than `LATE_START_GRACE` after its planned start does not send: a
start that late would come less than a delay before the next one planned. It sends anyway when
its place is the last reserved on the host and still within the slice (nobody follows to be
crowded), and the next start then counts from when it woke.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from crawlsched import metrics
from crawlsched.environment import Condition
from crawlsched.politeness.held_hosts import HostNotReady, HostSlot
from crawlsched.politeness.slices import HostSlices
from crawlsched.resources import host_rules
from crawlsched.resources.host_rules import HostPolicy
from crawlsched.resources.host_slices import SliceState, busy

POLL_S = 0.5  # how often a thread waiting for a busy host looks again
# A thread that wakes later than this after its planned start does not send: the most two
# starts on a host may come closer than its delay (a wake-up's jitter).
LATE_START_GRACE = timedelta(milliseconds=10)


class Reservations:
    def __init__(
        self,
        slices: HostSlices,
        changed: Condition,
        clock: Callable[[], datetime],
        slice_s: float,
        sleep: Callable[[float], None],
        on_released: Callable[[str], None],
    ) -> None:
        self._slices, self._changed, self._clock = slices, changed, clock
        self._slice_s, self._sleep, self._on_released = slice_s, sleep, on_released

    def started_on_time(
        self,
        key: str,
        host: HostSlot,
        policy: HostPolicy,
        patience: timedelta,
        lock: AbstractContextManager[Any],
    ) -> bool:
        """Reserve a start and sleep until it. False (the place given up) when the thread woke
        past the grace and its place was not the last, or when the host was given back while
        it slept (a 429 another thread saw, a slice handed on): the next holder's first start
        may come before this one."""
        with lock:
            start = self._reserve(key, host, policy, self._clock() + patience)
        if (wait := (start - self._clock()).total_seconds()) > 0:
            metrics.host_pacing_waited(wait)
            self._sleep(wait)
        with lock:
            late = self._clock()
            delay = timedelta(seconds=(host.policy or policy).delay_s)
            handed_on = host.state is not SliceState.HELD
            last = host_rules.may_start_late(start, late, host.next_start, host.lease_until, delay)
            if handed_on or (delay and late - start > LATE_START_GRACE and not last):
                host.active -= 1
                self._changed.notify_all()
                return False
            # Late within the grace, or holding the last place: the next start counts from
            # now, so it never follows this one too soon.
            if late > start and host.next_start is not None:
                host.next_start = max(host.next_start, late + delay)
        return True

    def _reserve(
        self, key: str, host: HostSlot, policy: HostPolicy, patience: datetime
    ) -> datetime:
        asked = False  # a refusal this thread did not ask for is asked again, once
        while True:
            now = self._clock()
            if busy(host.state):
                self._changed.wait(POLL_S)
                continue
            if host.state is SliceState.HELD and not self._slice_goes_on(key, host, policy, now):
                continue
            if host.state is not SliceState.HELD:
                refusal = host.refusal
                if asked and refusal is not None and refusal.until > now:
                    if refusal.until > patience:
                        held = refusal.held_elsewhere
                        raise HostNotReady(
                            key, refusal.until, refusal.why, on_release=held, held_elsewhere=held
                        )
                    # Ask the store again when the block or the holder's slice ends, not
                    # before: a refused process polling it costs a command each time (the
                    # condition is the process's: other hosts' changes wake this thread too).
                    self._changed.wait(max(0.01, (refusal.until - now).total_seconds()))
                    continue
                self._slices.ask(key, host, policy)
                asked = True
                continue
            if (start := self._place(key, host, policy, patience)) is not None:
                return start

    def _slice_goes_on(self, key: str, host: HostSlot, policy: HostPolicy, now: datetime) -> bool:
        """False when the slice ended here (given back; `HostNotReady` when another process
        asked for it: this thread waits like any other); renews it halfway through."""
        assert host.lease_until is not None
        delay = (host.policy or policy).delay_s
        if now >= host_rules.last_start(host.lease_until, delay):
            if host.renewing:
                self._changed.wait(POLL_S)
                return False
            wanted = not host.renewable
            self._release(key, host)
            if wanted:
                why = "handed over: another process asked for the host"
                raise HostNotReady(key, now, why, on_release=True)
            return False
        half = host.lease_until - timedelta(seconds=self._slice_s / 2)
        if host.renewable and not host.renewing and now >= half:
            self._slices.renew(key, host, policy)
            return False  # (looked at again: the renewal took a round trip)
        return True

    def _place(
        self, key: str, host: HostSlot, policy: HostPolicy, patience: datetime
    ) -> datetime | None:
        """The next start on a held host, reserved; None when the caller must look again."""
        assert host.lease_until is not None
        effective = host.policy or policy
        if host.active >= effective.concurrency:
            self._changed.wait(POLL_S)
            return None
        # Read after the hold: a grant is a store round trip, and a start planned at the
        # moment before it would be past already, so a thread would give up its place as late.
        now = self._clock()
        start = max(now, host.next_start) if host.next_start else now
        if not host_rules.may_start(host.pages_left, host.pages):
            # The slice's share of today's budget is used: give the host back (its pages
            # counted) and ask anew, refused until the next day unless it began.
            self._release(key, host)
            return None
        if start > patience:
            raise HostNotReady(key, start, f"paced: {effective.delay_s:g} s between pages")
        if start > host_rules.last_start(host.lease_until, effective.delay_s):
            # This slice ends before our turn: give it back and hold the host anew (at once,
            # unless another process asked for it meanwhile).
            self._release(key, host)
            return None
        host.active += 1
        host.pages += 1
        host.next_start = start + timedelta(seconds=effective.delay_s)
        return start

    def _release(self, key: str, host: HostSlot) -> None:
        while host.renewing:
            self._changed.wait(POLL_S)
        if host.state is SliceState.HELD and self._slices.release(key, host):
            self._on_released(key)
