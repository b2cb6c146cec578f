"""The frontier, as one batch sees it: which pages the batch crawls, of which hosts, and when
it lets go of them. Everything that decides which process crawls which discovered pages of
which host, and when, is behind these verbs (URLFrontier's GetURLs, PutURLs, BlockQueueUntil
and SetDelay, in a batch's words):

- `take` / `take_host`: pages of hosts this process may crawl now, taken over from batches of
  the run that have not begun (`taking.py`);
- `prepare` then `put`: a crawled part handed to the run, its outcomes and found pages with it;
  the found pages of hosts this process holds are kept for the batch's next part, counted by
  the run before they are crawled (`keeping.py`, `parts.py`); `took` applies what came back;
- `give_back`: pages the batch will not crawl go back to wait for their hosts, woken when the
  host is given back or at the moment it is sure to be free;
- `done_with` / `again`: hosts this batch no longer needs go back at once (`pacer.settle`);
- blocking a host until a moment (a 429 or 503 answered) and raising its delay (robots.txt's
  `Crawl-delay`) are the pacer's, called by every request (`politeness/pacer.py`).

The rules are pure, in `planning/frontier_rules.py`; the writes are conditional updates of the
job store (`store/job_claims.py`) and the host store (`store/hosts.py`). One `Frontier` per
batch, used by its loop's thread only; `put` alone runs on any thread, and touches nothing of
this object (its input and output are frozen).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

from crawlsched.crawl.keeping import Keeper
from crawlsched.crawl.pages import Page
from crawlsched.crawl.parts import Handed, PartRecord, hand_over, part_dispatch_id
from crawlsched.crawl.progress import Crawled
from crawlsched.crawl.records import bounds_of
from crawlsched.crawl.resources import DispatchLease, Leases
from crawlsched.crawl.taking import Taker
from crawlsched.flow.admission import requeue
from crawlsched.flow.stop_watch import StopWatch
from crawlsched.ids import encode_id
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning import frontier_rules
from crawlsched.planning.frontier_rules import KEEP_FOR_SHARE, PartFacts
from crawlsched.resources.queueing import host_wait_key
from crawlsched.runtime import Runtime

# Work enough queued that no thread needs a part's pages: this many batches' worth of pages in
# the run's batches that have not begun.
QUEUED_BATCHES_ENOUGH = 2
# Queued pages of a host this process is about to be done with, brought here at once to keep
# it (`done_with`): a few of its delays' worth, two store commands for them all.
KEEP_HOST_PAGES = 8


class Frontier:
    def __init__(
        self,
        rt: Runtime,
        message: BatchMessage,
        jobs: list[dict[str, Any]],
        leases: Leases,
        dispatch: DispatchLease,
        stop: StopWatch,
        locate: Callable[[dict[str, Any]], Page],
        report: Callable[[ReportMessage], None],
        apply: Callable[[ReportMessage, int], object] | None,
        released: Callable[[frozenset[str]], None],
    ) -> None:
        self._rt, self._leases, self._dispatch, self._stop = rt, leases, dispatch, stop
        self._report, self._apply, self._released = report, apply, released
        self.locate = locate
        self.message = message  # the current part's
        self.root = message.dispatch_id  # the delivered message's: its parts' ids follow
        self.jobs = list(jobs)  # the documents of every page the batch held
        self.parts = 0  # handed over so far
        self.part_began = rt.env.monotonic()
        self.bounds = bounds_of(rt, rt.media(message.media_name) or {})
        alone = message.need_login or message.need_selenium or message.need_proxy  # its leases'
        settings = rt.settings
        limit_at = self.part_began + settings.crawl_time_limit_s
        self._keeper = Keeper(
            rt.pacer,
            apply is not None and settings.crawl_keep_found and not alone,
            limit_at,
            self.part_began + KEEP_FOR_SHARE * settings.crawl_time_limit_s,
            self._may_take_in,
        )
        self._taker = Taker(rt, locate) if settings.crawl_take_over and not alone else None
        self._expected: dict[int, str] = {}  # page (by id) -> host it will still ask for
        self._looked_at = -float("inf")  # monotonic: the last look at the run's queue
        self._short_of_work = True  # what it said

    def held(self) -> dict[str, str]:
        """What the batch's leases held at their last renewal, by pool (task history)."""
        return self._leases.holding()

    @property
    def keeping(self) -> bool:
        """Whether the batch keeps found pages (then its parts are recorded beside the crawl)."""
        return self._keeper.keeping

    # -- take ------------------------------------------------------------------------------

    def take(self, room: int, busy: Collection[str]) -> list[Page]:
        if self._taker is None or not self._may_take_in():
            return []
        return self._joined(self._taker.take(self.message, room, busy))

    def take_host(self, host: str) -> list[Page]:
        if self._taker is None or not self._may_take_in():
            return []
        return self._joined(self._taker.take_host(self.message, host, KEEP_HOST_PAGES))

    def _joined(self, pages: list[Page]) -> list[Page]:
        """Pages taken over join the current part: recorded, handed over and reported with
        it."""
        if pages:
            self.jobs.extend(page.doc for page in pages)
            taken = [encode_id(page.job_id) for page in pages]
            self.message = self.message.model_copy(
                update={"job_ids": [*self.message.job_ids, *taken]}
            )
            self.again(pages)
        return pages

    def _may_take_in(self) -> bool:
        return not (self._stop.stopped() or self._stop.paused())

    # -- put -------------------------------------------------------------------------------

    def part_due(self, crawled: Crawled, rest: list[Page]) -> bool:
        """Whether the part crawled so far is handed over now (`frontier_rules.part_due`)."""
        now = self._rt.env.monotonic()
        if not crawled.found:
            return False
        ahead = Counter(page.host for page in rest)
        keep = self.keepable(crawled, ahead, now)
        facts = PartFacts(
            every_s=self._rt.settings.discovery_flush_s,
            age_s=now - self.part_began,
            pages=len(crawled.updates),
            found=len(self._keeper.fresh(self.message, crawled)),
            kept=len(keep),
            rest=len(rest),
            kept_host_dry=any(host not in ahead for _, _, host in keep),
        )
        return frontier_rules.part_due(facts, lambda: self._run_short_of_work(now))

    def keepable(self, crawled: Crawled, ahead: Counter, now: float) -> list:
        return self._keeper.keepable(self.message, crawled, ahead, self.parts, now)

    def keeps_host(self, crawled: Crawled, host: str, ahead: Counter) -> bool:
        """Whether the part found pages of `host` the batch would keep (its host then stays
        with the batch until the next part brings them)."""
        keep = self.keepable(crawled, ahead, self._rt.env.monotonic())
        return any(entry[2] == host for entry in keep)

    def prepare(self, crawled: Crawled, rest: list[Page]) -> PartRecord:
        """The frozen record of the part to hand over (the loop starts a new `Crawled`)."""
        now = self._rt.env.monotonic()
        keep = self.keepable(crawled, Counter(page.host for page in rest), now)
        self._keeper.met(self.message, crawled)
        return PartRecord(
            message=self.message,
            crawled=crawled.frozen(),
            jobs=tuple(self.jobs),
            bounds=self.bounds,
            held=self._leases.holding(),
            rest=tuple(page.job_id for page in rest),
            keep=tuple(cid for cid, _, _ in keep),
            next_id=part_dispatch_id(self.root, self.parts + 1),
            began=self.part_began,
            now=now,
        )

    def put(self, record: PartRecord) -> Handed:
        """Hand a part over (any thread: it touches nothing of this object)."""
        return hand_over(self._rt, record, self._dispatch, self._report, self._apply)

    def took(self, handed: Handed) -> list[Page]:
        """The part is handed over: the next part begins; the pages kept, to crawl."""
        self.message = handed.message
        self.parts += 1
        self.part_began = self._rt.env.monotonic()
        self.jobs.extend(handed.kept)
        kept = [self.locate(doc) for doc in handed.kept]
        self.again(kept)
        return kept

    def _run_short_of_work(self, now: float) -> bool:
        """Whether the run's batches that have not begun hold too little work for the threads
        that free up meanwhile. A look is shared for a period by the process's batches of the
        same run, task and media: the answer is about the run, not the batch."""
        message, every_s = self.message, self._rt.settings.discovery_flush_s
        if now - self._looked_at < every_s:
            return self._short_of_work
        self._looked_at = now
        key = ("work_queued", message.run_id, message.task, message.media_name)
        shared = self._rt.view_cache.get(key)
        if shared is not None and now - shared[0] < every_s:
            self._short_of_work = not shared[1]
            return self._short_of_work
        task = self._rt.media_task(message.media_name, message.task) or {}
        per_batch = int(task.get("batch_limit") or self._rt.settings.default_batch_limit)
        store = self._rt.jobs(message.collection)
        queued = store.queued_at_least(
            message.run_id, message.task, message.media_name, QUEUED_BATCHES_ENOUGH * per_batch
        )
        self._rt.view_cache.put(key, now, queued)
        self._short_of_work = not queued
        return self._short_of_work

    # -- hosts the batch needs -------------------------------------------------------------

    def again(self, pages: Iterable[Page]) -> None:
        """These pages will ask for their hosts (again)."""
        new = [page for page in pages if id(page) not in self._expected]
        self._expected.update((id(page), page.host) for page in new)
        self._rt.pacer.expect(page.host for page in new)

    def done_with(self, page: Page, take_more: bool = True) -> list[Page]:
        """`page` will not ask for its host again. When it was this process's last page of a
        host it holds and paces, more of the host's queued pages are brought into the batch
        first (returned: they join the pending ones), so the host stays here; else a host no
        page of the process needs goes back now, and whoever waits for it is woken."""
        taken: list[Page] = []
        pacer = self._rt.pacer
        if take_more and page.host and pacer.worth_keeping(page.host):
            taken = self.take_host(page.host)
        expected = self._expected.pop(id(page), None) is not None
        if expected and pacer.settle(page.host):
            self._released(frozenset({host_wait_key(page.host)}))
        return taken

    def close(self) -> None:
        """The batch ended: what it still expected is forgotten (its hosts go back with the
        batch's end, `pacer.give_back`)."""
        self._rt.pacer.forget(self._expected.values())
        self._expected.clear()

    # -- give back -------------------------------------------------------------------------

    def give_back(
        self,
        job_ids: list[Any],
        reason: str,
        host_waits: Mapping[str, datetime | None],
        not_before: datetime | None,
        refused: Mapping[Any, int],
        wake_at: Callable[[frozenset[str], datetime], None],
    ) -> set[str]:
        """Put pages the batch will not crawl back to wait (`wait_for_hosts`); `refused`:
        those the host answered 429 or 503 (and how often here), counted on the page first."""
        rt, message = self._rt, self.message
        rt.jobs(message.collection).count_refusals(message.dispatch_id, refused)
        return wait_for_hosts(rt, message, job_ids, reason, host_waits, not_before, wake_at)


def wait_for_hosts(
    rt: Runtime,
    message: BatchMessage,
    job_ids: list[Any],
    reason: str,
    host_waits: Mapping[str, datetime | None],
    not_before: datetime | None,
    wake_at: Callable[[frozenset[str], datetime], None],
) -> set[str]:
    """Put a batch's pages back to wait under a dispatch id of their own: for their hosts
    (named by their wait keys, woken when one is given back) and not before the first is ready
    (blocked, paced). A wake-up is also asked for the moment one host is sure to be free (a
    holder's slice end, a block's end), so nothing waits for a holder that died or for the
    clock. Returns the keys to wake at once: hosts given back before the batch parked."""
    needs = frozenset(host_wait_key(host) for host in host_waits)
    requeue(rt, message, job_ids, reason, not_before=not_before, also_needs=needs)
    if not needs:
        return set()
    now = rt.now()
    holder = rt.pacer.holder
    # A host held elsewhere is ready when its holder's slice ends (read, not taken from the
    # refusal: a holder that gave it back since woke nobody, and it is ready now); a blocked
    # or paced one when its refusal said.
    ends = [
        until if until is not None else (rt.hosts.wait_for(host, holder, now) or now)
        for host, until in host_waits.items()
    ]
    when = min(ends)
    if when <= now:
        return set(needs)
    wake_at(needs, when)
    return set()
