"""The planner: audit, aggregate, parse, batch, claim, dispatch; then close the run's planning."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime

from crawlsched import metrics
from crawlsched.errors import BadJobDocument
from crawlsched.flow.coordination import finish_if_done
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.batching import Batch, BatchCutter
from crawlsched.planning.due import parse_due_job
from crawlsched.planning.problems import Problem, diagnose
from crawlsched.runtime import Runtime
from crawlsched.store.jobs import ClaimRequest, MongoJobStore, expiry_deadline
from crawlsched.store.runs import run_id_for

log = get_logger(__name__)


# Claim in bulks of about this many jobs: few commands per job, little held in memory.
CLAIM_CHUNK_JOBS = 1000
SET_ASIDE_CHUNK = 1000


def _claim_and_dispatch(
    store: MongoJobStore,
    batches: list[Batch],
    run_id: str,
    deadline: datetime,
    dispatch: Callable[[BatchMessage], None],
    stats: Counter,
) -> None:
    """Claim batches in bulks of about CLAIM_CHUNK_JOBS jobs, then dispatch what was claimed."""
    chunk: list[Batch] = []
    for batch in batches:
        chunk.append(batch)
        if sum(len(b.job_ids) for b in chunk) >= CLAIM_CHUNK_JOBS:
            _claim_chunk(store, chunk, run_id, deadline, dispatch, stats)
            chunk = []
    if chunk:
        _claim_chunk(store, chunk, run_id, deadline, dispatch, stats)


def _claim_chunk(
    store: MongoJobStore,
    batches: list[Batch],
    run_id: str,
    deadline: datetime,
    dispatch: Callable[[BatchMessage], None],
    stats: Counter,
) -> None:
    requests = [ClaimRequest(uuid.uuid4().hex, batch.job_ids) for batch in batches]
    claimed = store.claim(requests, run_id, deadline)
    for batch, request in zip(batches, requests, strict=True):
        job_ids = claimed[request.dispatch_id]
        stats["lost_to_other_planner"] += len(batch.job_ids) - len(job_ids)
        if job_ids:
            stats["claimed"] += len(job_ids)
            stats[f"batches.{batch.category.value}"] += 1
            stats[f"jobs.{batch.category.value}"] += len(job_ids)
            metrics.batch_dispatched(batch.task, batch.media_name, batch.category, len(job_ids))
            dispatch(BatchMessage.of(batch, run_id, request.dispatch_id, job_ids))


def plan_collection(
    rt: Runtime,
    store: MongoJobStore,
    run_id: str,
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
    deadline = expiry_deadline(now, rt.settings.dispatch_lease_s)
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
                    _claim_and_dispatch(store, full, run_id, deadline, dispatch, stats)
                    taken -= sum(len(b.job_ids) for b in full)
                    full = []
        _claim_and_dispatch(store, [*full, *cutter.flush()], run_id, deadline, dispatch, stats)
        stats["set_aside"] += store.set_aside(bad, now)
        if cap and stats["claimed"] >= cap:
            break
    # The audit finds only jobs the pipeline can never return, so it changes nothing above:
    # run it last, and the first batches leave a whole collection scan sooner.
    problems = [diagnose(row) for row in store.audit(now)]
    stats["set_aside"] += store.set_aside([p for p in problems if p.set_aside], now)
    stats["waiting_on_operator"] += sum(1 for p in problems if not p.set_aside)


def plan_run(
    rt: Runtime,
    schedule_id: str,
    fire_at: datetime,
    dispatch: Callable[[BatchMessage], None],
) -> dict | None:
    """Plan one firing of a schedule. Idempotent: a second delivery finds planning closed.

    A delivery that crashed half-way left some batches claimed; this one plans the rest, and the
    count it closes planning with is read back from the jobs themselves, so it includes both.
    """
    started = time.perf_counter()
    now = rt.now()
    run_id = run_id_for(schedule_id, fire_at)
    run = rt.runs.open(run_id, schedule_id, fire_at, now)
    if not run["planning"]:
        log.info("plan_skipped_already_planned", run_id=run_id)
        return None
    schedule = rt.schedules.get(schedule_id)
    # A deleted schedule plans nothing, even from a message sent before the deletion.
    live = schedule is not None and schedule.get("state") != "deleted"
    collections = schedule["collections"] if live else []
    targets = schedule.get("targets") if live else None
    stats: Counter = Counter()
    for collection in collections:
        plan_collection(rt, rt.jobs(collection), run_id, now, dispatch, stats, targets)
    planned = sum(rt.jobs(c).count_claimed_for_run(run_id) for c in collections)
    stats["planning_ms"] = round((time.perf_counter() - started) * 1000, 1)
    closed = rt.runs.close_planning(run_id, planned, stats, rt.now())
    log.info("run_planned", run_id=run_id, planned=planned, **{k: v for k, v in stats.items()})
    if closed is not None:
        rt.runs.add_stage_time(run_id, "plan", stats["planning_ms"])
        metrics.run_planned(stats["planning_ms"] / 1000, (rt.now() - fire_at).total_seconds())
        finish_if_done(rt, closed)
    return closed
