"""Pure host rules: one clock per host for the whole cluster.

A host (its origin: scheme, host and port) is a resource leased in the store like an account
or a node, but held by one worker process at a time: the holder paces every request its
threads send to the host (the delay between starts, the cap on requests at once) and nobody
else sends to it meanwhile, so the limits hold across every process on every machine with no
store round trip per request. The rules below decide, on a snapshot of the host's document,
what a process asking for the host gets; the store writes the decision back by compare-and-set.

- A lease is a time slice (`slice_s`); a dead holder's slice simply runs out.
- The holder starts no request later than `delay_s` before its slice ends (`last_start`), so
  whoever holds the host next starts at least one delay after the last start it made.
- A process refused because another holds the host marks the host as wanted; the holder then
  does not renew past its slice and gives the host back at its end (`may_renew`); the batch
  that waited for it is woken by that release.
- A 429 or 503 blocks the host for everyone until its `Retry-After`, or after an exponential
  backoff with jitter and a cap when none is given (`block_for`).
- A host's pages per UTC day can be capped (`daily_pages`): a slice is granted (and renewed)
  with the pages left today (`pages_left`, as counted when slices are given back or renewed),
  and its holder starts no more than that (`may_start`); once used up the host waits for the
  day.
- The effective policy is the host's own (set by an operator), else the media's, else the
  global settings; a robots.txt `Crawl-delay` raises the delay, never lowers it.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

MAX_CRAWL_DELAY_S = 60.0  # a robots.txt cannot make us wait longer than this between pages
MAX_RETRY_AFTER_S = 3600.0  # nor a Retry-After block the host for more than an hour
BACKOFF_BASE_S = 2.0
BACKOFF_CAP_S = 300.0
DEFAULT_PORTS = {"http": 80, "https": 443}


def host_key(url: str) -> str:
    """The host a URL's request is paced under: `scheme://host:port`, lower case, the port
    always written (`https://Example.com/` → `https://example.com:443`)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not scheme or not host:
        raise ValueError(f"not an absolute URL: {url!r}")
    port = parts.port or DEFAULT_PORTS.get(scheme)
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def parse_host(text: str) -> str:
    """An operator's way to name a host (`example.com`, `http://127.0.0.1:8001/`) → its key;
    a bare name means https on port 443. Keys of the other groupings (`domain:example.com`,
    `address:10.0.0.5`) are taken as they are (`host_grouping.is_pacing_key` checks them)."""
    text = text.strip()
    if not text:
        raise ValueError("empty host")
    if text.startswith(("domain:", "address:")):
        return text.lower()
    return host_key(text if "://" in text else f"https://{text}")


@dataclass(frozen=True)
class HostPolicy:
    delay_s: float  # at least this long between two request starts
    concurrency: int  # at most this many requests at once
    daily_pages: int = 0  # at most this many requests per UTC day (0: no cap)

    def __post_init__(self) -> None:
        if not 0 <= self.delay_s <= MAX_CRAWL_DELAY_S:
            raise ValueError(f"delay_s must be within 0…{MAX_CRAWL_DELAY_S:g}, got {self.delay_s}")
        if not 1 <= self.concurrency <= 64:
            raise ValueError(f"concurrency must be within 1…64, got {self.concurrency}")
        if self.daily_pages < 0:
            raise ValueError(f"daily_pages must be >= 0, got {self.daily_pages}")

    def with_crawl_delay(self, crawl_delay_s: float | None) -> HostPolicy:
        """robots.txt's `Crawl-delay` raises the delay (up to `MAX_CRAWL_DELAY_S`)."""
        if not crawl_delay_s or crawl_delay_s <= self.delay_s:
            return self
        delay = min(float(crawl_delay_s), MAX_CRAWL_DELAY_S)
        return HostPolicy(delay, self.concurrency, self.daily_pages)


POLICY_KEYS = ("delay_s", "concurrency", "daily_pages")


def merge_policy(default: HostPolicy, *overrides: dict | None) -> HostPolicy:
    """`default` with each override's keys laid over it in turn (later ones win)."""
    values = {"delay_s": default.delay_s, "concurrency": default.concurrency}
    values["daily_pages"] = default.daily_pages
    for override in overrides:
        for key in POLICY_KEYS:
            if override and override.get(key) is not None:
                values[key] = override[key]
    return HostPolicy(float(values["delay_s"]), int(values["concurrency"]), values["daily_pages"])


@dataclass(frozen=True)
class HostState:
    """What the rules read of a host's document."""

    holder: str | None = None
    lease_until: datetime | None = None
    lease_granted_at: datetime | None = None
    wanted_at: datetime | None = None
    next_start: datetime | None = None
    blocked_until: datetime | None = None
    blocked_reason: str = ""
    backoff_tries: int = 0
    day: str = ""
    pages_today: int = 0

    def pages_on(self, now: datetime) -> int:
        return self.pages_today if self.day == day_of(now) else 0

    def counted(self, pages: int, now: datetime) -> HostState:
        """The state once `pages` more sent are counted: on the day they are counted, which is
        never earlier than the day they were sent (a page sent before midnight and counted
        after counts for the new day, so no day is undercounted)."""
        return replace(self, day=day_of(now), pages_today=self.pages_on(now) + max(pages, 0))


@dataclass(frozen=True)
class Granted:
    lease_until: datetime
    first_start: datetime  # the holder's first request starts no earlier
    pages_left: int | None = None  # the slice starts at most this many requests (None: no cap)


@dataclass(frozen=True)
class Renewed:
    lease_until: datetime
    pages_left: int | None = None  # counted at the renewal: the slice's new share (None: no cap)


@dataclass(frozen=True)
class Refused:
    until: datetime  # ask again then (or when the holder gives it back: `held`)
    why: str
    held: bool  # held by another process: it is marked wanted and changes hands at the
    # holder's slice end, and whoever waits is woken by that release


def day_of(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%d")


def next_day(now: datetime) -> datetime:
    start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return start + timedelta(days=1)


def decide(
    state: HostState, policy: HostPolicy, holder: str, now: datetime, slice_s: float
) -> Granted | Refused:
    """Whether `holder` may hold the host from `now` for one slice."""
    if state.blocked_until is not None and state.blocked_until > now:
        return Refused(state.blocked_until, f"blocked: {state.blocked_reason}", held=False)
    if policy.daily_pages and state.pages_on(now) >= policy.daily_pages:
        return Refused(
            next_day(now), f"daily budget of {policy.daily_pages} pages used", held=False
        )
    held = state.holder and state.holder != holder and state.lease_until is not None
    if held and state.lease_until > now:
        return Refused(state.lease_until, f"held by {state.holder}", held=True)
    first = max(now, state.next_start) if state.next_start else now
    return Granted(now + timedelta(seconds=slice_s), first, pages_left(state, policy, now))


def pages_left(state: HostState, policy: HostPolicy, now: datetime) -> int | None:
    """The pages the host may still be sent today, as counted in `state` (None: no cap)."""
    if not policy.daily_pages:
        return None
    return max(policy.daily_pages - state.pages_on(now), 0)


def may_start(pages_left: int | None, sent: int) -> bool:
    """Whether a holder whose slice was granted (or last renewed) with `pages_left`, and which
    has started `sent` requests since, may start another: never more than what was left."""
    return pages_left is None or sent < pages_left


def may_renew(state: HostState, holder: str, now: datetime) -> bool:
    """The holder keeps the host for another slice unless it lost it, or another process
    asked for it since the holder got it (then it changes hands at the slice's end)."""
    if state.holder != holder or state.lease_until is None or state.lease_until <= now:
        return False
    if state.blocked_until is not None and state.blocked_until > now:
        return False
    granted = state.lease_granted_at
    return state.wanted_at is None or (granted is not None and state.wanted_at < granted)


def last_start(lease_until: datetime, delay_s: float) -> datetime:
    """The latest moment a holder may start a request in its slice: the next holder then
    starts at least one delay after it."""
    return lease_until - timedelta(seconds=delay_s)


def may_start_late(
    planned: datetime,
    late: datetime,
    next_start: datetime | None,
    lease_until: datetime | None,
    delay: timedelta,
) -> bool:
    """Whether a thread that woke at `late` for the place planned at `planned` may still take
    it: only when that place is the last reserved on the host (the next start is one delay
    after it), so no start follows to be crowded and the one before is further away, and
    `late` is within the slice (the next holder keeps its delay)."""
    return (
        next_start == planned + delay
        and lease_until is not None
        and late <= last_start(lease_until, delay.total_seconds())
    )


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a `Retry-After` header (delay-seconds or an HTTP-date, RFC 9110);
    None when absent or unreadable (the caller's backoff decides then). Never raises: the
    header is the server's, not ours."""
    if not value:
        return None
    value = value.strip()
    if _DELAY_SECONDS.fullmatch(value):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - now).total_seconds())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


_DELAY_SECONDS = re.compile(r"[0-9]{1,12}")  # ASCII digits only: `'²'.isdigit()` is True


def block_for(retry_after_s: float | None, backoff_tries: int, rng: random.Random) -> float:
    """How long a 429/503 blocks the host: the server's `Retry-After` (capped at an hour), else
    an exponential backoff from the tries so far, with full jitter over its upper half, capped."""
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), MAX_RETRY_AFTER_S)
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** min(backoff_tries, 16))
    return ceiling / 2 + rng.random() * ceiling / 2


BLOCKING_STATUSES = frozenset({429, 503})
