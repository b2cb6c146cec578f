"""The frontier's rules (pure): which queued pages a running batch takes over, which pages it
found it keeps to crawl itself, and when it hands its crawled part to its run.

- **Take** (`pick`): a batch whose own pages all wait for their hosts takes over queued pages
  of hosts it does not crawl already and that this process could send to now (not paced
  later, not held by another process, not blocked), one page per host, the readiest host
  first, at most as many as it has free lanes.
- **Keep** (`keep`): a page found of a host this process holds and paces, nobody else asked
  for, is crawled by the batch that found it, not handed to the run to be planned, queued for
  any thread and granted the host again; of each host only as many pages as its delay lets the
  batch crawl in `KEEP_AHEAD_SHARE` of the time left to its time limit.
- **Hand over** (`part_due`): a batch records and reports its crawled part while it goes on,
  so what its pages found is crawled by other threads meanwhile (or, kept, counted by its run
  before it is crawled here).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from crawlsched.catalog import MAX_BATCH_JOBS

# A host this process could start a request to this soon counts as ready now.
READY_SLACK = timedelta(milliseconds=5)
# A hand-over costs about what a batch's end does (some fifteen store commands): a part is at
# least this many pages, so that is two commands a page at most.
MIN_PART_PAGES = 8
# A part kept back that long (in periods of `discovery_flush_s`) is handed over all the same:
# a crash crawls it again, and the run's counts should not lag far behind its crawl.
PART_WAIT_PERIODS = 10
# A batch hands over at most this many parts (a redelivery looks its parts up by number).
MAX_PARTS = 2 * MAX_BATCH_JOBS // MIN_PART_PAGES
# A batch keeps the pages it found only while younger than this share of its time limit...
KEEP_FOR_SHARE = 0.5
# ... and of each host only what its delay lets it crawl in this share of the time left.
KEEP_AHEAD_SHARE = 0.8


def pick(
    candidates: Sequence[tuple[Any, str]],
    ready_at: Mapping[str, datetime],
    busy: Collection[str],
    now: datetime,
    slack: timedelta,
    room: int,
) -> list[Any]:
    """The job ids to take over, of `candidates` (job id, host key) in the store's order. A
    job with no host key (a URL no request could go to) is left to its own batch, whose crawl
    says so; a host missing from `ready_at` is not known to be ready."""
    if room <= 0:
        return []
    soon = now + slack
    first: dict[str, tuple[int, Any]] = {}  # host -> (position, job id) of its first job
    for position, (job_id, host) in enumerate(candidates):
        if not host or host in busy or host in first:
            continue
        at = ready_at.get(host)
        if at is None or at > soon:
            continue
        first[host] = (position, job_id)
    order = sorted(first, key=lambda host: (ready_at[host], first[host][0]))
    return [first[host][1] for host in order[:room]]


def keep(
    fresh: Sequence[tuple[str, str, str]],
    held: Mapping[str, float],
    ahead: Mapping[str, int],
    time_left_s: float,
) -> list[tuple[str, str, str]]:
    """Of the pages found (child id, URL, host key), those the batch crawls itself: of a host
    in `held` (held and paced here, nobody else asked, in budget: its delay), no more of each
    host than its delay lets it crawl in `KEEP_AHEAD_SHARE` of `time_left_s`, counting the
    pages of that host the batch holds already (`ahead`)."""
    budget = KEEP_AHEAD_SHARE * max(time_left_s, 0.0)
    room = {
        host: int(budget / max(delay_s, 1e-3)) - ahead.get(host, 0)
        for host, delay_s in held.items()
    }
    kept = []
    for entry in fresh:
        if room.get(entry[2], 0) > 0:
            room[entry[2]] -= 1
            kept.append(entry)
    return kept


@dataclass(frozen=True)
class PartFacts:
    """What `part_due` weighs, as the loop sees it now."""

    every_s: float  # `discovery_flush_s`: 0, hand over only at the batch's end
    age_s: float  # since the part began
    pages: int  # pages crawled in the part
    found: int  # pages found in the part, not found before by this batch
    kept: int  # of those, the ones the batch would keep
    rest: int  # pages left to crawl
    kept_host_dry: bool  # a host it would keep pages of has no page left in the batch


def part_due(facts: PartFacts, short_of_work: Callable[[], bool]) -> bool:
    """Whether to hand the part over now. Only a part that found pages: none left to crawl
    and some to keep (the batch goes on with them instead of ending); or a host it keeps
    pages of has run dry here and the part is a period old; or enough pages, a period old,
    and the run short of work for the pages found that this batch would not keep
    (`short_of_work`, a store read, is asked only then), or the part held back
    `PART_WAIT_PERIODS` already."""
    if not (facts.every_s > 0 and facts.found):
        return False
    if not facts.rest:
        return facts.kept > 0
    old = facts.age_s >= facts.every_s
    if old and facts.kept and facts.kept_host_dry:
        return True  # its clock would stop until the batch's next hand-over
    if not (facts.pages >= MIN_PART_PAGES and old):
        return False
    if facts.age_s >= facts.every_s * PART_WAIT_PERIODS:
        return True
    if facts.kept == facts.found:
        return False  # every page found stays here: no other thread needs them
    return short_of_work()
