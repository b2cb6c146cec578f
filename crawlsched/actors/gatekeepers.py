"""The gatekeepers: park batches that need an account or a node, admit them as leases free up.

`admit_login` / `admit_selenium` take new batches from the planner; `wake_login` /
`wake_selenium` run an admission pass when leases of those pools are released. Each pair shares
its pool's queue, so the RabbitMQ management UI shows one queue per pool.
"""

from __future__ import annotations

from collections.abc import Iterable

import dramatiq
from dramatiq.middleware import CurrentMessage

from crawlsched.actors.sends import send_crawl, send_wake
from crawlsched.flow.admission import admit, admit_waiting
from crawlsched.logs import get_logger
from crawlsched.messages import BadMessage, BatchMessage, WakeMessage
from crawlsched.runtime import get_runtime

log = get_logger(__name__)

LOGIN_QUEUE = "crawlsched.admit.login"
SELENIUM_QUEUE = "crawlsched.admit.selenium"


@dramatiq.actor(actor_name="admit_login", queue_name=LOGIN_QUEUE, throws=(BadMessage,))
def admit_login(batch: dict) -> None:
    """Batches that need an account (and maybe a node too: then both, all or nothing)."""
    admit(get_runtime(), BatchMessage.parse(batch), send_crawl, first_delivery())


@dramatiq.actor(actor_name="admit_selenium", queue_name=SELENIUM_QUEUE, throws=(BadMessage,))
def admit_selenium(batch: dict) -> None:
    """Batches that need a Selenium node and no account."""
    admit(get_runtime(), BatchMessage.parse(batch), send_crawl, first_delivery())


def first_delivery() -> bool:
    """Neither redelivered by RabbitMQ (a worker died holding it) nor retried by dramatiq."""
    message = CurrentMessage.get_current_message()
    if message is None:
        return False  # unknown: take the careful way
    return not getattr(message, "redelivered", False) and not message.options.get("retries")


# A lost wake-up costs only time (the ticker's sweep runs the same pass), so never retry one.
@dramatiq.actor(
    actor_name="wake_login", queue_name=LOGIN_QUEUE, max_retries=0, throws=(BadMessage,)
)
def wake_login(wake: dict) -> None:
    admit_waiting(get_runtime(), WakeMessage.parse(wake).pool_keys, send_crawl)


@dramatiq.actor(
    actor_name="wake_selenium", queue_name=SELENIUM_QUEUE, max_retries=0, throws=(BadMessage,)
)
def wake_selenium(wake: dict) -> None:
    admit_waiting(get_runtime(), WakeMessage.parse(wake).pool_keys, send_crawl)


def wake_after_release(keys: Iterable[str]) -> None:
    """Run the admission pass right here, in the worker that released the leases: it saves a
    round trip through RabbitMQ for every batch admitted. If the pass fails, hand the wake-up
    to the gatekeepers' queue instead (the ticker's sweep would also cover it)."""
    try:
        admit_waiting(get_runtime(), frozenset(keys), send_crawl)
    except Exception as e:
        log.warning("wake_pass_failed", error=f"{type(e).__name__}: {e}"[:300])
        send_wake(keys)
