"""Which of a batch's pages to start next, and the pages put aside while their hosts are not
ready (used by the loop's thread only).

The readiest host's page goes first, so a batch over many hosts keeps its lanes busy instead
of waiting for one host's delay. A host that will not be ready soon (held by another process,
blocked, paced slower) has its pages put aside; those of hosts another process held are asked
for once more when the rest is done (its holder has often given it back by then), and what is
still aside then goes back to wait for its host.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from crawlsched import metrics
from crawlsched.crawl.pages import Page
from crawlsched.planning.frontier_rules import READY_SLACK
from crawlsched.politeness.pacer import ClusterHostPacer, HostNotReady


def next_page(
    pacer: ClusterHostPacer, pending: list[Page], busy: Counter, now: datetime
) -> Page | None:
    """The next page to start, taken out of `pending`: the readiest of a host none of the
    batch's pages in flight uses; else the readiest whose host could take one more request
    now (no delay between starts). None: wait for a page in flight."""
    if not pending:
        return None
    among = [page for page in pending if page.host not in busy] if busy else pending
    if busy and not among:
        among = [page for page in pending if pacer.ready_at(page.host) <= now + READY_SLACK]
        if not among:
            return None
    page = min(among, key=lambda page: pacer.ready_at(page.host))
    pending.remove(page)
    return page


def ready_soon(pacer: ClusterHostPacer, pending: list[Page], now: datetime) -> bool:
    """Whether a pending page's host is ready now (within `READY_SLACK`) for this process."""
    return any(pacer.ready_at(page.host) <= now + READY_SLACK for page in pending)


class Aside:
    """The pages whose hosts will not be ready within the thread's patience, and why."""

    def __init__(self) -> None:
        self.pages: list[Page] = []
        self.not_ready: dict[str, HostNotReady] = {}

    def put(self, e: HostNotReady, page: Page, pending: list[Page]) -> list[Page]:
        """Put `page` and the pending pages of its host aside; the pending left."""
        self.not_ready[e.key] = e
        waiting = [page, *(p for p in pending if p.host == e.key)]
        metrics.jobs_waited_for_host(e.why, e.on_release, len(waiting))
        self.pages += waiting
        return [p for p in pending if p.host != e.key]

    def held_elsewhere(self) -> list[Page]:
        """The pages put aside for hosts another process held when asked, taken back out:
        such a host is often given back by the time the rest of the batch is done, and
        asking once more costs two store commands where parking the pages costs a park, a
        wake and a delivery of their own."""
        again = [p for p in self.pages if self.not_ready[p.host].held_elsewhere]
        for key in {p.host for p in again}:
            del self.not_ready[key]
        self.pages = [p for p in self.pages if p.host in self.not_ready]
        return again

    def waits(self) -> tuple[str, dict[str, datetime | None], datetime | None]:
        """Why the pages aside wait; for which hosts, each with the moment it is ready (None:
        when its holder gives it back); and not before when (None: a holder's release may
        come first)."""
        why = "host not ready: " + "; ".join(map(str, self.not_ready.values()))[:500]
        waits = {key: None if e.on_release else e.until for key, e in self.not_ready.items()}
        if any(until is None for until in waits.values()):
            return why, waits, None
        return why, waits, min(until for until in waits.values() if until is not None)

    def keep(self, held: frozenset) -> None:
        """Only the pages the batch still holds after a hand-over stay aside."""
        self.pages = [p for p in self.pages if p.job_id in held]
