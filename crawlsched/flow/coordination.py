"""The coordinator: apply each dispatch's report once; finish the run when nothing is left."""

from __future__ import annotations

from typing import Any

from crawlsched import metrics
from crawlsched.logs import get_logger
from crawlsched.messages import ReportMessage
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
    """Returns True if this report finished its run."""
    run = rt.runs.report(
        report.run_id, report.report_key, report.counts, report.discovered, report.stages_ms
    )
    if run is None:
        metrics.report_ignored()
        log.info("report_ignored_duplicate_or_unknown_run", report_key=report.report_key)
        return False
    return finish_if_done(rt, run)
