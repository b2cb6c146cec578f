"""HostSlices: the store's side of a process's host slices — ask for one, renew it, give it
back (`store/hosts.py` writes each in one conditional command).

Called by the pacer with its one lock held. Each call lets the lock go for the store's round
trip, with the host's slot marked (`ASKING`, `RELEASING`, or `renewing`) so that no other
thread of the process calls the store for the same host meanwhile: they wait for the answer
on the pacer's condition, or, while a renewal is in flight, go on sending within the slice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any

from crawlsched.environment import Condition
from crawlsched.politeness.held_hosts import HostSlot, Refusal, slice_for
from crawlsched.resources.host_rules import Granted, HostPolicy
from crawlsched.resources.host_slices import SliceEvent, SliceState, next_slice_state
from crawlsched.store.hosts import MongoHostStore


class HostSlices:
    def __init__(
        self,
        store: MongoHostStore,
        holder: str,
        slice_s: float,
        lock: AbstractContextManager[Any],
        changed: Condition,
        clock: Callable[[], datetime],
    ) -> None:
        self.store, self.holder, self.slice_s = store, holder, slice_s
        self._lock, self._changed, self._clock = lock, changed, clock

    @contextmanager
    def _unlocked(self) -> Iterator[None]:
        self._lock.release()  # type: ignore[attr-defined]
        try:
            yield
        finally:
            self._lock.acquire()  # type: ignore[attr-defined]

    def _move(self, slot: HostSlot, event: SliceEvent) -> None:
        slot.state = next_slice_state(slot.state, event)
        self._changed.notify_all()

    def ask(self, key: str, slot: HostSlot, policy: HostPolicy) -> None:
        """Ask the store for a slice: HELD, or REFUSED with until when and why."""
        self._move(slot, SliceEvent.ASK)
        now = self._clock()
        # Refused for a holder whose slice has not ended: most likely refused again, asked so.
        refusal = slot.refusal
        held = refusal is not None and refusal.held_elsewhere and refusal.until > now
        try:
            with self._unlocked():
                decision, effective = self.store.acquire(
                    key, self.holder, policy, now, self.slice_s, held_elsewhere=held
                )
        except BaseException:
            self._move(slot, SliceEvent.CALL_FAILED)
            raise
        if isinstance(decision, Granted):
            slot.lease_until, slot.policy, slot.renewable = decision.lease_until, effective, True
            slot.refusal, slot.pages_left = None, decision.pages_left
            # The store's next start stands unless this process planned a later one: a
            # process granted a host again never starts before another's later slice allows.
            if slot.next_start is None or decision.first_start > slot.next_start:
                slot.next_start = decision.first_start
            self._move(slot, SliceEvent.GRANTED)
        else:
            slot.refusal = Refusal(decision.until, decision.why, decision.held)
            self._move(slot, SliceEvent.REFUSED)

    def renew(self, key: str, slot: HostSlot, policy: HostPolicy) -> None:
        """Another slice, counting the pages sent since the last count; refused when another
        process asked for the host (the slice then runs out). Other threads go on sending
        within the slice meanwhile."""
        delay = (slot.policy or policy).delay_s
        sent, next_start, active = slot.pages, slot.next_start, slot.active
        slot.renewing = True
        try:
            with self._unlocked():
                renewed = self.store.renew(
                    key, self.holder, self._clock(), slice_for(self.slice_s, delay), sent,
                    next_start, in_flight=active, policy=policy,
                )  # fmt: skip
        finally:
            slot.renewing = False
            self._changed.notify_all()
        if renewed is None:
            slot.renewable = False
        elif slot.state is SliceState.HELD:
            slot.lease_until, slot.pages_left = renewed.lease_until, renewed.pages_left
            slot.pages -= sent  # counted by the renewal; those started meanwhile are not

    def release(self, key: str, slot: HostSlot) -> bool:
        """Give the slice back: the next holder starts no earlier than this process's next
        start would have been, nor than a delay after the last answer came in (a request
        can leave later than planned, but it reached the host before its answer came back).
        True when another process had asked for the host."""
        next_start = slot.next_start
        if slot.answered_at is not None and slot.policy is not None:
            after_answer = slot.answered_at + timedelta(seconds=slot.policy.delay_s)
            next_start = max(next_start, after_answer) if next_start else after_answer
        sent = slot.pages
        self._move(slot, SliceEvent.GIVE_BACK)
        try:
            with self._unlocked():
                wanted = self.store.release(key, self.holder, next_start, sent, self._clock())
        finally:
            slot.lease_until, slot.renewable = None, True
            slot.pages -= sent
            self._move(slot, SliceEvent.RELEASED)
        return wanted
