"""A running batch takes over jobs of its run's batches that have not begun.

`planning/take_over.py` says which and why: when the batch's own pages all wait for their
hosts' turns, it crawls pages of other hosts that sit idle, instead of leaving them queued
behind it for a thread. The jobs move to the batch's dispatch in one conditional write
(`JobClaims.take_over`), so each job is crawled by exactly one batch: the one that took it, or
its own, which marks the jobs it read begun, and reads again when that write began fewer than
it read (`MongoJobStore.load_and_begin`). A batch whose
jobs were all taken finds none when its message comes, crawls nothing and reports nothing: the
batch that took them records and reports them under its own dispatch.

A batch also takes over the queued pages of one host (`take_host`) when its job finishing is
its process's last for a paced host the process holds: the host stays with that process,
instead of going back and being granted again, most often to the same process a moment later,
for about every page.

A batch takes over only in its first `TAKE_OVER_FOR_S`: then it ends as it would have, so what it
crawled is recorded and reported (a part is handed over early only when it found pages), and
the jobs it put aside for hosts another process held go back to wait, open to take-over
themselves, instead of waiting for as long as the batch finds work.

Looked for at most every `LOOK_AGAIN_S` after a look that found nothing to take, by any batch
of the run in this process (`rt.view_cache`): a look is two store reads (the jobs, and their
hosts' holders), the run's batches do not change that fast, and the process's batches look at
the same queue (in a politeness-bound crawl, three looks in four found nothing when each batch
kept its own pause).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any, Protocol

from crawlsched import metrics
from crawlsched.catalog import MAX_BATCH_JOBS
from crawlsched.flow.batch_hosts import READY_SLACK
from crawlsched.flow.stop_watch import StopWatch
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.take_over import pick
from crawlsched.resources.host_grouping import origin_url_pattern
from crawlsched.runtime import Runtime
from crawlsched.store.job_claims import UNSTARTED, expiry_deadline

log = get_logger(__name__)

CANDIDATES = 64  # jobs read per look: enough to find a few hosts ready among them
LOOK_AGAIN_S = 1.0  # after a look that took nothing
TAKE_OVER_FOR_S = 10.0  # from the batch's start


class Adopting(Protocol):
    """The batch's current part (`link_flush.LinkFlush`): its message, and how jobs join it."""

    message: BatchMessage

    def adopt(self, docs: list[dict[str, Any]]) -> None: ...


class TakeOver:
    def __init__(
        self,
        rt: Runtime,
        part: Adopting,
        stop: StopWatch,
        locate: Callable[[dict[str, Any]], tuple[str, str]],
    ) -> None:
        self.rt, self.part, self.stop = rt, part, stop
        self.locate = locate  # a job's URL and its host's pacing key
        self._look_at = 0.0  # time.monotonic() of the next look
        self._host_look_at: dict[str, float] = {}  # the same, for one host's pages
        self._until = time.monotonic() + TAKE_OVER_FOR_S

    def take(self, room: int, busy: Collection[str]) -> list[tuple[dict[str, Any], str, str]]:
        """Up to `room` jobs taken over, with their URL and host key, of hosts not in `busy`;
        none when it is too soon to look again, or the run is stopped or paused."""
        message = self.part.message
        quiet = ("take_over_quiet_until", message.run_id, message.task, message.media_name)
        quiet_until = self.rt.view_cache.get(quiet, (0.0, None))[0]
        if not self._may_take(room, max(self._look_at, quiet_until)):
            return []
        rt = self.rt
        store = rt.jobs(message.collection)
        docs = store.open_to_take_over(
            message.run_id, message.task, message.media_name, message.dispatch_id, CANDIDATES
        )
        located = {id(doc): self.locate(doc) for doc in docs}
        hosts = {host for _, host in located.values() if host}
        # What another process holds or a block stops, as the store says now (this pacer
        # learns of a holder only when refused); the rest as this process paces it.
        now = rt.now()
        elsewhere = rt.hosts.not_free_until(hosts, rt.pacer.holder, now) if hosts else {}
        ready = {h: elsewhere.get(h) or rt.pacer.ready_at(h, refusals=True) for h in hosts}
        wanted = pick(
            [(doc["_id"], located[id(doc)][1]) for doc in docs],
            ready, busy, now, READY_SLACK, room,
        )  # fmt: skip
        taken = self._move(docs, wanted, now, located)
        if not taken:
            # The process's other batches of the run would most likely find nothing either.
            self._look_at = time.monotonic() + LOOK_AGAIN_S
            rt.view_cache[quiet] = (self._look_at, None)
            return []
        return [(doc, *located[id(doc)]) for doc in taken]

    def take_host(self, host: str, room: int) -> list[tuple[dict[str, Any], str, str]]:
        """Up to `room` queued jobs of `host`, which this process holds and is about to be
        done with (`ClusterHostPacer.worth_keeping`): crawled here next, the host stays with
        this process and its clock keeps running, where handing it back would cost a release,
        another process's grant and the refusals around them for about every page. Only under
        the origin grouping, whose URLs share a prefix the store can match; a host is looked
        for again `LOOK_AGAIN_S` after a look that found none of its pages."""
        pattern = origin_url_pattern(host)
        if pattern is None or not self._may_take(room, self._host_look_at.get(host, 0.0)):
            return []
        message = self.part.message
        docs = self.rt.jobs(message.collection).queued_of_host(
            message.run_id, message.task, message.media_name, message.dispatch_id, pattern, room
        )
        located = {id(doc): self.locate(doc) for doc in docs}
        mine = [doc for doc in docs if located[id(doc)][1] == host]  # the pattern may be wider
        taken = self._move(docs, [doc["_id"] for doc in mine], self.rt.now(), located)
        if not taken:
            self._host_look_at[host] = time.monotonic() + LOOK_AGAIN_S
            return []
        return [(doc, *located[id(doc)]) for doc in taken]

    def _may_take(self, room: int, look_at: float) -> bool:
        """Whether to look at all: room in the lanes, within the batch's time to take over and
        past `look_at`, room in the part's message, the run neither stopped nor paused."""
        if room <= 0 or not look_at <= time.monotonic() < self._until:
            return False
        if len(self.part.message.job_ids) + room > MAX_BATCH_JOBS:
            return False  # the part is handed over first (a message holds at most this many)
        return not (self.stop.stopped() or self.stop.paused())

    def _move(
        self,
        docs: list[dict[str, Any]],
        wanted: list[Any],
        now: datetime,
        located: dict[int, tuple[str, str]],
    ) -> list[dict[str, Any]]:
        """Move the `wanted` jobs of `docs` (their URL and host in `located`, by `id`) to this
        batch's dispatch and its current part; the ones it got (a batch that began meanwhile
        keeps its own)."""
        message = self.part.message
        deadline = expiry_deadline(now, self.rt.settings.dispatch_lease_s)
        store = self.rt.jobs(message.collection)
        got = set(store.take_over(wanted, message.dispatch_id, deadline))
        if not got:
            return []
        taken = [doc for doc in docs if doc["_id"] in got]
        for doc in taken:  # as the store has them now
            doc.pop(UNSTARTED, None)
            doc["dispatch_id"] = message.dispatch_id
        self.part.adopt(taken)
        metrics.jobs_taken_over(message.task, message.media_name, len(taken))
        log.debug(
            "jobs_taken_over",
            dispatch_id=message.dispatch_id,
            jobs=len(taken),
            hosts=sorted({located[id(doc)][1] for doc in taken})[:8],
        )
        return taken
