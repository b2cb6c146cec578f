"""Pausing and resuming a run.

A pause is a flag on the run (`paused`), read by everything that could send a batch to a crawl
actor, like a stop: the planner and the run's own pass before each dispatch, the gatekeepers
when they take a batch that waited, the crawl actor before it starts a batch. Whatever sees it
gives the batch's jobs back to wait in their run (`MongoHeldJobStore.hold`): pending, no
outcome, still counted outstanding, so a paused run cannot end while pages wait. Batches
waiting for an account or a node are taken back by the pause itself (they would otherwise
starve while it lasts). Batches already crawling finish and report; what they discover is
recorded and counted, and waits too (the run's pass plans nothing while it is paused).

Resuming lifts the flag and asks for the run's pass in every job collection: the waiting jobs
are planned again, with the usual batching and admission.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.errors import RunNotFound, RunRefused
from crawlsched.flow.coordination import Notify, finish_if_done
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.run_control import pause_refusal, resume_refusal
from crawlsched.planning.run_names import ENDED
from crawlsched.runtime import Runtime

log = get_logger(__name__)

PlanPass = Callable[[str, str], None]  # asks for the run's own pass of (run, collection)


def hold_batch(rt: Runtime, message: BatchMessage) -> int:
    """Give a batch of a paused run back to wait in its run; how many jobs it held."""
    held = rt.held_jobs(message.collection).hold(message.dispatch_id, message.run_id)
    log.info("batch_held_paused", dispatch_id=message.dispatch_id, run_id=message.run_id, jobs=held)
    return held


@dataclass
class PauseSummary:
    runs: list[str] = field(default_factory=list)  # the runs this call changed
    already: bool = False  # nothing changed: it was already so
    held_batches: int = 0
    held_jobs: int = 0


def _open_family(rt: Runtime, run_id: str) -> tuple[dict, list[str]]:
    run = rt.runs.get(run_id)
    if run is None:
        raise RunNotFound(run_id)
    children = [c["_id"] for c in rt.runs.children_of(run_id) if c["state"] not in ENDED]
    return run, [run_id, *children]


def pause_run(rt: Runtime, run_id: str) -> PauseSummary:
    """Pause a run and its child runs; a paused run is left as it is (`already`)."""
    run, family = _open_family(rt, run_id)
    if (refusal := pause_refusal(run)) is not None:
        raise RunRefused(refusal)
    now = rt.now()
    summary = PauseSummary(runs=[r for r in family if rt.runs.set_paused(r, now) is not None])
    summary.already = not summary.runs and bool(run.get("paused"))
    for paused in summary.runs:
        for doc in rt.waiting.for_run(paused):
            token = uuid.uuid4().hex
            taken = rt.waiting.take(doc["_id"], token, now)
            if taken is None:
                continue  # being admitted right now: the gatekeeper sees the pause
            summary.held_jobs += hold_batch(rt, BatchMessage.parse(taken["message"]))
            rt.waiting.remove(doc["_id"], token)
            summary.held_batches += 1
    log.info("run_paused", runs=summary.runs, held_jobs=summary.held_jobs)
    return summary


def resume_run(
    rt: Runtime, run_id: str, plan_pass: PlanPass, notify: Notify | None = None
) -> PauseSummary:
    """Lift the pause of a run and its child runs and plan what waited in them."""
    run, family = _open_family(rt, run_id)
    if (refusal := resume_refusal(run)) is not None:
        raise RunRefused(refusal)
    now = rt.now()
    summary = PauseSummary(runs=[r for r in family if rt.runs.clear_paused(r, now) is not None])
    summary.already = not summary.runs
    for resumed in summary.runs:
        for collection in JOB_COLLECTIONS:
            summary.held_jobs += rt.held_jobs(collection).held(resumed)
            plan_pass(resumed, collection)
    end = {"notify": notify} if notify else {}
    for resumed in reversed(summary.runs):  # children first: a child's end may end its parent
        if (fresh := rt.runs.get(resumed)) is not None:
            finish_if_done(rt, fresh, **end)
    log.info("run_resumed", runs=summary.runs, waiting_jobs=summary.held_jobs)
    return summary
