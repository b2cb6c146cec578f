"""record_finished: apply a dispatch's report to its run (crawlsched.done)."""

from __future__ import annotations

import dramatiq

from crawlsched.actors import handlers
from crawlsched.actors.sends import DRAMATIQ
from crawlsched.errors import ReportRejected
from crawlsched.messages import BadMessage
from crawlsched.runtime import get_runtime

QUEUE = "crawlsched.done"


@dramatiq.actor(actor_name="record_finished", queue_name=QUEUE, throws=(BadMessage, ReportRejected))
def record_finished(report: dict) -> None:
    handlers.record_finished(get_runtime(), DRAMATIQ, report)
