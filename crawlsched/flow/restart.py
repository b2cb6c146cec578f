"""After the standalone server died without a clean stop: what its lost messages held.

Its broker lived in its own process, so every message not yet processed died with it. What
those messages carried is re-driven here, on the next start, instead of after the timeouts
that cover a worker lost on a shared broker:
- batches that were running: their dispatch leases end now, so the first tick reclaims their
  jobs and gives them back to their runs to be crawled again (work to redo, not an ending:
  no attempt is counted, `ticking.reclaim_expired`);
- resource leases: every holder is gone, so every lease is dropped;
- runs whose planning was cut off: planning is sent again (it repeats safely);
- reports of dispatches that ended jobs of a run still open are sent again: one the
  coordinator applied before is ignored (its key is on the run), one it never saw counts now.
Batches waiting for a resource and discovered pages not yet planned need nothing: the
ticker's sweeps pick them up.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.messages import ReportMessage
from crawlsched.planning.outcomes import Outcome
from crawlsched.runtime import Runtime

# Which report phase wrote an outcome. `stopped` alone says nothing: a stop releases waiting
# batches itself (no message), and a crawl that stopped between jobs also ended others.
REPORTED_BY = {
    Outcome.SUCCEEDED: "crawl",
    Outcome.FAILED: "crawl",
    Outcome.EXHAUSTED: "crawl",
    Outcome.STARVED: "admit",
    Outcome.EXPIRED: "expire",
    Outcome.GIVEN_UP: "crawl",
}


def recover_lost_messages(
    rt: Runtime,
    send_plan: Callable[[str, datetime], None],
    send_report: Callable[[ReportMessage], None],
) -> dict[str, Any]:
    now = rt.now()
    ended = now - timedelta(microseconds=1)
    batches = sum(rt.jobs(c).expire_all_running(ended) for c in JOB_COLLECTIONS)
    leases = rt.leases.drop_all()
    replanned = []
    for run in rt.runs.planning_open():
        if run.get("schedule_id") and run.get("fire_at"):
            send_plan(run["schedule_id"], run["fire_at"])
            replanned.append(run["_id"])
    reports = resend_reports(rt, send_report)
    return {
        "running_jobs_reclaimed": batches,
        "resources_freed": leases,
        "replanned": replanned,
        "reports_resent": reports,
    }


def resend_reports(rt: Runtime, send_report: Callable[[ReportMessage], None]) -> int:
    open_runs = rt.runs.unfinished_ids()
    if not open_runs:
        return 0
    sent = 0
    for collection in JOB_COLLECTIONS:
        seen: set[tuple[str, str, str]] = set()
        for job in rt.jobs(collection).ended_dispatches(open_runs):
            phase = REPORTED_BY.get(job.get("last_outcome"))
            if phase is None:
                continue
            key = (job["run_id"], job["last_dispatch_id"], phase)
            if key not in seen:
                seen.add(key)
                send_report(
                    ReportMessage(
                        run_id=key[0], dispatch_id=key[1], collection=collection, phase=phase
                    )
                )
        sent += len(seen)
    return sent
