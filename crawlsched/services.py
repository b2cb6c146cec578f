"""Reaching MongoDB and RabbitMQ: within the connect timeout, or one line saying what to check.

Used at the edges (CLI commands, the clock, a worker's start). The URL shown never carries a
password, and each failure names the setting to look at.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pika
import pika.exceptions
import pymongo.errors
from dramatiq.errors import BrokerConnectionError

from crawlsched.drivers.targets import redact
from crawlsched.errors import ServiceUnreachable
from crawlsched.settings import Settings

MONGO_HINT = "is MongoDB running, and is CRAWLSCHED_MONGO_URL right?"
BROKER_HINT = (
    "is RabbitMQ running, and do the user, password and vhost of CRAWLSCHED_BROKER_URL exist?"
)


def mongo_unreachable(settings: Settings, error: BaseException) -> ServiceUnreachable:
    return ServiceUnreachable(
        "MongoDB", redact(settings.mongo_url), MONGO_HINT, error_reason(error)
    )


def broker_unreachable(settings: Settings, error: BaseException) -> ServiceUnreachable:
    shown = ";".join(redact(url) for url in settings.broker_urls)
    return ServiceUnreachable("RabbitMQ", shown, BROKER_HINT, error_reason(error))


def error_reason(error: BaseException) -> str:
    """`Type: first line of the message`, the way a log line or an error names a failure."""
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def bounded_pika_parameters(parameters, timeout_s: float) -> None:
    """One connection attempt, bounded by the connect timeout (pika retries for long otherwise)."""
    for p in parameters if isinstance(parameters, list) else [parameters]:
        p.connection_attempts = 1
        p.retry_delay = 0
        p.socket_timeout = timeout_s
        p.stack_timeout = timeout_s
        p.blocked_connection_timeout = max(timeout_s, 30.0)


def check_broker(settings: Settings, parameters) -> None:
    """Open one connection to RabbitMQ and close it; ServiceUnreachable if it cannot be done."""
    if settings.broker_url.startswith("stub://"):
        return
    candidates = parameters if isinstance(parameters, list) else [parameters]
    try:
        connection = pika.BlockingConnection(candidates)
    except (pika.exceptions.AMQPError, OSError) as e:
        raise broker_unreachable(settings, e) from None
    connection.close()


def check_mongo(settings: Settings, runtime) -> None:
    """Open the runtime's database (connect and ping, within the connect timeout)."""
    try:
        runtime.db  # noqa: B018 (opening it is the check)
    except pymongo.errors.PyMongoError as e:
        raise mongo_unreachable(settings, e) from None


@contextmanager
def services_or_exit(settings: Settings) -> Iterator[None]:
    """Around a process's start (worker, clock): a service that cannot be reached is one line
    on stderr and exit status 1, never a traceback."""
    try:
        yield
    except ServiceUnreachable as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    except pymongo.errors.ConnectionFailure as e:
        print(f"error: {mongo_unreachable(settings, e)}", file=sys.stderr)
        raise SystemExit(1) from None
    except (pika.exceptions.AMQPError, BrokerConnectionError) as e:
        print(f"error: {broker_unreachable(settings, e)}", file=sys.stderr)
        raise SystemExit(1) from None
