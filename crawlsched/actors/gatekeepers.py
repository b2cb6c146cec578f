"""admit_login / admit_selenium: lease what a batch needs, then forward it to its crawl actor."""

from __future__ import annotations

import dramatiq

from crawlsched.actors.coordinator import send_report
from crawlsched.actors.crawl import send_crawl
from crawlsched.flow.admission import admit
from crawlsched.messages import BadMessage, BatchMessage
from crawlsched.runtime import get_runtime


@dramatiq.actor(actor_name="admit_login", queue_name="crawlsched.admit.login", throws=(BadMessage,))
def admit_login(batch: dict) -> None:
    """Batches that need an account (and maybe a node too: then both, all or nothing)."""
    admit(get_runtime(), BatchMessage.parse(batch), send_crawl, send_report)


@dramatiq.actor(
    actor_name="admit_selenium", queue_name="crawlsched.admit.selenium", throws=(BadMessage,)
)
def admit_selenium(batch: dict) -> None:
    """Batches that need a Selenium node and no account."""
    admit(get_runtime(), BatchMessage.parse(batch), send_crawl, send_report)
