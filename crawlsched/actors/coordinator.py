"""record_finished: apply a dispatch's report to its run (crawlsched.done)."""

from __future__ import annotations

import dramatiq

from crawlsched.actors.notifier import send_webhook
from crawlsched.flow.coordination import record_report
from crawlsched.messages import BadMessage, ReportMessage
from crawlsched.runtime import get_runtime

QUEUE = "crawlsched.done"


@dramatiq.actor(actor_name="record_finished", queue_name=QUEUE, throws=(BadMessage,))
def record_finished(report: dict) -> None:
    record_report(get_runtime(), ReportMessage.parse(report), send_webhook)


def send_report(report: ReportMessage) -> None:
    record_finished.send(report.payload())
