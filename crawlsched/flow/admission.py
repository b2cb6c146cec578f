"""The gatekeepers: batches wait for the accounts and nodes they need, and are admitted in order.

Every batch that needs a resource is *parked* first (its jobs stay claimed) and then an
admission pass runs over the waiting batches of the pools it needs. A pass admits batches in
the order of `resources.queueing` until a pool runs short; what it cannot admit keeps waiting.
Passes are woken by a new batch, by every lease release (the crawl actor sends a wake-up for
the pools it frees) and by the ticker's sweep, which also starves batches waiting past their
bound. Waiting is a document, never a delayed message: RabbitMQ would redeliver a message left
unacked past its consumer timeout.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime

from crawlsched import metrics
from crawlsched.flow.pausing import hold_batch
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning.outcomes import PHASE_OUTCOMES, Outcome
from crawlsched.planning.run_names import schedule_id_of
from crawlsched.resources.bindings import ProxyNeed, group_of
from crawlsched.resources.pools import Need
from crawlsched.resources.queueing import (
    Load,
    describe_keys,
    next_to_admit,
    pool_keys,
    wait_deadline,
)
from crawlsched.resources.rules import Lease
from crawlsched.runtime import Runtime
from crawlsched.store.job_claims import expiry_deadline
from crawlsched.store.waiting import as_waiting_batch

log = get_logger(__name__)


def keys_of(message: BatchMessage) -> frozenset[str]:
    return pool_keys(
        message.need_login, message.need_selenium, message.media_name, message.need_proxy
    )


def need_of(rt: Runtime, message: BatchMessage, now: datetime) -> Need:
    """What the batch leases: its account and node, and when its media goes out through
    proxies, a proxy of the media's group on its domain's tier (a due probe of a cheaper
    tier is taken by this batch)."""
    proxy = None
    if message.need_proxy:
        group = group_of(rt.media(message.media_name))
        tier = rt.proxies.tier_for(message.media_name, group, now)
        proxy = ProxyNeed(group, tier)
    return Need(message.need_login, message.need_selenium, message.media_name, proxy, message.task)


def park(
    rt: Runtime,
    message: BatchMessage,
    now: datetime,
    not_before: datetime | None = None,
    also_needs: frozenset[str] = frozenset(),
) -> dict:
    """Make a batch wait: for the pools it needs, and `also_needs` (a held host); until
    `not_before` at least (a host blocked or paced until then). Idempotent per dispatch id (a
    redelivery finds the first park)."""
    store = rt.jobs(message.collection)
    max_wait_s = rt.max_wait_s(schedule_id_of(message.run_id))
    first = message.first_parked_at or now
    # Never later than a fresh wait would end: the date comes from a message.
    wait_until = min(wait_deadline(first, max_wait_s), wait_deadline(now, max_wait_s))
    message = message.model_copy(update={"first_parked_at": first})
    doc = rt.waiting.park(
        {
            "_id": message.dispatch_id,
            "run_id": message.run_id,
            "collection": message.collection,
            "task": message.task,
            "media_name": message.media_name,
            "category": message.category.value,
            "needs": sorted(keys_of(message) | also_needs),
            "jobs": len(message.job_ids),
            "enqueued_at": min(first, now),
            "wait_until": wait_until,
            "message": message.payload(),
            "not_before": not_before,
            **store.priority_of(message.dispatch_id),
        }
    )
    # The wait bound governs a waiting batch, not the dispatch lease: push the jobs' deadline
    # past it so the expiry sweep never reclaims a batch that is only waiting its turn.
    store.extend_lease(
        message.dispatch_id, expiry_deadline(doc["wait_until"], rt.settings.dispatch_lease_s)
    )
    return doc


def admit(
    rt: Runtime,
    message: BatchMessage,
    forward: Callable[[BatchMessage], None],
    first_delivery: bool = True,
) -> int:
    """A new batch from the planner: admitted at once when no batch waits for what it needs
    and the pools have room; otherwise parked, then admitted in its turn.

    Going straight through saves the waiting document's round (park, take, remove) and the
    pass's reads, which is nearly every batch while the pools have room. It is only for a first
    delivery: a redelivered or retried message may come from an attempt that leased and then
    died, so it frees what that attempt may hold and takes the parked way.
    """
    metrics.batch_parked(message.category, message.media_name)
    keys = keys_of(message)
    now = rt.now()
    if first_delivery and not rt.waiting.anyone_waiting(keys):
        if _admit_at_once(rt, message, forward, now):
            return 1
    elif not first_delivery:
        rt.leases.release_holder(message.dispatch_id, now)
    park(rt, message, now)
    return admit_waiting(rt, keys, forward)


def _admit_at_once(
    rt: Runtime, message: BatchMessage, forward: Callable[[BatchMessage], None], now: datetime
) -> bool:
    """Lease and forward a batch nobody waits ahead of; False if a pool is short.

    No stop check here: the planner checked the run moments ago, just before it sent this
    batch, and the crawl actor checks again before it crawls anything (then gives the jobs
    back as stopped and the leases back). A batch that waited is checked when it is taken."""
    grant = rt.pools.acquire(need_of(rt, message, now), message.dispatch_id, now, message.run_id)
    if grant.leases is None:
        return False
    # Its wait bound counts from here, as if it had been parked now: if it loses its
    # resources mid-batch, the rest waits no longer than a batch parked now would.
    message = message.model_copy(update={"first_parked_at": message.first_parked_at or now})
    _launch(rt, message, grant.leases, 0.0, now, forward)
    return True


def _launch(
    rt: Runtime,
    message: BatchMessage,
    leases: list[Lease],
    waited_s: float,
    now: datetime,
    forward: Callable[[BatchMessage], None],
) -> None:
    """Send an admitted batch on with its leases; on any failure the leases go back."""
    try:
        # The dispatch lease now covers the crawl, not the wait.
        rt.jobs(message.collection).extend_lease(
            message.dispatch_id, expiry_deadline(now, rt.settings.dispatch_lease_s)
        )
        rt.assignments.record(
            message.run_id,
            message.dispatch_id,
            message.task,
            message.media_name,
            len(message.job_ids),
            leases,
            waited_s,
            now,
        )
        forward(
            message.model_copy(
                update={
                    "lease_ids": [lease.lease_id for lease in leases],
                    "stages_ms": {**message.stages_ms, "wait": round(waited_s * 1000, 1)},
                }
            )
        )
    except BaseException:
        rt.pools.release(leases, now)
        raise
    metrics.batch_admitted(message.category, message.media_name, waited_s)
    log.info(
        "batch_admitted",
        dispatch_id=message.dispatch_id,
        run_id=message.run_id,
        waited_s=round(waited_s, 3),
        leases=len(leases),
    )


def admit_waiting(
    rt: Runtime, keys: Iterable[str] | None, forward: Callable[[BatchMessage], None]
) -> int:
    """One admission pass over the batches waiting for any of `keys` (None: all of them)."""
    now = rt.now()
    waiting = [as_waiting_batch(doc) for doc in rt.waiting.candidates(keys, now)]
    if not waiting:
        return 0
    load = Load.of(rt.leases.live_leases(now))
    short: set[str] = set()
    admitted = 0
    while (batch := next_to_admit(waiting, load, short)) is not None:
        waiting.remove(batch)
        token = uuid.uuid4().hex
        doc = rt.waiting.take(batch.dispatch_id, token, now)
        if doc is None:
            continue  # another pass has it
        message = BatchMessage.parse(doc["message"])
        if (hold := rt.runs.hold_state(message.run_id, message.task)) == "stop":
            # Stopped while it waited: lease nothing; the crawl actor gives its jobs back as
            # stopped and reports them, as it does for any batch of a stopped run.
            forward(message.model_copy(update={"lease_ids": []}))
            rt.waiting.remove(batch.dispatch_id, token)
            continue
        if hold == "pause":
            # Paused while it waited: lease nothing, its jobs wait in their run instead.
            hold_batch(rt, message)
            rt.waiting.remove(batch.dispatch_id, token)
            continue
        if doc.get("takes", 1) > 1:
            # Taken before: free what an earlier pass may have leased before it died.
            rt.leases.release_holder(message.dispatch_id, now)
        grant = rt.pools.acquire(
            need_of(rt, message, now), message.dispatch_id, now, message.run_id
        )
        if grant.leases is None:
            short.add(grant.short or "")
            rt.waiting.untake(batch.dispatch_id, token, grant.short)
            continue
        # Never negative: `now` was read when this pass began, and a batch parked by another
        # thread since then has a later `enqueued_at` (a negative wait made the crawl message
        # invalid, dead-lettering a batch whose jobs then stayed running until lease expiry).
        waited_s = max(0.0, (now - batch.enqueued_at).total_seconds())
        try:
            _launch(rt, message, grant.leases, waited_s, now, forward)
        except BaseException:
            rt.waiting.untake(batch.dispatch_id, token, None)
            raise
        # A crash right here re-admits the batch later: the crawl actor then finds its jobs
        # already recorded and its report already counted, so nothing runs or counts twice.
        rt.waiting.remove(batch.dispatch_id, token)
        load = load.plus(batch, len(grant.leases))
        admitted += 1
    return admitted


def starve(
    rt: Runtime,
    message: BatchMessage,
    report: Callable[[ReportMessage], None],
    reason: str,
    pools: Iterable[str] = (),
) -> int:
    """Give the jobs back untouched (pending, same attempt count) and count them starved.

    Returns how many jobs of this dispatch are starved."""
    store = rt.jobs(message.collection)
    store.release(message.dispatch_id)
    # Read back rather than trust our own count: a redelivery must report the same numbers.
    counts = store.outcomes_of(message.dispatch_id, PHASE_OUTCOMES["admit"])
    jobs = counts.get(Outcome.STARVED, 0)
    log.warning("batch_starved", dispatch_id=message.dispatch_id, jobs=jobs, reason=reason)
    if counts:
        rt.runs.record_shortage(message.run_id, message.dispatch_id, jobs, reason, rt.now())
        record_starved_miss(rt, message.run_id, pools)
        report(
            ReportMessage(
                run_id=message.run_id,
                dispatch_id=message.dispatch_id,
                collection=message.collection,
                phase="admit",
                stages_ms=dict(message.stages_ms),
            )
        )
    return jobs


def record_starved_miss(rt: Runtime, run_id: str, pools: Iterable[str]) -> None:
    """The run's fire time also counts as missed (reason starved), with the pools that ran
    short (`account:<media>`, `selenium`)."""
    run = rt.runs.get(run_id)
    schedule = rt.schedules.get(run["schedule_id"]) if run else None
    if run is None or schedule is None:
        return
    new = False
    for pool in sorted(pools) or ["unknown"]:
        new |= rt.missed_runs.record_starved(schedule, run["fire_at"], run_id, pool, rt.now())
    if new:
        metrics.missed_runs("starved")


def starve_overdue(rt: Runtime, report: Callable[[ReportMessage], None]) -> int:
    """Batches that waited past their bound give their jobs back, with the pool that ran short."""
    now = rt.now()
    starved = 0
    for doc in rt.waiting.overdue(now):
        token = uuid.uuid4().hex
        taken = rt.waiting.take(doc["_id"], token, now)
        if taken is None:
            continue
        waited = (now - taken["enqueued_at"]).total_seconds()
        short = [taken["last_short"]] if taken.get("last_short") else taken["needs"]
        reason = f"waited {waited:.0f}s for the {describe_keys(short)}"
        message = BatchMessage.parse(taken["message"])
        jobs = starve(rt, message, report, reason, short)
        metrics.batch_starved(short[0], message.task, message.media_name, jobs)
        rt.waiting.remove(doc["_id"], token)
        starved += 1
    return starved


def requeue(
    rt: Runtime,
    message: BatchMessage,
    job_ids: list,
    reason: str,
    not_before: datetime | None = None,
    also_needs: frozenset[str] = frozenset(),
) -> BatchMessage | None:
    """Put the rest of an interrupted batch back to wait, under a dispatch id of its own.

    A new id because the interrupted dispatch still reports the jobs it finished, under its own
    report key; the rest will be reported by the new dispatch once it runs.
    """
    if not job_ids:
        return None
    new_dispatch = uuid.uuid4().hex
    store = rt.jobs(message.collection)
    # Until it begins again, a running batch of the run may take its jobs over when their
    # hosts are free (a batch with an account, a node or a proxy keeps them: they are its
    # leases').
    open_to_take_over = not (message.need_login or message.need_selenium or message.need_proxy)
    moved = store.reassign(message.dispatch_id, new_dispatch, job_ids, open_to_take_over)
    if moved == 0:
        return None
    kept = set(store.claimed_ids(new_dispatch))
    pairs = zip(message.job_ids, message.decoded_job_ids(), strict=True)
    rest = message.model_copy(
        update={
            "dispatch_id": new_dispatch,
            "job_ids": [text for text, job_id in pairs if job_id in kept],
            "lease_ids": [],
        }
    )
    park(rt, rest, rt.now(), not_before, also_needs)
    metrics.batch_requeued(message.task, message.media_name)
    log.warning(
        "batch_requeued",
        dispatch_id=message.dispatch_id,
        new_dispatch_id=new_dispatch,
        jobs=moved,
        reason=reason,
    )
    return rest
