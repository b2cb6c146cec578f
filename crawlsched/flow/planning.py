"""The planner: audit, aggregate, parse, batch, claim, dispatch; then close the run's planning."""

from __future__ import annotations

import functools
import itertools
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from crawlsched import metrics
from crawlsched.errors import BadJobDocument
from crawlsched.events import emit
from crawlsched.flow.coordination import Notify, finish_if_done
from crawlsched.flow.stop_watch import StoppedRunGuard
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.batching import Batch, BatchCutter
from crawlsched.planning.due import Category, parse_due_job
from crawlsched.planning.problems import Problem, diagnose
from crawlsched.planning.run_names import child_run_id, run_id_for
from crawlsched.runtime import Runtime
from crawlsched.schedules.spec import MAX_SHARDS
from crawlsched.store.job_claims import ClaimRequest, expiry_deadline
from crawlsched.store.jobs import MongoJobStore

log = get_logger(__name__)


# Claim in bulks of about this many jobs: few commands per job, little held in memory.
CLAIM_CHUNK_JOBS = 1000
SET_ASIDE_CHUNK = 1000
# A batch is claimed for this long only until RabbitMQ confirms its message; then its jobs get
# the whole dispatch lease. A pass that dies in between (kill -9, a lost machine) leaves claims
# the ticker takes back within a minute, not after the dispatch lease (15 minutes by default).
UNSENT_LEASE_S = 60.0


@dataclass(frozen=True)
class ClaimDeadlines:
    """Until when a pass's claims hold: `unsent` until their batch is confirmed sent, `sent`
    once it is."""

    unsent: datetime
    sent: datetime

    @classmethod
    def from_now(cls, now: datetime, dispatch_lease_s: float) -> ClaimDeadlines:
        return cls(
            unsent=expiry_deadline(now, min(UNSENT_LEASE_S, dispatch_lease_s)),
            sent=expiry_deadline(now, dispatch_lease_s),
        )


def claim_and_dispatch(
    store: MongoJobStore,
    batches: list[Batch],
    run_id: str | Iterator[str],
    deadlines: ClaimDeadlines,
    dispatch: Callable[[BatchMessage], None],
    stats: Counter,
    only: dict | None = None,
) -> None:
    """Claim batches in bulks of about CLAIM_CHUNK_JOBS jobs, then dispatch what was claimed."""
    chunk: list[Batch] = []
    for batch in batches:
        chunk.append(batch)
        if sum(len(b.job_ids) for b in chunk) >= CLAIM_CHUNK_JOBS:
            _claim_chunk(store, chunk, run_id, deadlines, dispatch, stats, only)
            chunk = []
    if chunk:
        _claim_chunk(store, chunk, run_id, deadlines, dispatch, stats, only)


def _claim_chunk(
    store: MongoJobStore,
    batches: list[Batch],
    run_id: str | Iterator[str],
    deadlines: ClaimDeadlines,
    dispatch: Callable[[BatchMessage], None],
    stats: Counter,
    only: dict | None = None,
) -> None:
    """`run_id` is the run, or a cycle over the child runs of a multi-process run: batches are
    dealt to the children in turn (one claim command per child touched). Claimed until
    `deadlines.unsent`; one more command gives the batches sent the whole lease."""
    requests = [
        ClaimRequest(
            uuid.uuid4().hex,
            batch.job_ids,
            batch.category == Category.NEITHER and not batch.need_proxy,
        )
        for batch in batches
    ]
    owners = [run_id if isinstance(run_id, str) else next(run_id) for _ in batches]
    claimed: dict[str, list] = {}
    for owner in dict.fromkeys(owners):
        mine = [r for r, o in zip(requests, owners, strict=True) if o == owner]
        claimed.update(store.claim(mine, owner, deadlines.unsent, only))
    sent: list[str] = []
    try:
        for index, (batch, request, owner) in enumerate(
            zip(batches, requests, owners, strict=True)
        ):
            job_ids = claimed[request.dispatch_id]
            stats["lost_to_other_planner"] += len(batch.job_ids) - len(job_ids)
            if not job_ids:
                continue
            try:
                dispatch(BatchMessage.of(batch, owner, request.dispatch_id, job_ids))
            except BaseException:
                # Not sent (RabbitMQ refused or never confirmed it, even after reconnecting):
                # give this batch and the claimed ones after it back now, and fail the plan
                # loudly; its retry plans them again.
                unsent = [r.dispatch_id for r in requests[index:]]
                given_back = store.give_back_unsent(unsent)
                log.error("batch_not_sent", dispatch_id=request.dispatch_id, given_back=given_back)
                raise
            sent.append(request.dispatch_id)
            # Counted only once sent: a batch that never left is no batch dispatched.
            stats["claimed"] += len(job_ids)
            stats[f"batches.{batch.category.value}"] += 1
            stats[f"jobs.{batch.category.value}"] += len(job_ids)
            metrics.batch_dispatched(batch.task, batch.media_name, batch.category, len(job_ids))
    finally:
        # Also when a later batch failed: the ones that left are on their way.
        store.confirm_sent(sent, deadlines.sent)


def plan_collection(
    rt: Runtime,
    store: MongoJobStore,
    run_id: str | Iterator[str],
    now: datetime,
    dispatch: Callable[[BatchMessage], None],
    stats: Counter,
    targets: list[str] | None = None,
) -> None:
    """Stream each task's due jobs (parse, cut into batches, claim, dispatch), then audit.

    Batches leave as they fill and claims go in bulks of about CLAIM_CHUNK_JOBS, so neither
    memory nor any reply grows with the number of due jobs. With a claim cap
    (`max_claim_per_sweep`), the sweep stops reading once the run has claimed that many; the
    rest stay due for the next sweep. With `targets` (a target-set schedule) only the jobs of
    those targets are read and claimed.
    """
    deadlines = ClaimDeadlines.from_now(now, rt.settings.dispatch_lease_s)
    fields = rt.target_fields(store.collection_name)
    cap = rt.settings.max_claim_per_sweep
    for task in store.due_tasks(now, targets):
        cutter = BatchCutter(store.collection_name, task, rt.settings.default_batch_limit)
        full: list[Batch] = []
        bad: list[Problem] = []
        taken = 0  # jobs put in a batch for this task so far
        for row in store.due_rows(task, now, fields, targets):
            if cap and stats["claimed"] + taken >= cap:
                stats["capped_at"] = cap  # the run stopped claiming here
                break
            try:
                job = parse_due_job(row, fields)
            except BadJobDocument as e:
                bad.append(Problem(e.job_id, e.reason, set_aside=True))
                if len(bad) >= SET_ASIDE_CHUNK:
                    stats["set_aside"] += store.set_aside(bad, now)
                    bad = []
                continue
            taken += 1
            if (batch := cutter.add(job)) is not None:
                full.append(batch)
                if sum(len(b.job_ids) for b in full) >= CLAIM_CHUNK_JOBS:
                    claim_and_dispatch(store, full, run_id, deadlines, dispatch, stats)
                    taken -= sum(len(b.job_ids) for b in full)
                    full = []
        claim_and_dispatch(store, [*full, *cutter.flush()], run_id, deadlines, dispatch, stats)
        stats["set_aside"] += store.set_aside(bad, now)
        if cap and stats["claimed"] >= cap:
            break
    # The audit finds only jobs the pipeline can never return, so it changes nothing above:
    # run it last, and the first batches leave a whole collection scan sooner.
    problems = [diagnose(row) for row in store.audit(now)]
    stats["set_aside"] += store.set_aside([p for p in problems if p.set_aside], now)
    stats["waiting_on_operator"] += sum(1 for p in problems if not p.set_aside)


def shards_of(schedule: dict | None) -> int:
    """How many child runs a firing fans out into (`shards` on the schedule; 1: no children)."""
    shards = (schedule or {}).get("shards", 1)
    if not isinstance(shards, int) or isinstance(shards, bool) or not 1 <= shards <= MAX_SHARDS:
        log.warning("schedule_shards_ignored", schedule_id=(schedule or {}).get("_id"))
        return 1
    return shards


def plan_run(
    rt: Runtime,
    schedule_id: str,
    fire_at: datetime,
    dispatch: Callable[[BatchMessage], None],
    notify: Notify | None = None,
) -> dict | None:
    """Plan one firing of a schedule. Idempotent: a second delivery finds planning closed.

    A delivery that crashed half-way left some batches claimed; this one plans the rest, and the
    count it closes planning with is read back from the jobs themselves, so it includes both.
    A schedule with `shards: N` makes a multi-process run: N child runs share its batches and
    the parent ends when all of them have ended.
    """
    started = time.perf_counter()
    now = rt.now()
    run_id = run_id_for(schedule_id, fire_at)
    end = functools.partial(finish_if_done, notify=notify) if notify else finish_if_done
    run = rt.runs.open(run_id, schedule_id, fire_at, now)
    rt.schedules.fire_planned(schedule_id, fire_at)
    schedule = rt.schedules.get(schedule_id)
    # A deleted schedule plans nothing, even from a message sent before the deletion.
    live = schedule is not None and schedule.get("state") != "deleted"
    collections = schedule["collections"] if live else []
    targets = schedule.get("targets") if live else None
    if not run["planning"]:
        # A crash may have come between closing the parent and closing its children.
        children = [c["_id"] for c in rt.runs.children_of(run_id) if c["planning"]]
        _close_children(rt, children, collections, end)
        log.info("plan_skipped_already_planned", run_id=run_id)
        return None
    shards = shards_of(schedule)
    children = [child_run_id(run_id, n) for n in range(1, shards + 1)] if shards > 1 else []
    for child in children:
        rt.runs.open(child, schedule_id, fire_at, now, parent_id=run_id)
    owners: str | Iterator[str] = itertools.cycle(children) if children else run_id
    stats: Counter = Counter()
    guarded = StoppedRunGuard(rt, run_id, dispatch)
    for collection in collections:
        plan_collection(rt, rt.jobs(collection), owners, now, guarded.dispatch, stats, targets)
    stats["planning_ms"] = round((time.perf_counter() - started) * 1000, 1)
    planned = sum(rt.jobs(c).count_claimed_for_run(r) for c in collections for r in children)
    if not children:
        planned = sum(rt.jobs(c).count_claimed_for_run(run_id) for c in collections)
    closed = rt.runs.close_planning(
        run_id, planned, stats, rt.now(), children=len(children) if children else None
    )
    log.info("run_planned", run_id=run_id, planned=planned, **{k: v for k, v in stats.items()})
    if closed is not None:
        rt.runs.add_stage_time(run_id, "plan", stats["planning_ms"])
        metrics.run_planned(stats["planning_ms"] / 1000, (rt.now() - fire_at).total_seconds())
        emit(rt, "RunStarted", run_id=run_id, schedule_id=schedule_id, planned=planned)
    _close_children(rt, children, collections, end)
    if closed is not None:
        closed = rt.runs.get(run_id) or closed  # its children may have ended it already
        end(rt, closed)
    return closed


def _close_children(
    rt: Runtime, children: list[str], collections: list[str], end: Callable[..., bool]
) -> None:
    for child in children:
        planned = sum(rt.jobs(c).count_claimed_for_run(child) for c in collections)
        closed = rt.runs.close_planning(child, planned, {}, rt.now())
        if closed is not None:
            emit(
                rt,
                "RunStarted",
                run_id=child,
                schedule_id=closed.get("schedule_id"),
                parent_id=closed.get("parent_id"),
                planned=planned,
            )
            end(rt, closed)
