"""ClusterHostPacer: the pacing `PoliteHttp` asks for before every request, held for the
whole cluster through the host's lease in the store (`store/hosts.py`).

One per worker process, shared by its threads. To send to a host the process first holds the
host (a time slice, `host_rules.decide`); while it holds it, its threads pace their requests
locally (the delay between starts, the cap on requests at once) with no store round trip,
and nobody else sends to the host. The slice is renewed halfway through while the process
still sends to the host and nobody else asked for it; otherwise it is given back with the
moment the next request may start, so whoever holds the host next keeps the delay.

A slice is granted, and renewed, with the pages the host has left today: the process starts
no more than that within it, then gives the host back (its pages counted) and is refused
until the next day.

A thread never sleeps long for a host: when the host will not be ready within `max_sleep_s`
(blocked after a 429, its daily budget used, or simply a long delay), `HostNotReady` says
until when, and the crawl gives the rest of its batch back to wait for that moment while the
thread takes other work. A host held by another process is waited for the same way, until
that process gives it back: a holder another process asked for does not renew its slice, and
at the slice's end it yields the host (`HostNotReady` for its own batch too); the release
wakes the batches waiting for the host (`give_back` returns the hosts someone asked for).

A host stays with the process that holds it while that process has pages for it: a batch about
to be done with it brings more of its queued pages over first (`worth_keeping`), and a batch's
end keeps the hosts other jobs of the process will still ask for.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta

from crawlsched import metrics
from crawlsched.drivers.targets import resolve as resolve_addresses
from crawlsched.logs import get_logger
from crawlsched.politeness.held_hosts import HeldHost, HostNotReady, holder_name, slice_for
from crawlsched.resources import host_rules
from crawlsched.resources.host_grouping import (
    GROUPINGS,
    Grouping,
    Resolve,
    first_address,
    pacing_key,
)
from crawlsched.resources.host_rules import BLOCKING_STATUSES, Granted, HostPolicy
from crawlsched.store.hosts import MongoHostStore

log = get_logger(__name__)

__all__ = ["LATE_START_GRACE", "ClusterHostPacer", "HostNotReady"]

POLL_S = 0.5  # how often a thread waiting for a held or refused host looks again
# A thread that wakes later than this after its planned start does not send (`slot`): the
# most two starts on a host may come closer than its delay (a wake-up's jitter).
LATE_START_GRACE = timedelta(milliseconds=10)


class ClusterHostPacer:
    def __init__(
        self,
        store: MongoHostStore,
        default: HostPolicy,
        *,
        slice_s: float,
        max_sleep_s: float,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None] = time.sleep,
        holder: str | None = None,
        rng: random.Random | None = None,
        on_blocked: Callable[[str, datetime, str], None] | None = None,
        grouping: Grouping = "origin",
        resolve: Resolve | None = None,
    ) -> None:
        if grouping not in GROUPINGS:
            raise ValueError(f"grouping must be one of {', '.join(GROUPINGS)}, got {grouping!r}")
        if slice_s <= 0:
            raise ValueError(f"slice_s must be > 0, got {slice_s}")
        self.store = store
        self.default = default
        self.slice_s = slice_s
        self.max_sleep_s = max_sleep_s
        self.holder = holder or holder_name()
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        # Told (host, until, reason) when a 429 or 503 begins a block (not when it extends one).
        self._on_blocked = on_blocked
        self._lock = threading.Lock()
        self._hosts: dict[str, HeldHost] = {}
        self._released: set[str] = set()  # hosts given back since `give_back` last said
        self._expected: Counter[str] = Counter()  # jobs of this process that will ask, by host
        self.grouping = grouping
        self._resolve = resolve or first_address(resolve_addresses)

    def key_of(self, url: str) -> str:
        """The key `url`'s requests are paced under (`host_grouping`); ValueError for a URL
        that is not absolute, OSError for a name that does not resolve (grouping by address)."""
        return pacing_key(url, self.grouping, self._resolve)

    # -- what PoliteHttp uses ----------------------------------------------------------------

    @contextlib.contextmanager
    def slot(self, key: str, policy: HostPolicy | None = None) -> Iterator[None]:
        """Hold one request's place on the host: returns at its start time (raises
        `HostNotReady` rather than wait past `max_sleep_s`)."""
        host = self._take(key)
        try:
            while not self._started_on_time(key, host, policy or self.default):
                pass  # woke too late for its place: it took another
            try:
                yield
            finally:
                with host.condition:
                    host.active -= 1
                    host.answered_at = self._clock()
                    host.condition.notify_all()
        finally:
            with self._lock:
                host.users -= 1

    def _started_on_time(self, key: str, host: HeldHost, policy: HostPolicy) -> bool:
        """Reserve a start and sleep until it. False (the place given up) when the thread woke
        more than `LATE_START_GRACE_S` after it and a place was planned after its own
        (`host_rules.may_start_late`): that start counts from this one, so a late request
        would precede it by less than the delay. False too when the host was given back
        meanwhile (blocked by a 429 seen by another thread, or handed on): the next holder's
        first start may come before this one."""
        start = self._reserve(key, host, policy)
        if (wait := (start - self._clock()).total_seconds()) > 0:
            metrics.host_pacing_waited(wait)
            self._sleep(wait)
        with host.condition:
            late = self._clock()
            delay = timedelta(seconds=(host.policy or policy).delay_s)
            # Given back while this thread slept (a 429 blocked it, its slice was handed on):
            # the place was in a slice that is over, so it asks anew. (Held again since, the
            # place still holds: a release records the next start after it.)
            handed_on = host.lease_until is None
            last = host_rules.may_start_late(start, late, host.next_start, host.lease_until, delay)
            if handed_on or (delay and late - start > LATE_START_GRACE and not last):
                host.active -= 1
                host.condition.notify_all()
                return False
            # Late within the grace, or holding the last place: the next start counts from
            # now, so it never follows this one too soon.
            if late > start and host.next_start is not None:
                host.next_start = max(host.next_start, late + delay)
        return True

    def observe(self, key: str, status: int, retry_after: str | None) -> None:
        """A response from the host: a 429 or 503 blocks it for everyone (its Retry-After,
        else a backoff) and raises `HostNotReady`, so the page is asked again once the block
        is over (the host said "not now", not "no"); the first good answer after a block
        resets the backoff."""
        host = self._take(key)
        try:
            now = self._clock()
            if status in BLOCKING_STATUSES:
                seconds = host_rules.parse_retry_after(retry_after, now)
                tries = self.store.backoff_tries(key)
                pause = host_rules.block_for(seconds, tries, self._rng)
                reason = f"HTTP {status}" + (f", Retry-After {retry_after}" if retry_after else "")
                until, began = self.store.block(key, now + timedelta(seconds=pause), reason, now)
                log.warning("host_blocked", host=key, until=until.isoformat(), reason=reason)
                metrics.host_blocked(status)
                with host.condition:
                    host.blocked_before = True
                    self._give_back(key, host, now)
                if began and self._on_blocked is not None:
                    self._on_blocked(key, until, reason)
                raise HostNotReady(key, until, f"blocked: {reason}")
            elif status < 400 and host.blocked_before:
                host.blocked_before = False
                self.store.clear_backoff(key, now)
        finally:
            with self._lock:
                host.users -= 1

    def ready_at(self, key: str, *, refusals: bool = False) -> datetime:
        """When this process could start a request to the host, as far as it knows here (a
        host it does not hold: now, for all it knows; with `refusals`, the end of the slice or
        block its last refusal named). To crawl the readiest job first, and to take over only
        jobs of hosts it could send to now (`planning/take_over.py`)."""
        now = self._clock()
        with self._lock:
            host = self._hosts.get(key)
        if host is None:
            return now
        if host.lease_until is None:
            return max(now, host.refused[0]) if refusals and host.refused else now
        return max(now, host.next_start) if host.next_start else now

    def give_back(self) -> set[str]:
        """Give back every host no thread of this process is using or will ask for (a batch
        ended): the rest of its slice goes to whoever wants it. Returns every host released
        since the last call (here or when a slice ended) that another process had asked for,
        for the caller to wake the batches waiting for them."""
        with self._lock:
            # A host a job of another batch here will still ask for (`expect`) stays: given
            # back now, it would be asked for again at once, or refused to that job. It goes
            # back when that job is done (`settle`), or with its slice.
            idle = [(k, h) for k, h in self._hosts.items() if not h.users and not self._expected[k]]
        for key, host in idle:
            with host.condition:
                if host.lease_until is not None and host.active == 0:
                    self._give_back(key, host, self._clock())
        with self._lock:
            released, self._released = self._released, set()
        return released

    # -- giving a host back as soon as this process is done with it -------------------------

    def expect(self, keys: Iterable[str]) -> None:
        """Jobs of this process will ask for these hosts (a key per job): a host is given back
        early (`settle`) only once none of them is left."""
        with self._lock:
            self._expected.update(key for key in keys if key)

    def settle(self, key: str) -> bool:
        """One job expected for `key` is done here (crawled, failed or put aside). When no job
        of this process is left for the host and no thread uses it, it is given back now, not
        at its batch's end: a process waiting for it takes it over while this one crawls its
        other hosts. True when it was given back and another process had asked for it (the
        caller wakes whoever waits for it)."""
        with self._lock:
            left = self._expected.pop(key, 0) - 1
            if left > 0:
                self._expected[key] = left
                return False
            host = self._hosts.get(key)
            if host is None or host.users:
                return False
        with host.condition:
            if host.lease_until is None or host.active:
                return False
            wanted = self._give_back(key, host, self._clock())
        with self._lock:
            self._released.discard(key)  # the caller wakes its waiters, not the batch's end
        return wanted

    def worth_keeping(self, key: str) -> bool:
        """Whether the job of `key` now finishing is this process's last for a host it holds,
        that nobody else asked for since, whose delay sets its pace and whose budget for today
        is not used up: `settle` would give it back. The caller may bring more of the host's
        queued pages here first (`TakeOver.take_host`), so the host stays with one process
        instead of changing hands about once a page."""
        with self._lock:
            if self._expected.get(key, 0) != 1:
                return False
        return self.keeps(key, idle=True)

    def keeps(self, key: str, idle: bool = False) -> bool:
        """Whether pages found of `key` are best crawled by this process (`link_flush`): it
        holds the host (with `idle`, with no request in flight), nobody else asked for it,
        its delay sets its pace (else threads do), and its budget for today is not used up
        (the pages would only wait for tomorrow). Crawled here, they need no planning, no
        batch of their own and no grant: the host stays with one process while its pages
        last."""
        with self._lock:
            host = self._hosts.get(key)
        if host is None:
            return False
        with host.condition:
            paced = (host.policy or self.default).delay_s > 0
            held = host.lease_until is not None and host.renewable
            busy = idle and host.active > 0
            return paced and held and not busy and host_rules.may_start(host.pages_left, host.pages)

    def delay_of(self, key: str) -> float:
        """The delay between starts this process keeps for the host (its own limits once it
        was granted, else the default)."""
        with self._lock:
            host = self._hosts.get(key)
        return ((host.policy if host is not None else None) or self.default).delay_s

    def forget(self, keys: Iterable[str]) -> None:
        """Jobs expected here that will not ask after all (their batch ended first)."""
        with self._lock:
            for key in keys:
                left = self._expected.pop(key, 0) - 1
                if left > 0:
                    self._expected[key] = left

    def __len__(self) -> int:
        with self._lock:
            return len(self._hosts)

    # -- inside ----------------------------------------------------------------------------

    def _take(self, key: str) -> HeldHost:
        with self._lock:
            host = self._hosts.get(key)
            if host is None:
                # A worker meets ever new hosts: forget the ones nobody uses and nobody holds.
                if len(self._hosts) >= 10_000:
                    for name in [n for n, h in self._hosts.items() if h.users == 0]:
                        if self._hosts[name].lease_until is None:
                            del self._hosts[name]
                host = self._hosts[key] = HeldHost()
            host.users += 1
            return host

    def _reserve(self, key: str, host: HeldHost, policy: HostPolicy) -> datetime:
        patience = self._clock() + timedelta(seconds=self.max_sleep_s)
        with host.condition:
            while True:
                self._hold(key, host, policy, self._clock())
                # Read after the hold: a grant is a store round trip, and a start planned at
                # the moment before it would be past already, so a thread would give up its
                # place as late (`_started_on_time`) and the host wait a whole delay.
                now = self._clock()
                if host.lease_until is None:
                    until, why, held = host.refused or (now, "refused", False)
                    if until > patience:
                        raise HostNotReady(key, until, why, on_release=held, held_elsewhere=held)
                    # Ask the store again when the block or the holder's slice ends, not
                    # before: a refused process polling it costs a command each time.
                    host.condition.wait(max(0.01, (until - now).total_seconds()))
                    continue
                effective = host.policy or policy
                if host.active >= effective.concurrency:
                    host.condition.wait(POLL_S)
                    continue
                start = max(now, host.next_start) if host.next_start else now
                if not host_rules.may_start(host.pages_left, host.pages):
                    # The slice's share of today's budget is used: give the host back (its
                    # pages counted) and ask anew, refused until the next day unless it began.
                    self._give_back(key, host, now)
                    continue
                if start > patience:
                    raise HostNotReady(key, start, f"paced: {effective.delay_s:g} s between pages")
                if start > host_rules.last_start(host.lease_until, effective.delay_s):
                    # This slice ends before our turn: give it back and hold the host anew
                    # (at once, unless another process asked for it meanwhile).
                    self._give_back(key, host, now)
                    continue
                host.active += 1
                host.pages += 1
                host.next_start = start + timedelta(seconds=effective.delay_s)
                return start

    def _hold(self, key: str, host: HeldHost, policy: HostPolicy, now: datetime) -> None:
        """Make sure this process holds the host (or note until when it cannot)."""
        if host.lease_until is not None:
            delay = (host.policy or policy).delay_s
            if now >= host_rules.last_start(host.lease_until, delay):
                wanted = not host.renewable
                self._give_back(key, host, now)  # the slice ran out
                if wanted:
                    # Another process asked for the host: yield it, and wait like any other
                    # (this thread's batch is woken by the next release).
                    why = "handed over: another process asked for the host"
                    raise HostNotReady(key, now, why, on_release=True)
            elif host.renewable and now >= host.lease_until - timedelta(seconds=self.slice_s / 2):
                renewed = self.store.renew(
                    key, self.holder, now, slice_for(self.slice_s, delay), host.pages,
                    host.next_start, in_flight=host.active, policy=policy,
                )  # fmt: skip
                if renewed is None:
                    host.renewable = False
                else:
                    host.lease_until, host.pages = renewed.lease_until, 0
                    host.pages_left = renewed.pages_left
            if host.lease_until is not None:
                return
        # Refused for a holder whose slice has not ended: most likely refused again, asked so.
        held = host.refused is not None and host.refused[2] and host.refused[0] > now
        decision, effective = self.store.acquire(
            key, self.holder, policy, now, self.slice_s, held_elsewhere=held
        )
        if isinstance(decision, Granted):
            host.lease_until, host.policy, host.renewable = decision.lease_until, effective, True
            host.refused, host.pages_left = None, decision.pages_left
            if host.next_start is None or decision.first_start > host.next_start:
                host.next_start = decision.first_start
        else:
            host.refused = (decision.until, decision.why, decision.held)

    def _give_back(self, key: str, host: HeldHost, now: datetime) -> bool:
        """Release the host (under its condition): the next holder starts no earlier than
        this process's next start would have been, nor than a delay after the last answer
        came in: a request can leave later than planned (a thread descheduled on its way to
        the socket), but it reached the host before its answer came back. True when another
        process had asked for it (noted as released, for the caller to wake its waiters)."""
        if host.lease_until is None:
            return False
        next_start = host.next_start
        if host.answered_at is not None and host.policy is not None:
            after_answer = host.answered_at + timedelta(seconds=host.policy.delay_s)
            next_start = max(next_start, after_answer) if next_start else after_answer
        wanted = self.store.release(key, self.holder, next_start, host.pages, now)
        host.lease_until, host.pages, host.renewable = None, 0, True
        if wanted:
            with self._lock:
                self._released.add(key)
        return wanted
