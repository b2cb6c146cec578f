"""The run's own pass: plan a run's discovered jobs as they are released, and its jobs the
machinery failed once their backoff has passed.

The coordinator releases a dispatch's children once their run counts them, then asks for this
pass (`plan_children`); the ticker asks again for any run whose released children nobody
planned for a while (a lost message), and for any run with jobs due for another try after a
machinery failure (`ticking.reclaim_expired` gave them back to the run). The pass reads the
same pipeline as a sweep, restricted to that run's work (`run_work_filter`), and claims it for
the run — claims are atomic, so two passes at once split the jobs between them and never plan
one twice. Jobs of a stopped run are given back as stopped (counted ended), so a stop ends a
growing run too.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.flow.coordination import Notify, finish_if_done
from crawlsched.flow.planning import ClaimDeadlines, claim_and_dispatch
from crawlsched.flow.stop_watch import StoppedRunGuard
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage
from crawlsched.planning.batching import Batch, BatchCutter
from crawlsched.planning.due import parse_due_job
from crawlsched.planning.host_spread import origin_of, spread_over_hosts
from crawlsched.planning.run_names import ENDED, is_stopping
from crawlsched.runtime import Runtime
from crawlsched.store.pipeline import run_work_filter

log = get_logger(__name__)


def plan_discovered(
    rt: Runtime,
    run_id: str,
    collection: str,
    dispatch: Callable[[BatchMessage], None],
    notify: Notify | None = None,
    end_run: bool = True,
) -> int:
    """Claim and dispatch the run's released children in `collection`; returns how many."""
    run = rt.runs.get(run_id)
    if run is None or run["state"] in ENDED:
        return 0
    if run.get("paused") and not is_stopping(run):
        return 0  # its work waits in the run; resuming asks for this pass again
    store = rt.jobs(collection)
    now = rt.now()
    fields = rt.target_fields(collection)
    deadlines = ClaimDeadlines.from_now(now, rt.settings.dispatch_lease_s)
    stats: Counter = Counter()
    guarded = StoppedRunGuard(rt, run_id, dispatch)
    only = run_work_filter(run_id, now)
    for task in store.due_tasks(now, match=only):
        cutter = BatchCutter(collection, task, rt.settings.default_batch_limit)
        batches: list[Batch] = []
        due = (parse_due_job(row, fields) for row in store.due_rows(task, now, fields, match=only))
        # Discovered pages come in clumps of one host: dealt over their hosts, each batch's
        # thread has other hosts to crawl while one host's delay runs.
        for job in spread_over_hosts(due, lambda j: origin_of(j.target)):
            if (batch := cutter.add(job)) is not None:
                batches.append(batch)
        batches.extend(cutter.flush())
        claim_and_dispatch(store, batches, run_id, deadlines, guarded.dispatch, stats, only)
    if stats["claimed"]:
        log.info("children_planned", run_id=run_id, collection=collection, jobs=stats["claimed"])
    # Children given back as stopped may have been the last thing the run waited for.
    end = functools.partial(finish_if_done, notify=notify) if notify else finish_if_done
    if end_run and (fresh := rt.runs.get(run_id)) is not None:
        end(rt, fresh)
    return stats["claimed"]


# A run whose released children wait longer than this for a pass gets one from the ticker.
SWEEP_AFTER_S = 20.0


def sweep_waiting_children(rt: Runtime, send: Callable[[str, str], None]) -> int:
    """Ask for a run's pass wherever released children were left unplanned (a lost
    `plan_children` message) or jobs the machinery failed are due again (two reads per job
    collection when there are none)."""
    sent = 0
    now = rt.now()
    for collection in JOB_COLLECTIONS:
        children = rt.children(collection)
        waiting = children.runs_left_waiting(now, SWEEP_AFTER_S)
        for run_id in sorted({*waiting, *rt.jobs(collection).redo_runs_due(now)}):
            send(run_id, collection)
            sent += 1
    return sent


def _never(message: BatchMessage) -> None:
    raise RuntimeError(f"a stopped run's children pass tried to dispatch {message.dispatch_id}")


def stop_children_of(rt: Runtime, run_id: str, notify: Notify | None = None) -> int:
    """A whole run was stopped: give its released, unplanned children back as stopped now
    (the guard releases every batch, so nothing is dispatched). The stop ends the run."""
    return sum(
        plan_discovered(rt, run_id, c, _never, notify, end_run=False) for c in JOB_COLLECTIONS
    )
