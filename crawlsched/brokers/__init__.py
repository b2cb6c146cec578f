"""Broker set-up: RabbitMQ (amqp://) or the in-process StubBroker (stub://), with middleware.

`setup_broker(settings)` must run before `crawlsched.actors` is imported: dramatiq binds each
actor to the global broker when the actor is declared. Importing `crawlsched.actors` without it
(as the `dramatiq` CLI does) sets the broker up from CRAWLSCHED_* environment settings.
"""

from __future__ import annotations

import sys

import dramatiq
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import (
    AgeLimit,
    Callbacks,
    CurrentMessage,
    Pipelines,
    Retries,
    ShutdownNotifications,
    TimeLimit,
)

from crawlsched import runtime
from crawlsched.brokers.drain import Drain
from crawlsched.brokers.guards import GuardMessages, LogDeadLetters, WarnUnsigned
from crawlsched.brokers.middleware import LogContext
from crawlsched.brokers.rabbitmq import CrawlschedRabbitmqBroker
from crawlsched.brokers.store_gate import WaitForMongo
from crawlsched.logs import configure_logging
from crawlsched.metrics.worker import WorkerMetrics
from crawlsched.services import (
    bounded_pika_parameters,
    check_broker,
    check_mongo,
    services_or_exit,
)
from crawlsched.settings import Settings, load_settings_or_exit

_configured: dramatiq.Broker | None = None


def middleware(settings: Settings) -> list[dramatiq.Middleware]:
    # Off only by CRAWLSCHED_MESSAGE_SIGNING=false (settings refuse RabbitMQ without a key
    # otherwise); the in-process broker signs when it has a key (the standalone's).
    key = settings.message_signing_key if settings.message_signing else None
    shared = not settings.broker_url.startswith("stub://")
    return [
        *([WarnUnsigned()] if shared and key is None else []),
        # First: nothing below (AgeLimit, the actors) sees a message that fails these checks.
        GuardMessages(key.get_secret_value().encode() if key else None),
        LogContext(),
        LogDeadLetters(),
        # Before TimeLimit: time spent waiting for the store is not the message's own.
        WaitForMongo(_ping_store),
        CurrentMessage(),
        # A tick or a plan older than this is stale: the next tick will do better.
        AgeLimit(max_age=24 * 3600 * 1000),
        TimeLimit(time_limit=int(settings.crawl_time_limit_s * 1000)),
        ShutdownNotifications(),
        Callbacks(),
        Pipelines(),
        # Retries cover infrastructure trouble (MongoDB or RabbitMQ away for a moment). Crawl
        # failures are retried at the job level instead (attempt_count, backoff, exhausted).
        Retries(max_retries=5, min_backoff=500, max_backoff=30_000),
    ]


def _ping_store() -> None:
    runtime.get_runtime().db.raw.client.admin.command("ping")


def setup_broker(settings: Settings, stub_class: type[StubBroker] = StubBroker) -> dramatiq.Broker:
    """Create the broker the settings name, make it the global one, and configure this process.

    `stub_class` is the in-process broker for stub:// (the standalone server's keeps its
    messages across a clean stop)."""
    global _configured
    configure_logging(settings.log_format, settings.log_level)
    runtime.configure(settings)
    if settings.broker_url.startswith("stub://"):
        broker: dramatiq.Broker = stub_class(middleware=middleware(settings))
        broker.emit_after("process_boot")
    else:
        broker = CrawlschedRabbitmqBroker(
            url=settings.broker_urls,
            middleware=middleware(settings),
            # Every send waits for RabbitMQ's confirm; one it refuses or never confirms
            # raises (after dramatiq's own reconnecting retries) instead of vanishing.
            confirm_delivery=settings.publisher_confirms,
            queue_type=settings.queue_type,
            delivery_limit=settings.quorum_delivery_limit,
        )
        bounded_pika_parameters(broker.parameters, settings.connect_timeout_s)
        # Acts only in processes the `dramatiq` CLI boots: drain on SIGTERM, and a heartbeat.
        broker.add_middleware(
            Drain(settings.drain_s, settings.worker_heartbeat_file, settings.worker_heartbeat_s)
        )
        if settings.metrics_enabled:
            # Acts only in processes the `dramatiq` CLI boots (see crawlsched.metrics.worker).
            broker.add_middleware(WorkerMetrics(settings))
    dramatiq.set_broker(broker)
    _configured = broker
    _rebind_declared_actors(broker)
    return broker


def _rebind_declared_actors(broker: dramatiq.Broker) -> None:
    """Move actors declared under an earlier broker of this process onto this one.

    dramatiq binds an actor to the broker that was global when it was declared. A process that
    sets up a second broker (tests switching between stub and RabbitMQ) must carry them over.
    """
    actors_module = sys.modules.get("crawlsched.actors")
    # Absent, or still importing (it is what called us): its actors will bind as declared.
    if actors_module is None or not hasattr(actors_module, "all_actors"):
        return
    for actor in actors_module.all_actors():
        actor.broker = broker
        broker.declare_actor(actor)


def ensure_broker() -> dramatiq.Broker:
    """The broker set up by this process, or one from the environment (the `dramatiq` CLI).

    A worker started by the `dramatiq` CLI checks both services before it takes a message:
    one that cannot be reached is one line and exit 1, not a worker that looks ready.
    """
    if _configured is not None:
        return _configured
    settings = load_settings_or_exit()
    with services_or_exit(settings):
        broker = setup_broker(settings)
        check_broker(settings, getattr(broker, "parameters", None))
        check_mongo(settings, runtime.get_runtime())
    return broker
