"""deliver_webhook: POST one run-end notification (crawlsched.notify), retried with backoff."""

from __future__ import annotations

import dramatiq

from crawlsched.actors import handlers
from crawlsched.actors.sends import DRAMATIQ
from crawlsched.runtime import get_runtime

QUEUE = "crawlsched.notify"


@dramatiq.actor(
    actor_name="deliver_webhook",
    queue_name=QUEUE,
    # A receiver down for a while: ~1 s, 2 s, 4 s … up to 5 minutes between tries, 12 tries.
    max_retries=12,
    min_backoff=1_000,
    max_backoff=300_000,
)
def deliver_webhook(delivery_id: str) -> None:
    handlers.deliver_webhook(get_runtime(), DRAMATIQ, delivery_id)
