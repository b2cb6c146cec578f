"""ClusterHostPacer: the pacing `PoliteHttp` asks for before every request, held for the
whole cluster through the host's lease in the store (`store/hosts.py`).

One per worker process, shared by its threads. To send to a host the process first holds the
host (a time slice, `host_rules.decide`; its states in `resources/host_slices.py`); while it
holds it, its threads pace their requests locally (the delay between starts, the cap on
requests at once) with no store round trip, and nobody else sends to the host. The slice is
renewed halfway through while the process still sends to the host and nobody else asked for
it; otherwise it is given back with the moment the next request may start, so whoever holds
the host next keeps the delay. A slice starts no more of today's pages than the grant left.

A thread never sleeps long for a host: when the host will not be ready within `max_sleep_s`
(blocked after a 429, its daily budget used, a long delay, or held by another process),
`HostNotReady` says until when, and the crawl gives those jobs back to wait while the thread
takes other work. A holder another process asked for does not renew its slice and yields the
host at its end; `give_back` names the hosts released that someone had asked for, to wake the
batches waiting for them.

A host is given back as soon as no job of the process will ask for it (`expect`, `settle`),
unless a batch first brings more of its queued pages over (`worth_keeping`).

Threads: every field of every `HostSlot` and of this object is guarded by `_lock` (one lock
for the process's hosts), waited on through `_changed`; store round trips happen with the lock
released (`slices.HostSlices`).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta

from crawlsched import metrics
from crawlsched.drivers.targets import resolve as resolve_addresses
from crawlsched.environment import SYSTEM, Environment
from crawlsched.logs import get_logger
from crawlsched.politeness.held_hosts import HostNotReady, HostSlot, holder_name
from crawlsched.politeness.reservations import LATE_START_GRACE, Reservations
from crawlsched.politeness.slices import HostSlices
from crawlsched.resources import host_rules
from crawlsched.resources.host_grouping import (
    GROUPINGS,
    Grouping,
    Resolve,
    first_address,
    pacing_key,
)
from crawlsched.resources.host_rules import BLOCKING_STATUSES, HostPolicy
from crawlsched.resources.host_slices import SliceState
from crawlsched.store.hosts import MongoHostStore

log = get_logger(__name__)

__all__ = ["LATE_START_GRACE", "ClusterHostPacer", "HostNotReady"]

MAX_HOSTS_KNOWN = 10_000  # hosts remembered; idle ones are forgotten past this


class ClusterHostPacer:
    def __init__(
        self,
        store: MongoHostStore,
        default: HostPolicy,
        *,
        slice_s: float,
        max_sleep_s: float,
        clock: Callable[[], datetime] | None = None,
        sleep: Callable[[float], None] | None = None,
        holder: str | None = None,
        rng: random.Random | None = None,
        on_blocked: Callable[[str, datetime, str], None] | None = None,
        grouping: Grouping = "origin",
        resolve: Resolve | None = None,
        env: Environment = SYSTEM,
    ) -> None:
        if grouping not in GROUPINGS:
            raise ValueError(f"grouping must be one of {', '.join(GROUPINGS)}, got {grouping!r}")
        if slice_s <= 0:
            raise ValueError(f"slice_s must be > 0, got {slice_s}")
        self.store, self.default = store, default
        self.slice_s, self.max_sleep_s = slice_s, max_sleep_s
        self.holder = holder or holder_name()
        self._clock = clock or env.now
        self._sleep = sleep or env.sleep
        self._rng = rng or random.Random()
        # Told (host, until, reason) when a 429 or 503 begins a block (not when it extends one).
        self._on_blocked = on_blocked
        self.grouping = grouping
        self._resolve = resolve or first_address(resolve_addresses)
        self._lock = env.lock()
        self._changed = env.condition(self._lock)
        self._hosts: dict[str, HostSlot] = {}  # guarded by _lock
        self._released: set[str] = set()  # given back, someone had asked (guarded by _lock)
        self._slices = HostSlices(
            store, self.holder, slice_s, self._lock, self._changed, self._clock
        )
        self._plan = Reservations(
            self._slices, self._changed, self._clock, slice_s, self._sleep, self._released.add
        )

    def key_of(self, url: str) -> str:
        """The key `url`'s requests are paced under (`host_grouping`); ValueError for a URL
        that is not absolute, OSError for a name that does not resolve (grouping by address)."""
        return pacing_key(url, self.grouping, self._resolve)

    # -- what PoliteHttp uses ----------------------------------------------------------------

    @contextlib.contextmanager
    def slot(self, key: str, policy: HostPolicy | None = None) -> Iterator[None]:
        """Hold one request's place on the host: returns at its start time (raises
        `HostNotReady` rather than wait past `max_sleep_s`)."""
        host = self._enter(key)
        try:
            policy = policy or self.default
            patience = timedelta(seconds=self.max_sleep_s)
            while not self._plan.started_on_time(key, host, policy, patience, self._lock):
                pass  # woke too late for its place, or the host was handed on: ask anew
            try:
                yield
            finally:
                with self._lock:
                    host.active -= 1
                    host.answered_at = self._clock()
                    self._changed.notify_all()
        finally:
            with self._lock:
                host.users -= 1

    def observe(self, key: str, status: int, retry_after: str | None) -> None:
        """A response from the host: a 429 or 503 blocks it for everyone (its Retry-After,
        else a backoff) and raises `HostNotReady`, so the page is asked again once the block
        is over (the host said "not now", not "no"); the first good answer after a block
        resets the backoff."""
        host = self._enter(key)
        try:
            now = self._clock()
            if status in BLOCKING_STATUSES:
                self._blocked(key, host, status, retry_after, now)
            with self._lock:
                clear = status < 400 and host.blocked_before
                host.blocked_before = host.blocked_before and not clear
            if clear:
                self.store.clear_backoff(key, now)
        finally:
            with self._lock:
                host.users -= 1

    def _blocked(
        self, key: str, host: HostSlot, status: int, retry_after: str | None, now: datetime
    ) -> None:
        seconds = host_rules.parse_retry_after(retry_after, now)
        pause = host_rules.block_for(seconds, self.store.backoff_tries(key), self._rng)
        reason = f"HTTP {status}" + (f", Retry-After {retry_after[:60]}" if retry_after else "")
        until, began = self.store.block(key, now + timedelta(seconds=pause), reason, now)
        log.warning("host_blocked", host=key, until=until.isoformat(), reason=reason)
        metrics.host_blocked(status)
        with self._lock:
            host.blocked_before = True
            self._release_when_idle(key, host, in_use_ok=True)
        if began and self._on_blocked is not None:
            self._on_blocked(key, until, reason)
        raise HostNotReady(key, until, f"blocked: {reason}", answered=True)

    def ready_at(self, key: str, *, refusals: bool = False) -> datetime:
        """When this process could start a request to the host, as far as it knows here (a
        host it does not hold: now, for all it knows; with `refusals`, the end of the slice or
        block its last refusal named). To crawl the readiest job first, and to take over only
        jobs of hosts it could send to now."""
        now = self._clock()
        with self._lock:
            host = self._hosts.get(key)
            if host is None:
                return now
            if host.state is not SliceState.HELD:
                refusal = host.refusal
                return max(now, refusal.until) if refusals and refusal else now
            return max(now, host.next_start) if host.next_start else now

    def give_back(self) -> set[str]:
        """Give back every host no thread of this process is using or will ask for (a batch
        ended). Returns every host released since the last call (here or when a slice ended)
        that another process had asked for, for the caller to wake the batches waiting."""
        with self._lock:
            for key, host in list(self._hosts.items()):
                if not host.users and not host.expected:
                    self._release_when_idle(key, host)
            released, self._released = self._released, set()
        return released

    # -- which hosts the process's jobs still need -----------------------------------------

    def expect(self, keys: Iterable[str]) -> None:
        """Jobs of this process will ask for these hosts (a key per job): a host is given back
        early (`settle`) only once none of them is left."""
        with self._lock:
            for key in keys:
                if key:
                    self._slot(key).expected += 1

    def settle(self, key: str) -> bool:
        """One job expected for `key` is done here. When no job of this process is left for
        the host and no thread uses it, it is given back now, not at its batch's end. True
        when it was given back and another process had asked for it (the caller wakes
        whoever waits for it)."""
        with self._lock:
            host = self._hosts.get(key)
            if host is None:
                return False
            host.expected = max(host.expected - 1, 0)
            if host.expected or host.users:
                return False
            wanted = self._release_when_idle(key, host)
            self._released.discard(key)  # the caller wakes its waiters, not the batch's end
            return wanted

    def forget(self, keys: Iterable[str]) -> None:
        """Jobs expected here that will not ask after all (their batch ended first)."""
        with self._lock:
            for key in keys:
                if (host := self._hosts.get(key)) is not None:
                    host.expected = max(host.expected - 1, 0)

    def worth_keeping(self, key: str) -> bool:
        """Whether the job of `key` now finishing is this process's last for a host it holds,
        idle, paced, unasked and within today's budget: `settle` would give it back, unless
        the caller first brings more of the host's queued pages here."""
        with self._lock:
            host = self._hosts.get(key)
            return host is not None and host.expected == 1 and self._keeps(host, idle=True)

    def keeps(self, key: str, idle: bool = False) -> bool:
        """Whether pages found of `key` are best crawled by this process: it holds the host
        (with `idle`, with no request in flight), nobody else asked for it, its delay sets its
        pace (else threads do), and today's budget is not used up."""
        with self._lock:
            host = self._hosts.get(key)
            return host is not None and self._keeps(host, idle)

    def _keeps(self, host: HostSlot, idle: bool) -> bool:
        paced = (host.policy or self.default).delay_s > 0
        held = host.state is SliceState.HELD and host.renewable
        busy = idle and host.active > 0
        return paced and held and not busy and host_rules.may_start(host.pages_left, host.pages)

    def raise_delay(self, key: str, delay_s: float) -> None:
        """A robots.txt `Crawl-delay` read now: the slice held keeps it from its next start on
        (the grant read the host's limits before robots.txt was known)."""
        with self._lock:
            host = self._hosts.get(key)
            if host is None or host.policy is None:
                return  # not held: the next grant reads it from the store
            raised = host.policy.with_crawl_delay(delay_s)
            extra = timedelta(seconds=raised.delay_s - host.policy.delay_s)
            host.policy = raised
            if extra > timedelta(0) and host.next_start is not None:
                host.next_start += extra  # one (raised) delay after the last start

    def delay_of(self, key: str) -> float:
        """The delay between starts this process keeps for the host."""
        with self._lock:
            host = self._hosts.get(key)
            return ((host.policy if host is not None else None) or self.default).delay_s

    def __len__(self) -> int:
        with self._lock:
            return len(self._hosts)

    # -- inside (with _lock held) ---------------------------------------------------------

    def _enter(self, key: str) -> HostSlot:
        with self._lock:
            host = self._slot(key)
            host.users += 1
            return host

    def _slot(self, key: str) -> HostSlot:
        host = self._hosts.get(key)
        if host is None:
            if len(self._hosts) >= MAX_HOSTS_KNOWN:  # a worker meets ever new hosts
                for name, old in list(self._hosts.items()):
                    if not (old.users or old.expected or old.state is SliceState.HELD):
                        del self._hosts[name]
            host = self._hosts[key] = HostSlot()
        return host

    def _release_when_idle(self, key: str, host: HostSlot, in_use_ok: bool = False) -> bool:
        """Give a held slice back once no request is in flight (`in_use_ok`: at once) and no
        other thread is in the store for it; True when another process had asked for it."""
        while host.state is SliceState.HELD and host.renewing:
            self._changed.wait(0.5)
        if host.state is not SliceState.HELD or (host.active and not in_use_ok):
            return False
        wanted = self._slices.release(key, host)
        if wanted:
            self._released.add(key)
        return wanted
