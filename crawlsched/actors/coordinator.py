"""record_finished: apply a dispatch's report to its run (crawlsched.done)."""

from __future__ import annotations

import dramatiq

from crawlsched.errors import ReportRejected
from crawlsched.flow.coordination import record_report
from crawlsched.messages import BadMessage, ReportMessage
from crawlsched.runtime import get_runtime

QUEUE = "crawlsched.done"


@dramatiq.actor(actor_name="record_finished", queue_name=QUEUE, throws=(BadMessage, ReportRejected))
def record_finished(report: dict) -> None:
    record_report(get_runtime(), ReportMessage.parse(report))


def send_report(report: ReportMessage) -> None:
    record_finished.send(report.payload())
