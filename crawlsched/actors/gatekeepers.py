"""The gatekeepers: park batches that need an account, a node or a proxy, admit them as leases
free up.

`admit_login` / `admit_selenium` / `admit_proxy` take new batches from the planner;
`wake_login` / `wake_selenium` / `wake_proxy` run an admission pass when leases of those pools
are released. Each pair shares
its pool's queue, so the RabbitMQ management UI shows one queue per pool.
"""

from __future__ import annotations

import dramatiq

from crawlsched.actors import handlers
from crawlsched.actors.sends import DRAMATIQ
from crawlsched.messages import BadMessage
from crawlsched.runtime import get_runtime

LOGIN_QUEUE = "crawlsched.admit.login"
SELENIUM_QUEUE = "crawlsched.admit.selenium"
PROXY_QUEUE = "crawlsched.admit.proxy"


@dramatiq.actor(actor_name="admit_login", queue_name=LOGIN_QUEUE, throws=(BadMessage,))
def admit_login(batch: dict) -> None:
    """Batches that need an account (and maybe a node too: then both, all or nothing)."""
    handlers.admit_batch(get_runtime(), DRAMATIQ, batch)


@dramatiq.actor(actor_name="admit_selenium", queue_name=SELENIUM_QUEUE, throws=(BadMessage,))
def admit_selenium(batch: dict) -> None:
    """Batches that need a Selenium node and no account."""
    handlers.admit_batch(get_runtime(), DRAMATIQ, batch)


@dramatiq.actor(actor_name="admit_proxy", queue_name=PROXY_QUEUE, throws=(BadMessage,))
def admit_proxy(batch: dict) -> None:
    """Batches whose media goes out through proxies and that need no account and no node."""
    handlers.admit_batch(get_runtime(), DRAMATIQ, batch)


# A lost wake-up costs only time (the ticker's sweep runs the same pass), so never retry one.
@dramatiq.actor(
    actor_name="wake_login", queue_name=LOGIN_QUEUE, max_retries=0, throws=(BadMessage,)
)
def wake_login(wake: dict) -> None:
    handlers.wake(get_runtime(), DRAMATIQ, wake)


@dramatiq.actor(
    actor_name="wake_selenium", queue_name=SELENIUM_QUEUE, max_retries=0, throws=(BadMessage,)
)
def wake_selenium(wake: dict) -> None:
    handlers.wake(get_runtime(), DRAMATIQ, wake)


@dramatiq.actor(
    actor_name="wake_proxy", queue_name=PROXY_QUEUE, max_retries=0, throws=(BadMessage,)
)
def wake_proxy(wake: dict) -> None:
    handlers.wake(get_runtime(), DRAMATIQ, wake)
