"""record_finished: apply a dispatch's report to its run (crawlsched.done)."""

from __future__ import annotations

import time

import dramatiq
from dramatiq.middleware import CurrentMessage

from crawlsched import metrics
from crawlsched.actors.sends import send_plan_children, send_webhook
from crawlsched.errors import ReportRejected
from crawlsched.flow.coordination import record_report
from crawlsched.messages import BadMessage, ReportMessage
from crawlsched.runtime import get_runtime

QUEUE = "crawlsched.done"


@dramatiq.actor(actor_name="record_finished", queue_name=QUEUE, throws=(BadMessage, ReportRejected))
def record_finished(report: dict) -> None:
    parsed = ReportMessage.parse(report)
    if message := CurrentMessage.get_current_message():
        metrics.report_received(time.time() - message.message_timestamp / 1000)
    record_report(get_runtime(), parsed, send_webhook, send_plan_children)


def apply_report(report: ReportMessage, kept: int) -> None:
    """Apply a report in this process, not through the queue: the report of a batch's part
    whose found pages the batch crawls itself must be counted before it crawls them
    (`link_flush.LinkFlush`); the queue gives no order between two reports."""
    record_report(get_runtime(), report, send_webhook, send_plan_children, kept=kept)
