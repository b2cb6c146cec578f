"""The frontier's `take`: a running batch takes pages over from its run's batches that have
not begun.

Two moments call for it:
- every page of the batch waits for its host (or its last ones are in flight) while its lanes
  are free: it takes pages of hosts this process could send to now, one per host, readiest
  first (`planning/frontier_rules.pick`), instead of leaving them queued behind it;
- the page now finishing is the process's last for a paced host it holds: it takes more of
  that host's queued pages (`host=`), so the host stays with this process and its clock keeps
  running, where handing it back would cost a release, another grant and the refusals around
  them for about every page.

Each page moves in one conditional write (`TakeOvers.take_over`: only a page whose batch has
not begun, to this batch's dispatch), so a page is crawled by exactly one batch: the one that
took it, or its own, which marks its pages begun and reads again when that write began fewer
than it read. A batch takes over only in its first `TAKE_OVER_FOR_S`, then ends as it would
have. After a look that took nothing, the run's batches of this process look again no sooner
than `LOOK_AGAIN_S`: a look is two reads, and they look at the same queue.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from crawlsched import metrics
from crawlsched.catalog import MAX_BATCH_JOBS
from crawlsched.crawl.pages import Page
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.frontier_rules import READY_SLACK, pick
from crawlsched.resources.host_grouping import origin_url_pattern
from crawlsched.runtime import Runtime
from crawlsched.store.job_claims import expiry_deadline
from crawlsched.store.take_overs import UNSTARTED

log = get_logger(__name__)

CANDIDATES = 64  # pages read per look: enough to find a few hosts ready among them
LOOK_AGAIN_S = 1.0  # after a look that took nothing
TAKE_OVER_FOR_S = 10.0  # from the batch's start


class Taker:
    """One batch's take-overs; used by its loop's thread only."""

    def __init__(self, rt: Runtime, locate: Callable[[dict[str, Any]], Page]) -> None:
        self._rt, self._locate = rt, locate
        self._look_at = 0.0  # monotonic: the next look
        self._host_look_at: dict[str, float] = {}  # the same, for one host's pages
        self._until = rt.env.monotonic() + TAKE_OVER_FOR_S

    def take(self, message: BatchMessage, room: int, busy: Collection[str]) -> list[Page]:
        """Up to `room` pages of hosts not in `busy` that this process could send to now."""
        rt = self._rt
        quiet = ("take_over_quiet_until", message.run_id, message.task, message.media_name)
        quiet_until = (rt.view_cache.get(quiet) or (0.0, None))[0]
        if not self._may_take(message, room, max(self._look_at, quiet_until)):
            return []
        store = rt.jobs(message.collection)
        docs = store.open_to_take_over(
            message.run_id, message.task, message.media_name, message.dispatch_id, CANDIDATES
        )
        pages = [self._locate(doc) for doc in docs]
        hosts = {page.host for page in pages if page.host}
        # What another process holds or a block stops, as the store says now (the pacer
        # learns of a holder only when refused); the rest as this process paces it.
        now = rt.now()
        elsewhere = rt.hosts.not_free_until(hosts, rt.pacer.holder, now) if hosts else {}
        ready = {h: elsewhere.get(h) or rt.pacer.ready_at(h, refusals=True) for h in hosts}
        wanted = pick([(p.job_id, p.host) for p in pages], ready, busy, now, READY_SLACK, room)
        taken = self._move(message, pages, wanted)
        if not taken:
            # The process's other batches of the run would most likely find nothing either.
            self._look_at = rt.env.monotonic() + LOOK_AGAIN_S
            rt.view_cache.put(quiet, self._look_at, None)
        return taken

    def take_host(self, message: BatchMessage, host: str, room: int) -> list[Page]:
        """Up to `room` queued pages of `host`, which this process holds and is about to be
        done with. Only under the origin grouping, whose URLs share a prefix the store can
        match; a host is looked for again `LOOK_AGAIN_S` after a look that found none."""
        pattern = origin_url_pattern(host)
        if pattern is None or not self._may_take(message, room, self._host_look_at.get(host, 0.0)):
            return []
        docs = self._rt.jobs(message.collection).queued_of_host(
            message.run_id, message.task, message.media_name, message.dispatch_id, pattern, room
        )
        pages = [page for page in map(self._locate, docs) if page.host == host]
        taken = self._move(message, pages, [page.job_id for page in pages])
        if not taken:
            self._host_look_at[host] = self._rt.env.monotonic() + LOOK_AGAIN_S
        return taken

    def _may_take(self, message: BatchMessage, room: int, look_at: float) -> bool:
        """Room in the lanes and in the part's message, within the batch's time to take over,
        past `look_at`."""
        if room <= 0 or not look_at <= self._rt.env.monotonic() < self._until:
            return False
        return len(message.job_ids) + room <= MAX_BATCH_JOBS

    def _move(self, message: BatchMessage, pages: list[Page], wanted: list[Any]) -> list[Page]:
        """Move the `wanted` pages to this batch's dispatch: only those the store moved (a
        batch that began meanwhile keeps its own)."""
        deadline = expiry_deadline(self._rt.now(), self._rt.settings.dispatch_lease_s)
        store = self._rt.jobs(message.collection)
        got = set(store.take_over(wanted, message.dispatch_id, deadline))
        taken = [page for page in pages if page.job_id in got]
        for page in taken:  # as the store has them now
            page.doc.pop(UNSTARTED, None)
            page.doc["dispatch_id"] = message.dispatch_id
        if taken:
            metrics.jobs_taken_over(message.task, message.media_name, len(taken))
            hosts = sorted({page.host for page in taken})[:8]
            log.debug(
                "jobs_taken_over", dispatch_id=message.dispatch_id, jobs=len(taken), hosts=hosts
            )
        return taken
