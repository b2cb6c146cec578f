"""The coordinator: apply each dispatch's report once; finish the run when nothing is left.

A report is a claim, not a fact. What it counts is read from the jobs: those of its run whose
last outcome was written by its dispatch, with an outcome of its phase. A report for a dispatch
that still holds jobs, that finished no job of that run, or for a run that does not exist is
refused (dead-lettered by the actor), so a forged or foreign report changes nothing.
"""

from __future__ import annotations

from typing import Any

from crawlsched import metrics
from crawlsched.errors import ReportRejected
from crawlsched.logs import get_logger
from crawlsched.messages import ReportMessage
from crawlsched.planning.outcomes import PHASE_OUTCOMES
from crawlsched.runtime import Runtime
from crawlsched.store.runs import is_done

log = get_logger(__name__)


def finish_if_done(rt: Runtime, run: dict[str, Any]) -> bool:
    if not is_done(run) or not rt.runs.finish(run["_id"], rt.now()):
        return False
    metrics.run_finished()
    counts = run.get("counts", {})
    log.info("run_finished", run_id=run["_id"], planned=run.get("planned"), **counts)
    rt.db.activity.insert_one(
        {"event": "RunFinished", "run_id": run["_id"], "at": rt.now(), "counts": counts}
    )
    return True


def record_report(rt: Runtime, report: ReportMessage) -> bool:
    """Returns True if this report finished its run; raises ReportRejected for a false one."""
    store = rt.jobs(report.collection)
    seen = store.dispatch_report(report.dispatch_id, report.run_id, PHASE_OUTCOMES[report.phase])
    if seen.held:
        raise ReportRejected(report.report_key, f"its dispatch still holds {seen.held} jobs")
    if not seen.counts:
        raise ReportRejected(
            report.report_key, f"no job of run {report.run_id[:100]!r} ended in that dispatch"
        )
    run = rt.runs.report(
        report.run_id, report.report_key, seen.counts, stages_ms=report.stages_ms, links=seen.links
    )
    if run is None:
        if rt.runs.get(report.run_id) is None:
            raise ReportRejected(report.report_key, "no such run")
        metrics.report_ignored()
        log.info("report_ignored_duplicate", report_key=report.report_key)
        return False
    return finish_if_done(rt, run)
